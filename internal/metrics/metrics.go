// Package metrics exposes the gateway's Prometheus metrics: execs by host,
// decision and outcome, exec duration, pending approvals, connected nodes,
// node invoke latency and dropped events, with the Go runtime's and the
// process's usual go_* and process_* series. Each Metrics is its own set
// (no global registry), so tests and several gateways in one process never
// collide, and the metric names are a public contract for dashboards. The
// text format is written here (expose.go), not by the Prometheus client
// library, whose package initialisation every start of the binary paid.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/exechost/exechost/internal/hint"
)

// Outcome label values for ObserveExec.
const (
	OutcomeSuccess = "success" // ran and exited 0
	OutcomeFailure = "failure" // ran and exited non-zero, or failed to start
	OutcomeTimeout = "timeout" // killed at its timeout
	OutcomeDenied  = "denied"  // never ran
)

// Metrics is the gateway's set of metrics, its own (no global registry).
// A nil *Metrics is valid and records nothing, so callers need no
// "metrics enabled?" checks.
type Metrics struct {
	execs           *counterVec
	execDuration    *histogramVec
	pendingApproval gauge
	connectedNodes  gauge
	invokeSeconds   *histogramVec
	eventDrops      *counterVec
	decisions       *counterVec
	process         func() []family // the Go runtime's and the process's
}

// New creates the metrics, all at zero.
func New() *Metrics {
	return &Metrics{
		execs:         newCounterVec("host", "decision", "outcome"),
		execDuration:  newHistogramVec([]float64{0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800}, "host"),
		invokeSeconds: newHistogramVec(defBuckets),
		eventDrops:    newCounterVec(),
		decisions:     newCounterVec("action", "event", "reason", "host"),
		process:       runtimeFamilies,
	}
}

// families lists what a scrape writes, sorted by name as the client
// library sorted them; the metric names are a public contract for
// dashboards.
func (m *Metrics) families() []family {
	fs := []family{
		{"exechost_execs_total", "Exec requests by execution host, final decision (allow, ask, deny) and outcome (success, failure, timeout, denied).", typeCounter, m.execs.write},
		{"exechost_exec_duration_seconds", "Wall time of commands that ran, by execution host.", typeHistogram, m.execDuration.write},
		scalar("exechost_pending_approvals", "Prompts waiting for a human decision.", typeGauge, func() float64 { return float64(m.pendingApproval.v.Load()) }),
		scalar("exechost_connected_nodes", "Paired nodes currently connected to the gateway.", typeGauge, func() float64 { return float64(m.connectedNodes.v.Load()) }),
		{"exechost_node_invoke_seconds", "Round trip of node.invoke requests, from send to result.", typeHistogram, m.invokeSeconds.write},
		{"exechost_event_queue_drops_total", "System events dropped because a session's queue was full.", typeCounter, m.eventDrops.write},
		{"exechost_gateway_decisions_total", "Decisions the gateway itself made and audited, by action (exec, node.approve, …), event (decision, denied, finished), reason code and execution host.", typeCounter, m.decisions.write},
	}
	fs = append(fs, m.process()...)
	slices.SortFunc(fs, func(a, b family) int { return strings.Compare(a.name, b.name) })
	return fs
}

// ObserveExec counts one exec request. d is the command's wall time and is
// recorded only for commands that ran (outcome other than denied).
func (m *Metrics) ObserveExec(host, decision, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.execs.inc(host, decision, outcome)
	if outcome != OutcomeDenied {
		m.execDuration.observe(d.Seconds(), host)
	}
}

// SetPendingApprovals sets how many prompts wait for a human.
func (m *Metrics) SetPendingApprovals(n int) {
	if m != nil {
		m.pendingApproval.set(n)
	}
}

// SetConnectedNodes sets how many nodes are connected.
func (m *Metrics) SetConnectedNodes(n int) {
	if m != nil {
		m.connectedNodes.set(n)
	}
}

// ObserveNodeInvoke records one node.invoke round trip.
func (m *Metrics) ObserveNodeInvoke(d time.Duration) {
	if m != nil {
		m.invokeSeconds.observe(d.Seconds())
	}
}

// EventQueueDrop counts one dropped system event.
func (m *Metrics) EventQueueDrop() {
	if m != nil {
		m.eventDrops.inc()
	}
}

// Handler serves the metrics in the Prometheus text exposition format.
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		m.WriteText(w)
	})
}

// WriteText writes every metric in the Prometheus text exposition format
// (version 0.0.4) and returns the first write error.
func (m *Metrics) WriteText(w io.Writer) error {
	e := &expWriter{w: w}
	for _, f := range m.families() {
		e.header(f)
		f.write(e, f.name)
		if e.flush(); e.err != nil {
			break
		}
	}
	return e.err
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
		return nil, hint.Wrap(fmt.Errorf("metrics listen %s: %w", addr, err), "pick a free address such as 127.0.0.1:9464")
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
