// Package metrics exposes the gateway's Prometheus metrics: execs by host,
// decision and outcome, exec duration, pending approvals, connected nodes,
// node invoke latency and dropped events. It owns its own registry (not the
// global default) so tests and several gateways in one process never
// collide, and the metric names are a public contract for dashboards.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Outcome label values for ObserveExec.
const (
	OutcomeSuccess = "success" // ran and exited 0
	OutcomeFailure = "failure" // ran and exited non-zero, or failed to start
	OutcomeTimeout = "timeout" // killed at its timeout
	OutcomeDenied  = "denied"  // never ran
)

// Metrics is the gateway's set of collectors in its own registry. A nil
// *Metrics is valid and records nothing, so callers need no "metrics
// enabled?" checks.
type Metrics struct {
	reg             *prometheus.Registry
	execs           *prometheus.CounterVec
	execDuration    *prometheus.HistogramVec
	pendingApproval prometheus.Gauge
	connectedNodes  prometheus.Gauge
	invokeSeconds   prometheus.Histogram
	eventDrops      prometheus.Counter
	decisions       *prometheus.CounterVec
}

// New creates the collectors and registers them, with the Go runtime and
// process collectors, in a fresh registry.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		execs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "exechost_execs_total",
			Help: "Exec requests by execution host, final decision (allow, ask, deny) and outcome (success, failure, timeout, denied).",
		}, []string{"host", "decision", "outcome"}),
		execDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "exechost_exec_duration_seconds",
			Help:    "Wall time of commands that ran, by execution host.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800},
		}, []string{"host"}),
		pendingApproval: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "exechost_pending_approvals",
			Help: "Prompts waiting for a human decision.",
		}),
		connectedNodes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "exechost_connected_nodes",
			Help: "Paired nodes currently connected to the gateway.",
		}),
		invokeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "exechost_node_invoke_seconds",
			Help:    "Round trip of node.invoke requests, from send to result.",
			Buckets: prometheus.DefBuckets,
		}),
		eventDrops: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "exechost_event_queue_drops_total",
			Help: "System events dropped because a session's queue was full.",
		}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "exechost_gateway_decisions_total",
			Help: "Decisions the gateway itself made and audited, by action (exec, node.approve, …), event (decision, denied, finished), reason code and execution host.",
		}, []string{"action", "event", "reason", "host"}),
	}
	m.reg.MustRegister(m.execs, m.execDuration, m.pendingApproval, m.connectedNodes, m.invokeSeconds, m.eventDrops, m.decisions,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ObserveExec counts one exec request. d is the command's wall time and is
// recorded only for commands that ran (outcome other than denied).
func (m *Metrics) ObserveExec(host, decision, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.execs.WithLabelValues(host, decision, outcome).Inc()
	if outcome != OutcomeDenied {
		m.execDuration.WithLabelValues(host).Observe(d.Seconds())
	}
}

// SetPendingApprovals sets how many prompts wait for a human.
func (m *Metrics) SetPendingApprovals(n int) {
	if m != nil {
		m.pendingApproval.Set(float64(n))
	}
}

// SetConnectedNodes sets how many nodes are connected.
func (m *Metrics) SetConnectedNodes(n int) {
	if m != nil {
		m.connectedNodes.Set(float64(n))
	}
}

// ObserveNodeInvoke records one node.invoke round trip.
func (m *Metrics) ObserveNodeInvoke(d time.Duration) {
	if m != nil {
		m.invokeSeconds.Observe(d.Seconds())
	}
}

// EventQueueDrop counts one dropped system event.
func (m *Metrics) EventQueueDrop() {
	if m != nil {
		m.eventDrops.Inc()
	}
}

// Registry returns the registry, for components that add their own
// collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Serve listens on addr and serves /metrics until ctx is done. It returns
// once the listener is closed; a listen failure is returned at once. Metrics
// carry no secrets but do reveal activity: bind to loopback unless a
// scraper elsewhere needs them.
func (m *Metrics) Serve(ctx context.Context, addr string) error {
	ln, err := Listen(addr)
	if err != nil {
		return err
	}
	return m.ServeListener(ctx, ln)
}

// Listen binds the metrics address, so a daemon can fail at start on a
// bad or busy one before serving with ServeListener.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listen %s: %w (hint: pick a free address such as 127.0.0.1:9464)", addr, err)
	}
	return ln, nil
}

// ServeListener is Serve on an existing listener (tests use port 0).
func (m *Metrics) ServeListener(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			srv.Shutdown(shutdownCtx)
		case <-done:
		}
	}()
	err := srv.Serve(ln)
	close(done)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("metrics serve: %w", err)
}
