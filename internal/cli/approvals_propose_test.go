package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
)

// TestApprovalsProposeRoundTrip: propose reads what humans answered in the
// audit log and prints a file that `approvals set` takes; afterwards the
// engine allows what was approved (and more of the same first argument)
// without a prompt, and still not what a human denied — the control: before
// the round trip none of it was allowed.
func TestApprovalsProposeRoundTrip(t *testing.T) {
	root := t.TempDir()
	state, work, bin := filepath.Join(root, "state"), filepath.Join(root, "work"), filepath.Join(root, "bin")
	for _, d := range []string{work, bin} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tool, other := filepath.Join(bin, "tool"), filepath.Join(bin, "other")
	for _, p := range []string{tool, other} {
		if err := os.WriteFile(p, []byte("#!/bin/sh\necho \"$@\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := approvals.NewStore(state).Update(func(f *approvals.File) error {
		f.Defaults.Security, f.Defaults.Ask, f.Defaults.AskFallback = "allowlist", "off", "deny"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rec, err := audit.OpenRecorder(state, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []audit.Record{
		{Argv: []string{tool, "build", "a"}, Approval: "allow-once", Decision: "allow"},
		{Argv: []string{tool, "build", "-v", "b"}, Approval: "allow-always", Decision: "allow"},
		{Argv: []string{tool, "clean", "--all"}, Approval: "deny", Decision: "deny"},
		{Argv: []string{other, "x"}, Approval: "allow-once", Decision: "allow"},
		{Argv: []string{other, "y"}, Approval: "allow-once", Decision: "allow"},
		{Argv: []string{"/bin/sh", "-c", "python3 -c 1"}, Approval: "allow-once", Decision: "allow"},
	} {
		r.Event, r.AgentID, r.Cwd = audit.EventDecision, "main", work
		if err := rec.Record(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	decide := func(argv ...string) policy.Outcome {
		t.Helper()
		e := host.NewEngine(state, policy.HostGateway, "t")
		defer func() { _ = e.Close() }()
		p, err := e.Prepare(host.Request{Argv: argv, Cwd: work, AgentID: "main"})
		if err != nil {
			t.Fatal(err)
		}
		return p.Decision.Outcome
	}
	cli := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		r := NewRoot(&stdout, &stderr)
		r.SetArgs(append(args, "--state-dir", state))
		if err := r.Execute(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr.String())
		}
		return stdout.String()
	}
	wantAllowed := [][]string{{tool, "build", "c"}, {other, "z"}}
	wantDenied := [][]string{{tool, "clean", "--all"}, {tool, "install"}}
	for _, argv := range append(wantAllowed, wantDenied...) {
		if got := decide(argv...); got == policy.Allow {
			t.Fatalf("control: %v allowed before the round trip", argv)
		}
	}

	out := cli("approvals", "propose", "--since", "1h")
	if !strings.Contains(out, `"args"`) || !strings.Contains(out, tool+" build a") {
		t.Fatalf("propose printed no argument rule with its examples:\n%s", out)
	}
	if strings.Contains(out, `"token"`) {
		t.Fatalf("propose printed the approver's token:\n%s", out)
	}
	file := filepath.Join(root, "proposed.json")
	if err := os.WriteFile(file, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	cli("approvals", "set", "--file", file)
	for _, argv := range wantAllowed {
		if got := decide(argv...); got != policy.Allow {
			t.Errorf("after the round trip %v: %s, want allow", argv, got)
		}
	}
	for _, argv := range wantDenied {
		if got := decide(argv...); got == policy.Allow {
			t.Errorf("after the round trip %v is allowed: a human denied it (or it is no approved form)", argv)
		}
	}
	if got := decide("/bin/sh", "-c", "python3 -c 1"); got == policy.Allow {
		t.Error("an interpreter was proposed")
	}
	// Nothing left to propose; --apply says so and writes nothing.
	if out := cli("approvals", "propose", "--apply"); !strings.Contains(out, "nothing to propose") {
		t.Errorf("second propose --apply: %s", out)
	}
}
