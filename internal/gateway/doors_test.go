package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/gateway"
)

// TestCallerBoundsControl is TestCallerBounds' control: with the same
// small bounds raised, the same credential's fourth connection is taken
// and its third request in flight is answered rather than BUSY, so what
// TestCallerBounds refuses is the bounds' doing.
func TestCallerBoundsControl(t *testing.T) {
	var dir string
	e := newEnv(t, twoAgentsConfig, func(o *gateway.Options) { dir = o.StateDir })
	gateway.SetCallerLimits(e.g, 1000, 1000, 0)
	hog, _, err := gateway.IssueCredential(dir, gateway.IssueOptions{Name: "hog", Role: bridge.RoleAgent, Agent: "hog", Out: "-"})
	if err != nil {
		t.Fatal(err)
	}
	var conns []*bridge.Conn
	for range 4 {
		conns = append(conns, credConn(t, e, hog))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	slow := make(chan error, 2)
	for i := range 2 {
		go func() {
			slow <- conns[i].Call(ctx, bridge.MethodExec, bridge.ExecParams{Command: "sleep 2", AgentID: "hog"}, &bridge.ExecResult{})
		}()
	}
	time.Sleep(300 * time.Millisecond) // both slow execs are in flight by now (were they not, the call below proves nothing more)
	if err := conns[2].Call(ctx, bridge.MethodSessionEvents, bridge.SessionParams{}, &bridge.SessionEventsResult{}); err != nil {
		t.Fatalf("control: a third request with the bounds raised = %v, want answered", err)
	}
	for range 2 {
		if err := testRecv(t, slow); err != nil {
			t.Fatalf("hog's slow exec: %v", err)
		}
	}
}
