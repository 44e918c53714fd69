package gateway

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/session"
)

// lostBackend is a sandbox backend whose daemon is gone: every Exec fails
// as sandbox.Backend says a backend's own failure does (the e2e suite's
// sandbox test does the same with a real bwrap backend).
type lostBackend struct{}

func (lostBackend) Name() string { return "lost" }

func (lostBackend) Exec(context.Context, sandbox.Request) (runner.Result, error) {
	return runner.Result{}, errors.New("daemon unreachable at unix:///nowhere")
}

func (lostBackend) Close(context.Context) error { return nil }

// TestSandboxFailureIsNotADenial: when the sandbox backend fails, the
// caller, the audit log and the session's events all say the run failed;
// none of them calls it denied (nothing decided against the command).
func TestSandboxFailureIsNotADenial(t *testing.T) {
	rec := &memRecorder{}
	g, err := New(Options{StateDir: t.TempDir(), Audit: rec, Sandbox: lostBackend{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	_, err = g.Exec(context.Background(), bridge.ExecParams{Command: "echo hi", Host: "sandbox", AgentID: "a", SessionKey: "s"})
	if be := bridge.AsError(err); be.Code != bridge.CodeUnavailable || !strings.Contains(be.Message, "daemon unreachable") {
		t.Fatalf("exec = %v; want UNAVAILABLE naming the backend's failure", err)
	}
	rec.mu.Lock()
	recs := rec.recs
	rec.mu.Unlock()
	var kinds []string
	for _, r := range recs {
		kinds = append(kinds, r.Event+"/"+r.ReasonCode)
	}
	if len(recs) != 2 || kinds[0] != "decision/allowed" || kinds[1] != "finished/sandbox-error" {
		t.Fatalf("records %v; want decision/allowed then finished/sandbox-error", kinds)
	}
	if fin := recs[1]; fin.Decision != audit.DecisionAllow || fin.ExitCode != nil || !strings.Contains(fin.Error, "daemon unreachable") ||
		fin.Backend != "lost" || fin.RunID == "" || fin.RunID != recs[0].RunID {
		t.Errorf("failure record = %+v", fin)
	}
	var texts []string
	for _, ev := range g.sessions.Drain(session.NewKey("a", "s")) {
		texts = append(texts, ev.Kind)
		if ev.Kind == bridge.EventExecFailed && !strings.HasPrefix(ev.Text, "Exec failed (node=sandbox, id=run-") {
			t.Errorf("failed event text = %q", ev.Text)
		}
	}
	if strings.Join(texts, " ") != bridge.EventExecStarted+" "+bridge.EventExecFailed {
		t.Errorf("events %v; want started then failed", texts)
	}
}
