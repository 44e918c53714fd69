//go:build unix

package gateway_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/gateway"
	"github.com/exechost/exechost/internal/testproc"
)

// TestDrainOnStop checks that a stopping gateway lets a running exec
// finish and refuses new ones meanwhile, and that it logs the drain once
// at its start and once at its end however long it waits. The exec is
// held on a FIFO, so it is running for exactly as long as the test says.
func TestDrainOnStop(t *testing.T) {
	var logs testproc.Buffer
	e := newEnv(t, `{"tools":{"exec":{"host":"gateway","security":"full","ask":"off"}}}`, func(o *gateway.Options) {
		o.DrainTimeout = time.Minute
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	agent := e.client(t, bridge.RoleAgent)
	held := newBlocker(t, "held")
	type outcome struct {
		res bridge.ExecResult
		err error
	}
	running := make(chan outcome, 1)
	go func() {
		res, err := call[bridge.ExecResult](t, agent, bridge.MethodExec, bridge.ExecParams{Command: held.command() + "; echo finished"})
		running <- outcome{res, err}
	}()
	held.waitStarted(t)
	e.stop()
	deadline := time.Now().Add(30 * time.Second)
	for !e.g.Draining() {
		if time.Now().After(deadline) {
			t.Fatal("the gateway did not start draining within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := call[bridge.ExecResult](t, e.client(t, bridge.RoleAgent), bridge.MethodExec, bridge.ExecParams{Command: "true"}); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("new exec while draining: %v, want a shutting-down refusal", err)
	}
	// Hold the drain over several of its polls (100 ms each): a drain
	// that logged on every poll would log several start lines by now. The
	// pause only strengthens the check; no outcome depends on its length.
	time.Sleep(350 * time.Millisecond)
	held.release(t)
	select {
	case o := <-running:
		if o.err != nil || o.res.Stdout != "done\nfinished\n" {
			t.Fatalf("running exec was cut off: %v %+v", o.err, o.res)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("running exec never answered")
	}
	recv(t, e.done, "the gateway to stop after its last exec finished")
	out := logs.String()
	if n := strings.Count(out, "draining: waiting"); n != 1 {
		t.Errorf("%d drain-start lines, want 1:\n%s", n, out)
	}
	if n := strings.Count(out, "drained: every running exec finished"); n != 1 {
		t.Errorf("%d drain-end lines, want 1:\n%s", n, out)
	}
}
