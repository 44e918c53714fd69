package mcpserver_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/testdep"
)

// TestMCPDenialExplained: a denial through the MCP exec tool names what
// was missing (an executable, or a construct and its position), which
// host, file and level decided, and the command that would allow it —
// the same facts as the CLI, from the gateway's bridge.Denial.
func TestMCPDenialExplained(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs exechost processes")
	}
	testdep.Binary(t, "go")
	id, err := exec.LookPath("id")
	if err != nil {
		t.Fatal(err)
	}
	gwDir, nodeDir := stateDir(t, "gateway"), stateDir(t, "node")
	writeFile(t, filepath.Join(gwDir, "exechost.json"), gatewayConfig)
	writeFile(t, filepath.Join(nodeDir, "exec-approvals.json"), allowlistPolicy(t))
	gw := startGateway(t, gwDir, "127.0.0.1:0")
	key := strings.TrimSpace(run(t, "--state-dir", gwDir, "gateway", "join-key", "--gateway", gw.url))
	start(t, "--state-dir", nodeDir, "node", "run", "--gateway", gw.url, "--join-key-file", keyFile(t, key), "--display-name", "deny-box")
	cs := mcpClient(t, nil, "--state-dir", gwDir, "--gateway", gw.url, "--agent", "main")
	waitFor(t, "the node to be connected", func() bool {
		text, isErr := call(t, cs, "nodes", map[string]any{})
		return !isErr && strings.Contains(text, "deny-box: nodeId=") && strings.Contains(text, ", connected")
	})
	nodeFile := filepath.Join(nodeDir, "exec-approvals.json")

	text, isErr := call(t, cs, "exec", map[string]any{"command": "id", "node": "deny-box"})
	if !isErr {
		t.Fatalf("exec id: want an error result, got:\n%s", text)
	}
	mustContain(t, "allowlist miss", text,
		"Denied: SYSTEM_RUN_DENIED: allowlist miss",
		"missing: "+id,
		"policy: security=allowlist ask=off from defaults (host ", nodeFile,
		"fix: exechost approvals allowlist add --node deny-box --agent main "+id,
		"ask a human to run `exechost approvals allowlist add --node deny-box --agent main "+id+"`")

	text, isErr = call(t, cs, "exec", map[string]any{"command": "echo `id`", "node": "deny-box"})
	if !isErr {
		t.Fatalf("exec with a command substitution: want an error result, got:\n%s", text)
	}
	mustContain(t, "construct", text,
		"construct: command substitution `…` at 1:6",
		"rewrite the command without command substitution `…`")
	if strings.Contains(text, "fix: ") {
		t.Errorf("a construct has no allowlist fix, got:\n%s", text)
	}
}
