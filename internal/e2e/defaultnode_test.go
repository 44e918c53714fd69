package e2e

import (
	"strings"
	"testing"
)

// TestDefaultNode runs a gateway with two nodes and an agent whose
// tools.exec.defaultNode names one: an exec naming no node goes there, a
// request naming the other node is still served (a default restricts
// nothing, unlike tools.exec.node), and an agent without a default gets
// NODE_REQUIRED naming every node and the setting that picks one.
func TestDefaultNode(t *testing.T) {
	c := newCluster(t, `{
	"tools": {"exec": {"security": "full", "ask": "off"}},
	"agents": {"list": [{"id": "def", "tools": {"exec": {"defaultNode": "laptop"}}}]},
	"gateway": {"listen": "127.0.0.1:0"},
	"sandbox": {"backend": "none"},
}`)
	build := c.addNode("n1", "Build Box", policyFull)
	laptop := c.addNode("n2", "Laptop", policyFull)

	res, r := c.execJSON("--agent", "def", "--host", "node", "echo x")
	if r.code != 0 || res.NodeID != laptop.id {
		t.Fatalf("agent with defaultNode, no node: want node %s, got %+v\n%s", laptop.id, res, r)
	}
	// Several words are one command's words, each kept one word, as
	// `exechost run` reads them (json_and_words.txtar).
	res, r = c.execJSON("--agent", "def", "--host", "node", "echo", "a    b")
	if r.code != 0 || res.Stdout != "a    b\n" {
		t.Fatalf("exec echo 'a    b' as two words: %+v\n%s", res, r)
	}
	res, r = c.execJSON("--agent", "def", "--host", "node", "--node", "build-box", "echo x")
	if r.code != 0 || res.NodeID != build.id {
		t.Fatalf("agent with defaultNode, --node build-box: want node %s, got %+v\n%s", build.id, res, r)
	}
	_, r = c.execJSON("--agent", "other", "--host", "node", "echo x")
	if r.code != 1 || !strings.Contains(r.stdout, `"code": "NODE_REQUIRED"`) {
		t.Fatalf("agent without a default: want NODE_REQUIRED, got %s", r)
	}
	for _, want := range []string{build.id, laptop.id, "Build Box", "--node NAME", `"defaultNode": "NAME"`, "exechost.json"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("NODE_REQUIRED does not say %q: %s", want, r.stderr)
		}
	}
}
