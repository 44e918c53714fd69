// Package state locates exechost's state directory and creates it with the
// permissions the design requires (0700), whatever the process umask is.
package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/exechost/exechost/internal/hint"
)

// EnvDir is the environment variable that overrides the state directory.
const EnvDir = "OPENCLAW_STATE_DIR"

// File names inside the state directory.
const (
	ApprovalsFile = "exec-approvals.json"
	ApprovalsSock = "exec-approvals.sock"
	NodeFile      = "node.json"
	GatewayFile   = "gateway.json"
	ConfigFile    = "exechost.json"
	AuditFile     = "audit.jsonl"
)

// Dir returns the state directory: flag if set, else $OPENCLAW_STATE_DIR,
// else ~/.openclaw. It does not create it.
func Dir(flag string) (string, error) {
	if flag != "" {
		return filepath.Abs(flag)
	}
	if d := os.Getenv(EnvDir); d != "" {
		return filepath.Abs(d)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", hint.Wrap(fmt.Errorf("locate state directory: %w", err), fmt.Sprintf("set --state-dir or %s", EnvDir))
	}
	return filepath.Join(home, ".openclaw"), nil
}

// Ensure creates dir (and parents) if needed and makes sure dir itself is
// 0700 and owned by us. Explicit chmod makes the mode independent of umask.
func Ensure(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create state directory %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("stat state directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("state directory %s: %w", dir, errors.New("not a directory (is it a symlink?)"))
	}
	if err := checkOwner(fi); err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("chmod state directory %s: %w", dir, err)
		}
	}
	return nil
}

// Home returns the host user's home directory for "~" expansion, or "" when
// it cannot be determined (then "~" patterns match nothing).
func Home() string {
	h, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return h
}
