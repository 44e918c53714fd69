// Package testdep lets tests that need an external component (dockerd,
// bwrap, chromium, tmux, …) skip loudly when it is truly absent, and fail
// instead under CI=true, where the test command was supposed to provision it.
package testdep

import (
	"os"
	"os/exec"
	"testing"
)

// Missing reports the dependency as absent: a loud skip locally, a failure
// in CI.
func Missing(t testing.TB, what, why string) {
	t.Helper()
	msg := "DEPENDENCY MISSING: " + what + ": " + why + " (scripts/test.sh installs it when run as root)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Binary returns the path of an executable on PATH, or reports it missing.
func Binary(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name, "not found on PATH")
	}
	return p
}
