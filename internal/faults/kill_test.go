//go:build linux

package faults

import (
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/bridge"
)

// TestNodeKilledMidRun SIGKILLs a node while a command runs on it: the
// caller gets a clear error within a bound, the command's processes do
// not outlive the node, and after the node comes back the command has
// still run exactly once.
func TestNodeKilledMidRun(t *testing.T) {
	c := newCluster(t, "127.0.0.1:0")
	oper := c.mustDial(bridge.RoleOperator)
	agent := c.mustDial(bridge.RoleAgent)
	n := c.addNode("victim", policyFull, oper)

	m := newMarker(t)
	t.Cleanup(m.killLeftovers)
	call := execAsync(agent, bridge.ExecParams{Command: m.command(), Host: "node", Node: n.id, SessionKey: "kill"})
	waitFor(t, "the command to start on the node", func() bool { return m.runs() == 1 && len(m.procs()) > 0 })

	n.p.kill()
	_, err := call.wait(t, answerBound, "exec whose node was SIGKILLed")
	if err == nil || !strings.Contains(err.Error(), "disconnected") {
		t.Fatalf("exec after the node died: err = %v, want a disconnection error", err)
	}
	// Every process of the command must die with the node: the runner's
	// parent-death signal covers its direct child (sh), and nothing may
	// survive it either.
	if left := m.waitGone(15 * time.Second); len(left) > 0 {
		t.Errorf("processes of the command outlived the SIGKILLed node: %v (runner.setPdeathsig covers only the direct child; its children keep running)", left)
	}

	// The node comes back with its saved token; nothing is re-sent.
	n.start(t, "")
	c.waitConnected(oper, n.id)
	res, err := execAsync(agent, bridge.ExecParams{Command: "true", Host: "node", Node: n.id, SessionKey: "kill"}).wait(t, answerBound, "exec after restart")
	if err != nil || !res.Success {
		t.Fatalf("exec on the restarted node: %+v, %v", res, err)
	}
	if got := m.runs(); got != 1 {
		t.Fatalf("the killed command ran %d times, want exactly 1", got)
	}
}

// TestGatewayKilledMidRun SIGKILLs the gateway while a command runs on a
// node: the caller's connection fails at once, the node reconnects to the
// restarted gateway, the orphaned command is gone once its own timeout
// (5 s) has passed, and it has run exactly once. The node keeps a run
// going across a lost connection on purpose (a resent invoke gets its
// result from the idempotency cache), so the command's timeout is what
// bounds it.
func TestGatewayKilledMidRun(t *testing.T) {
	c := newCluster(t, freeAddr(t))
	oper := c.mustDial(bridge.RoleOperator)
	agent := c.mustDial(bridge.RoleAgent)
	n := c.addNode("worker", policyFull, oper)

	m := newMarker(t)
	t.Cleanup(m.killLeftovers)
	call := execAsync(agent, bridge.ExecParams{Command: m.command(), Host: "node", Node: n.id, SessionKey: "gwkill", TimeoutSec: 5})
	waitFor(t, "the command to start on the node", func() bool { return m.runs() == 1 && len(m.procs()) > 0 })

	c.gw.kill()
	_, err := call.wait(t, answerBound, "exec whose gateway was SIGKILLed")
	if err == nil {
		t.Fatal("exec returned success although its gateway died")
	}
	t.Logf("caller's error: %v", err)

	c.startGateway()
	oper2 := c.mustDial(bridge.RoleOperator)
	c.waitConnected(oper2, n.id)
	if left := m.waitGone(answerBound); len(left) > 0 {
		t.Errorf("the orphaned command outlived its 5 s timeout by %s on the node: %v", answerBound, left)
	}
	if got := m.runs(); got != 1 {
		t.Fatalf("the command ran %d times, want exactly 1", got)
	}
}
