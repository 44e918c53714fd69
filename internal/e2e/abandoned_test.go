package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/exechost/exechost/internal/approvalroute"
	"github.com/exechost/exechost/internal/bridge"
)

// TestAbandonedPromptIsWithdrawn: the caller of exec goes away while its
// command waits for approval. The prompt is withdrawn from the operators
// (exec.approval.resolved, outcome expired), a late approval is refused,
// and the command — which would create a marker file — never runs. Both
// execution hosts: a node whose prompts are routed to the gateway, and the
// gateway itself.
func TestAbandonedPromptIsWithdrawn(t *testing.T) {
	for _, tt := range []struct {
		name string
		host func(c *cluster) []string
	}{
		{"node", func(c *cluster) []string {
			n := c.addRoutedNode("abandoned", policyOnMiss, "--approvals-route", "gateway")
			return []string{"--host", "node", "--node", n.id}
		}},
		{"gateway", func(c *cluster) []string {
			writeFile(t, filepath.Join(c.gwDir, "exec-approvals.json"), policyOnMiss)
			return []string{"--host", "gateway"}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, `{
				"tools": {"exec": {"security": "full", "ask": "off"}},
				"gateway": {"listen": "127.0.0.1:0"},
				"sandbox": {"backend": "none"},
				"approvals": {"route": "gateway"},
			}`)
			args := tt.host(c)
			op, requested, resolved := c.operatorConn("late-operator")
			marker := filepath.Join(t.TempDir(), "ran")

			cmd := exec.Command(bin, append(append([]string{"--state-dir", c.gwDir, "exec", "--gateway", c.url}, args...), "touch "+marker)...)
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
		})
	}
}
