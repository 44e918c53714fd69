package metrics

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/testproc"
)

// scrape starts a real loopback server for m and returns its /metrics body.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.ServeListener(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := testproc.Recv(t, done, "ServeListener's return after cancel"); err != nil {
			t.Errorf("ServeListener: %v", err)
		}
	})
	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %s", resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

func TestScrape(t *testing.T) {
	m := New()
	m.ObserveExec("node", "allow", OutcomeSuccess, 2*time.Second)
	m.ObserveExec("node", "allow", OutcomeSuccess, 3*time.Second)
	m.ObserveExec("gateway", "deny", OutcomeDenied, 0)
	m.ObserveExec("gateway", "ask", OutcomeTimeout, time.Minute)
	m.SetPendingApprovals(3)
	m.SetConnectedNodes(2)
	m.ObserveNodeInvoke(150 * time.Millisecond)
	m.EventQueueDrop()
	m.EventQueueDrop()

	body := scrape(t, m)
	for _, want := range []string{
		`exechost_execs_total{decision="allow",host="node",outcome="success"} 2`,
		`exechost_execs_total{decision="deny",host="gateway",outcome="denied"} 1`,
		`exechost_execs_total{decision="ask",host="gateway",outcome="timeout"} 1`,
		`exechost_exec_duration_seconds_count{host="node"} 2`,
		`exechost_exec_duration_seconds_sum{host="node"} 5`,
		`exechost_exec_duration_seconds_count{host="gateway"} 1`,
		`exechost_pending_approvals 3`,
		`exechost_connected_nodes 2`,
		`exechost_node_invoke_seconds_count 1`,
		`exechost_node_invoke_seconds_bucket{le="0.25"} 1`,
		`exechost_event_queue_drops_total 2`,
		`go_goroutines`,
		`# HELP exechost_execs_total`,
	} {
		if !strings.Contains(body, want+"\n") && !strings.Contains(body, want+" ") {
			t.Errorf("scrape lacks %q", want)
		}
	}
}

func TestNilMetricsRecordNothing(t *testing.T) {
	var m *Metrics
	m.ObserveExec("node", "allow", OutcomeSuccess, time.Second)
	m.SetPendingApprovals(1)
	m.SetConnectedNodes(1)
	m.ObserveNodeInvoke(time.Second)
	m.EventQueueDrop()
}

func TestIndependentRegistries(t *testing.T) {
	a, b := New(), New()
	a.SetConnectedNodes(5)
	if body := scrape(t, b); !strings.Contains(body, "exechost_connected_nodes 0\n") {
		t.Errorf("second registry saw the first one's value")
	}
}

func TestServeBadAddress(t *testing.T) {
	err := New().Serve(context.Background(), "127.0.0.1:-1")
	if err == nil || !strings.Contains(err.Error(), "hint:") {
		t.Errorf("Serve(bad addr) = %v, want an error with a hint", err)
	}
}

func TestOnlyMetricsPath(t *testing.T) {
	m := New()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.ServeListener(ctx, ln)
	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET / = %s, want 404", resp.Status)
	}
}
