package e2e

import (
	"os"
	"strings"
	"testing"
)

// TestNameTakenStops: a node whose display name another paired node holds
// (a second state directory on the same machine, a cloned VM) stops at
// once with exit 1 and the fix (another --display-name, or `nodes remove`
// of the old pairing), instead of retrying forever at INFO. Before the
// fix this run hit run's deadline (cmdLimit) still reconnecting.
func TestNameTakenStops(t *testing.T) {
	c := newCluster(t, gatewayConfig)
	first := c.addNode("first", "build-box", policyFull)
	r := run(t, newStateDir(t, "clone"), "node", "run", "--gateway", c.url, "--display-name", "Build-Box")
	if r.code != 1 {
		t.Fatalf("a node with a taken name: want exit 1, got %s", r)
	}
	for _, want := range []string{`display name "Build-Box" is already taken by node ` + first.id[:8] + "…", "--display-name NAME", "exechost nodes remove " + first.id} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "reconnecting") {
		t.Errorf("the node retried:\n%s", r.stderr)
	}
}

// TestNodeRunSaysStopped: `node run` stopped by a signal exits 0 and says
// it stopped (before, it printed nothing and a terminal could not tell a
// stop from a hang).
func TestNodeRunSaysStopped(t *testing.T) {
	c := newCluster(t, gatewayConfig)
	n := c.addNode("n", "stopper", policyFull)
	n.p.signal(os.Interrupt)
	if err := n.p.wait(t, "node run after SIGINT"); err != nil {
		t.Fatalf("node run after SIGINT: %v\n%s", err, n.p.Out)
	}
	if !strings.Contains(n.p.Out.String(), "exechost: node stopped") {
		t.Errorf("node run printed nothing on stop:\n%s", n.p.Out)
	}
}
