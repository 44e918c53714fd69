package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/state"
)

type stubPrompter struct{ wrapped Prompter }

func (stubPrompter) Prompt(context.Context, prompt.Request) (policy.Approval, string, error) {
	return policy.Reject, "stub", nil
}

// TestNewBuildsTheEngine: one call sets every part the daemons used to set
// in steps; the route receives Options.Prompter (the local socket
// prompter, in the daemons) to wrap.
func TestNewBuildsTheEngine(t *testing.T) {
	dir := t.TempDir()
	rec, err := audit.OpenRecorder(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	var gotLocal Prompter
	local := &stubPrompter{} // a pointer: compared by identity below
	e, err := New(Options{
		StateDir: dir, Host: policy.HostNode, NodeID: "n1", Audit: rec, OnEvent: func(bridge.ExecEvent) {}, Prompter: local,
		Route: func(local Prompter) (Prompter, error) { gotLocal = local; return stubPrompter{local}, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.Host != policy.HostNode || e.NodeID != "n1" || e.OnEvent == nil || e.OnAudit == nil {
		t.Errorf("engine %+v: host, node id, events or audit not set", e)
	}
	if gotLocal != Prompter(local) {
		t.Errorf("route got %#v, want Options.Prompter to wrap", gotLocal)
	}
	if p, ok := e.Prompter.(stubPrompter); !ok || p.wrapped != gotLocal {
		t.Errorf("prompter %T, want the route's", e.Prompter)
	}
	if _, err := os.Stat(filepath.Join(dir, "exec-approvals.json")); err != nil {
		t.Errorf("approvals file not created: %v", err)
	}
}

// TestNewRefusesBadInput: a malformed approvals file, a failing route and
// a negative prompt timeout are errors before anything can run.
func TestNewRefusesBadInput(t *testing.T) {
	t.Run("malformed approvals", func(t *testing.T) {
		dir := t.TempDir()
		if err := state.Ensure(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "exec-approvals.json"), []byte("{not json"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := New(Options{StateDir: dir}); err == nil {
			t.Fatal("New accepted a malformed approvals file")
		}
	})
	t.Run("route error", func(t *testing.T) {
		boom := errors.New("boom")
		_, err := New(Options{StateDir: t.TempDir(), Route: func(Prompter) (Prompter, error) { return nil, boom }})
		if !errors.Is(err, boom) {
			t.Fatalf("New = %v, want the route's error", err)
		}
	})
	t.Run("negative timeout", func(t *testing.T) {
		if _, err := New(Options{StateDir: t.TempDir(), PromptTimeout: -1}); err == nil {
			t.Fatal("New accepted a negative prompt timeout")
		}
	})
}

// TestAuditRecorderNil keeps a missing audit log a nil hook (no auditing)
// rather than a hook that calls a nil log.
func TestAuditRecorderNil(t *testing.T) {
	if AuditRecorder(nil) != nil {
		t.Fatal("AuditRecorder(nil) is not nil")
	}
}
