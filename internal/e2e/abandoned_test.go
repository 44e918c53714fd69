package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/gateway/approvalroute"
)

// TestAbandonedPromptIsWithdrawn: the caller of exec goes away while its
// command waits for approval. The prompt is withdrawn from the operators
// (exec.approval.resolved, outcome expired), a late approval is refused,
// and the command — which would create a marker file — never runs.
func TestAbandonedPromptIsWithdrawn(t *testing.T) {
	c := newCluster(t, gatewayConfig)
	n := c.addRoutedNode("abandoned", policyOnMiss, "--approvals-route", "gateway")
	op, requested, resolved := c.operatorConn("late-operator")
	marker := filepath.Join(t.TempDir(), "ran")

	cmd := exec.Command(bin, "--state-dir", c.gwDir, "exec", "--gateway", c.url, "--host", "node", "--node", n.id, "touch "+marker)
	cmd.Env = append(os.Environ(), "EXECHOST_GATEWAY_TOKEN=")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	req := next(t, requested, "exec.approval.requested")

	// The requester goes away.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	for {
		got := next(t, resolved, "the prompt to be withdrawn")
		if got.ID != req.ID {
			continue
		}
		if got.Outcome != approvalroute.OutcomeExpired {
			t.Fatalf("resolved = %+v, want outcome %s (withdrawn)", got, approvalroute.OutcomeExpired)
		}
		break
	}

	var res approvalroute.Resolved
	err := op.Call(t.Context(), approvalroute.MethodResolve, approvalroute.ResolveParams{ID: req.ID, Decision: "allow-once"}, &res)
	var be *bridge.Error
	if err == nil || !errors.As(err, &be) || be.Code != bridge.CodeStale {
		t.Fatalf("late approval: %+v, %v; want a %s error", res, err, bridge.CodeStale)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the abandoned command ran (marker %s: %v)", marker, err)
	}
}
