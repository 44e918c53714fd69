//go:build unix

package gateway_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/node"
	"github.com/exechost/exechost/internal/state"
)

// blocker is a command the test holds: it waits on a FIFO until the test
// writes to it, so a run stays in flight exactly as long as the test says.
type blocker struct {
	fifo    string
	started string // created by the command before it waits
	done    bool   // released
}

func newBlocker(t *testing.T, name string) *blocker {
	t.Helper()
	dir := t.TempDir()
	b := &blocker{fifo: filepath.Join(dir, name), started: filepath.Join(dir, name+".started")}
	if err := syscall.Mkfifo(b.fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Whatever the test does, a started command ends, so nothing
	// outlives the test.
	t.Cleanup(func() {
		if _, err := os.Stat(b.started); err == nil && !b.done {
			b.release(t)
		}
	})
	return b
}

// command says it started, then reads one line from the FIFO and prints
// it.
func (b *blocker) command() string { return ": > " + b.started + "; head -n1 " + b.fifo }

// waitStarted waits (bounded) until the command runs: its execution host
// has admitted it.
func (b *blocker) waitStarted(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(b.started); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start within 30s", b.command())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// release lets the command finish. Opening for writing waits until the
// command has opened the FIFO for reading; O_NONBLOCK makes that an error
// (ENXIO) instead, retried until the deadline, so release never hangs on
// a command that never started.
func (b *blocker) release(t *testing.T) {
	t.Helper()
	b.done = true
	deadline := time.Now().Add(30 * time.Second)
	for {
		f, err := os.OpenFile(b.fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			_, err = f.WriteString("done\n")
			_ = f.Close()
			if err != nil {
				t.Errorf("release %s: %v", b.fifo, err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("release %s: no reader within 30s: %v", b.fifo, err)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startHeld starts b's command in the background as agent and waits
// until it runs: it cannot finish before b is released.
func startHeld(t *testing.T, c *bridge.Conn, agent string, b *blocker, p bridge.ExecParams) string {
	t.Helper()
	p.Command, p.AgentID, p.SessionKey, p.YieldMs = b.command(), agent, "s", 1
	res, err := call[bridge.ExecResult](t, c, bridge.MethodExec, p)
	if err != nil {
		t.Fatalf("exec as %s: %v", agent, err)
	}
	if res.Status != bridge.ExecRunning {
		t.Fatalf("exec as %s = %+v, want running (held on its FIFO)", agent, res)
	}
	b.waitStarted(t)
	return res.RunID
}

// waitFinished waits (bounded) until run is no longer running.
func waitFinished(t *testing.T, op *bridge.Conn, runID string) bridge.ExecStatusResult {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := call[bridge.ExecStatusResult](t, op, bridge.MethodExecStatus, bridge.ExecStatusParams{RunID: runID})
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != bridge.ExecRunning {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still running 30s after its release", runID)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wantBusy checks err is BUSY naming what.
func wantBusy(t *testing.T, err error, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("exec succeeded, want BUSY naming %s", what)
	}
	e := bridge.AsError(err)
	if e.Code != bridge.CodeBusy || !strings.Contains(e.Message, what) || !strings.Contains(e.Message, "hint: raise") {
		t.Fatalf("exec = %v, want BUSY naming %s with a hint", err, what)
	}
}

// TestGatewayAdmission fills the per-agent and the global limit with real
// commands held on FIFOs: the next exec is BUSY naming the full limit, and
// succeeds once a held one finishes.
func TestGatewayAdmission(t *testing.T) {
	e := newEnv(t, `{"tools": {"exec": {"security": "full", "ask": "off", "host": "gateway"}},
		"gateway": {"limits": {"execsPerAgent": 2, "execs": 3}}}`)
	agent := e.client(t, bridge.RoleAgent)
	op := e.client(t, bridge.RoleOperator)
	a1, a2, b1 := newBlocker(t, "a1"), newBlocker(t, "a2"), newBlocker(t, "b1")

	runA1 := startHeld(t, agent, "alice", a1, bridge.ExecParams{})
	startHeld(t, agent, "alice", a2, bridge.ExecParams{})
	_, err := call[bridge.ExecResult](t, agent, bridge.MethodExec, bridge.ExecParams{Command: "echo no", AgentID: "alice"})
	wantBusy(t, err, "gateway.limits.execsPerAgent")
	if !strings.Contains(bridge.AsError(err).Message, "agent alice already has 2 execs in flight") {
		t.Errorf("message does not say whose limit: %v", err)
	}

	// Another agent still has room under the global limit, up to it.
	startHeld(t, agent, "bob", b1, bridge.ExecParams{})
	_, err = call[bridge.ExecResult](t, agent, bridge.MethodExec, bridge.ExecParams{Command: "echo no", AgentID: "carol"})
	wantBusy(t, err, "gateway.limits.execs")

	// One of alice's finishes: its slot is free for alice (and so under
	// the global limit too) the moment the run is seen finished.
	a1.release(t)
	if st := waitFinished(t, op, runA1); st.Status != bridge.ExecCompleted || st.Result == nil || st.Result.Stdout != "done\n" {
		t.Fatalf("released run = %+v", st)
	}
	res, err := call[bridge.ExecResult](t, agent, bridge.MethodExec, bridge.ExecParams{Command: "echo yes", AgentID: "alice"})
	if err != nil || res.Stdout != "yes\n" {
		t.Fatalf("exec after a slot freed = %+v, %v", res, err)
	}
	// A refused exec took no slot: after the foreground run, alice is at
	// one held run again, so one more is admitted and the next is BUSY.
	a3 := newBlocker(t, "a3")
	startHeld(t, agent, "alice", a3, bridge.ExecParams{})
	_, err = call[bridge.ExecResult](t, agent, bridge.MethodExec, bridge.ExecParams{Command: "echo no", AgentID: "alice"})
	wantBusy(t, err, "gateway.limits.execsPerAgent")
}

// TestNodeAdmission fills a node's --max-runs with a command held on a
// FIFO: the next system.run is BUSY from the node, through the gateway,
// recorded in the node's audit log, and succeeds once the held one
// finishes.
func TestNodeAdmission(t *testing.T) {
	e := newEnv(t, `{"tools": {"exec": {"security": "full", "ask": "off", "host": "node"}}}`)
	var nodeDir string
	e.addNode(t, "small", policyFull, func(o *node.Options) {
		o.MaxRuns = 1
		nodeDir = o.StateDir
		rec, err := audit.OpenRecorder(o.StateDir, func(err error) { t.Error(err) })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rec.Close() })
		o.Audit = rec
	})
	agent := e.client(t, bridge.RoleAgent)
	op := e.client(t, bridge.RoleOperator)
	held := newBlocker(t, "held")
	run := startHeld(t, agent, "alice", held, bridge.ExecParams{})

	// The gateway admitted it (its limits are the defaults); the node,
	// already running its one command, refuses.
	_, err := call[bridge.ExecResult](t, agent, bridge.MethodExec, bridge.ExecParams{Command: "echo no", AgentID: "bob"})
	wantBusy(t, err, "--max-runs")
	var busy []audit.Record
	if err := audit.Read(filepath.Join(nodeDir, state.AuditFile), audit.Filter{}, func(r audit.Record) error {
		if r.ReasonCode == audit.ReasonBusy {
			busy = append(busy, r)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(busy) != 1 || busy[0].Event != audit.EventDenied || busy[0].AgentID != "bob" || busy[0].Command != "echo no" ||
		busy[0].Host != "node" || !strings.Contains(busy[0].Reason, "--max-runs") {
		t.Fatalf("the node's BUSY refusal in its audit log = %+v, want one denied record of bob's \"echo no\"", busy)
	}

	held.release(t)
	if st := waitFinished(t, op, run); st.Status != bridge.ExecCompleted {
		t.Fatalf("released run = %+v", st)
	}
	res, err := call[bridge.ExecResult](t, agent, bridge.MethodExec, bridge.ExecParams{Command: "echo yes", AgentID: "bob"})
	if err != nil || res.Stdout != "yes\n" {
		t.Fatalf("exec after the node's slot freed = %+v, %v", res, err)
	}
}
