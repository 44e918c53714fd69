package cli

import (
	"errors"
	"strings"
	"testing"
)

// TestOpenClawFlagConflicts: --openclaw selects a different gateway
// protocol, so exechost-gateway flags with it are a usage error (exit 2),
// found before anything is created or dialled. (--approvals-route
// gateway|both is accepted: it takes approvals through OpenClaw's gateway.)
func TestOpenClawFlagConflicts(t *testing.T) {
	for _, args := range [][]string{
		{"--gateway", "ws://127.0.0.1:1"},
		{"--join-key", "k"},
		{"--exec-host", "app"},
	} {
		dir := t.TempDir()
		all := append([]string{"--state-dir", dir, "node", "run", "--openclaw", "ws://127.0.0.1:1"}, args...)
		_, _, err := execCLI(t, all...)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--openclaw") {
			t.Errorf("%v: want a usage error naming --openclaw, got %v", args, err)
		}
	}
}
