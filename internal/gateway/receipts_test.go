package gateway_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/gateway"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/node"
	"github.com/exechost/exechost/internal/nodekey"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/receipt"
	"github.com/exechost/exechost/internal/state"
)

// TestGatewayCountersignsNodeRuns: a node's receipts and the gateway's
// countersignatures, exported from both state directories, verify with
// the gateway's key alone; a run the gateway never saw and a node receipt
// that disagrees with the gateway's view are each flagged by name.
func TestGatewayCountersignsNodeRuns(t *testing.T) {
	var gwLog *receipt.Log
	var gwDir string
	e := newEnv(t, fullConfig, func(o *gateway.Options) {
		gwDir = o.StateDir
		gwLog = host.OpenReceipts(o.StateDir, state.KeyPath(o.StateDir), "gateway", func(err error) { t.Error(err) })
		o.Receipts = gwLog
	})
	t.Cleanup(func() { gwLog.Close() })
	var nodeDir string
	var nodeLog *receipt.Log
	e.addNode(t, "n1", policyFull, func(o *node.Options) {
		nodeDir = o.StateDir
		nodeLog = host.OpenReceipts(o.StateDir, nodekey.Path(o.StateDir), "n1", func(err error) { t.Error(err) })
		eng, err := host.New(host.Options{StateDir: o.StateDir, Host: policy.HostNode, NodeID: "n1", Receipts: nodeLog})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close(); nodeLog.Close() })
		o.Executor = eng
	})
	agent := e.client(t, bridge.RoleAgent)
	var runs []string
	for _, cmd := range []string{"echo one", "echo two >&2; exit 3"} {
		res, err := call[bridge.ExecResult](t, agent, bridge.MethodExec, bridge.ExecParams{Command: cmd, Host: "node", AgentID: "main", SessionKey: "s"})
		if err != nil {
			t.Fatalf("exec %q: %v", cmd, err)
		}
		runs = append(runs, res.RunID)
	}
	export := func() string {
		var b bytes.Buffer
		for _, dir := range []string{nodeDir, gwDir} {
			if err := receipt.Export(&b, dir, receipt.Filter{}, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		return b.String()
	}
	trust := receipt.Trust{Gateway: e.g.PublicKey()}
	rep, err := receipt.Verify(strings.NewReader(export()), trust)
	if err != nil || !rep.OK() || len(rep.Chains) != 2 {
		t.Fatalf("node and gateway bundles: %+v, %v", rep, err)
	}
	// Control: the node's chain alone, trusted through the gateway that
	// is not in the bundle, vouches for nothing.
	var nb bytes.Buffer
	if err := receipt.Export(&nb, nodeDir, receipt.Filter{}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if rep, _ := receipt.Verify(&nb, trust); rep.OK() {
		t.Fatal("a node's receipts verified through a gateway that never countersigned them")
	}

	// The node records a run nobody sent it, and a second account of the
	// first run with another exit code and command.
	code := 0
	if _, err := nodeLog.Append(receipt.Receipt{Kind: receipt.KindRun, Event: "finished", RunID: "ghost", AgentID: "main",
		CommandSHA256: receipt.SHA256([]byte("curl evil")), ExitCode: &code}); err != nil {
		t.Fatal(err)
	}
	seven := 7
	if _, err := nodeLog.Append(receipt.Receipt{Kind: receipt.KindRun, Event: "finished", RunID: runs[1], AgentID: "main",
		CommandSHA256: receipt.SHA256([]byte("something else")), ExitCode: &seven}); err != nil {
		t.Fatal(err)
	}
	rep, err = receipt.Verify(strings.NewReader(export()), trust)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range rep.Findings {
		got = append(got, f.String())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{"(run ghost)", "gateway never saw", "(run " + runs[1] + "): gateway and node disagree on the command", "disagree on the exit code"} {
		if !strings.Contains(all, want) {
			t.Errorf("findings lack %q:\n%s", want, all)
		}
	}
}
