package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCaseAliasIsNotAllowed: on a case-sensitive filesystem the pattern
// <dir>/head allows <dir>/head but not the different program <dir>/HEAD
// (as /usr/bin/head vs libwww-perl's /usr/bin/HEAD); `approvals get` warns
// about the near-miss, `approvals check` does not say allow, and `run`
// does not run it (HEAD would create a marker file).
func TestCaseAliasIsNotAllowed(t *testing.T) {
	dir := newStateDir(t, "state")
	bindir := t.TempDir()
	marker := filepath.Join(t.TempDir(), "HEAD-ran")
	head, HEAD := filepath.Join(bindir, "head"), filepath.Join(bindir, "HEAD")
	writeFile(t, head, "#!/bin/sh\necho head-ran\n")
	writeFile(t, HEAD, "#!/bin/sh\ntouch "+marker+"\n")
	for _, p := range []string{head, HEAD} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := os.ReadFile(head); strings.Contains(string(b), "touch") {
		t.Skip("case-insensitive filesystem: head and HEAD are one file here")
	}
	writeFile(t, filepath.Join(dir, "exec-approvals.json"), `{"version":1,
		"defaults":{"security":"allowlist","ask":"off","askFallback":"deny"},
		"agents":{"*":{"allowlist":[{"pattern":"`+head+`"}]}}}`)

	r := run(t, dir, "approvals", "get")
	if r.code != 0 || !strings.Contains(r.stdout, "WARNING") || !strings.Contains(r.stdout, HEAD) || !strings.Contains(r.stdout, "NOT allowed") {
		t.Errorf("approvals get does not warn about %s: %s", HEAD, r)
	}
	for p, want := range map[string]string{head: "allow", HEAD: "deny"} {
		r := run(t, dir, "approvals", "check", "--json", p)
		var v struct {
			Decision string `json:"decision"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Decision != want {
			t.Errorf("approvals check %s: decision %q, want %q (%v)\n%s", p, v.Decision, want, err, r)
		}
	}
	if r := run(t, dir, "run", head); r.code != 0 || !strings.Contains(r.stdout, "head-ran") {
		t.Errorf("run %s: %s", head, r)
	}
	if r := run(t, dir, "run", HEAD); r.code == 0 {
		t.Errorf("run %s succeeded: %s", HEAD, r)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s ran although only %s is allowlisted (marker: %v)", HEAD, head, err)
	}
}
