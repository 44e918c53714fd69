package cli

import (
	"errors"
	"os"
	"path/filepath"
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

// TestSecretFlagsRemoved: --join-key and --openclaw-token put a secret in
// argv, which every user reads in /proc/PID/cmdline. They are refused as
// a usage error naming what to use instead, before the state directory
// is created or anything dialled.
func TestSecretFlagsRemoved(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"node", "run", "--gateway", "ws://127.0.0.1:1", "--join-key", "k"}, []string{"--join-key was removed", "--join-key-file FILE", "$EXECHOST_JOIN_KEY"}},
		{[]string{"node", "run", "--openclaw", "ws://127.0.0.1:1", "--openclaw-token", "t"}, []string{"--openclaw-token was removed", "--openclaw-token-file FILE", "$OPENCLAW_GATEWAY_TOKEN"}},
	} {
		dir := filepath.Join(t.TempDir(), "state")
		_, _, err := execCLI(t, append([]string{"--state-dir", dir}, c.args...)...)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Fatalf("%v: want a usage error, got %v", c.args, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q does not say %q", c.args, err, w)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "node.json")); err == nil {
			t.Errorf("%v: node.json was written before the refusal", c.args)
		}
	}
}

// TestOpenClawTLSFingerprint: --tls-fingerprint reaches the OpenClaw
// node, which refuses a malformed pin at start rather than dialling
// without one.
func TestOpenClawTLSFingerprint(t *testing.T) {
	t.Setenv("OPENCLAW_GATEWAY_TOKEN", "t")
	_, _, err := execCLI(t, "--state-dir", t.TempDir(), "node", "run", "--openclaw", "wss://127.0.0.1:1", "--tls-fingerprint", "zz")
	if err == nil || !strings.Contains(err.Error(), "--tls-fingerprint \"zz\" is not a SHA-256 fingerprint") {
		t.Fatalf("a malformed pin = %v, want refused naming --tls-fingerprint", err)
	}
}
