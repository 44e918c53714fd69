package gateway_test

import (
	"testing"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/nodekey"
)

// TestDisplayNamesCannotImpersonate is issue 32's names door: a node may
// not take another node's display name, nor a name that is a prefix of
// another node's id or fingerprint (which --node would match first).
func TestDisplayNamesCannotImpersonate(t *testing.T) {
	e := newEnv(t, fullConfig)
	victim := e.addNode(t, "build-box", policyFull)
	vfp := ""
	op := e.client(t, bridge.RoleOperator)
	nodes, err := call[bridge.NodesResult](t, op, bridge.MethodNodesList, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Nodes {
		if n.NodeID == victim {
			vfp = n.Fingerprint
		}
	}
	if vfp == "" {
		t.Fatalf("no fingerprint for %s in %+v", victim, nodes)
	}
	for _, name := range []string{"Build Box", victim[:8], victim, vfp, vfp[:9]} {
		k, _ := nodekey.Generate()
		_, _, err := dialNamed(t, e.url, k, name)
		wantConnCode(t, "display name "+name, err, bridge.CodeInvalidRequest)
	}
	// A name of its own is fine, and so is a short hex word.
	for _, name := range []string{"laptop", "cafe"} {
		k, _ := nodekey.Generate()
		if _, res, err := dialNamed(t, e.url, k, name); err != nil || res.Status != bridge.StatusPending {
			t.Fatalf("display name %q: %+v, %v", name, res, err)
		}
	}
}
