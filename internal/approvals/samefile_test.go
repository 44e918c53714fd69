package approvals

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/policy"
)

// caseSensitiveDir returns a temp dir in which "head" and "HEAD" are two
// files, or skips when the filesystem folds case (then the aliasing this
// guards against cannot happen).
func caseSensitiveDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "head"), []byte("#!/bin/sh\necho head\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "HEAD"), []byte("#!/bin/sh\necho HEAD\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "head"))
	if strings.Contains(string(b), "HEAD") {
		t.Skip("case-insensitive filesystem: head and HEAD are one file here")
	}
	return dir
}

// TestCaseAliasRefusedOnRealFiles: on a case-sensitive filesystem the
// pattern <dir>/head does not allow the different file <dir>/HEAD, with the
// stat-based SameFile the execution host uses; a hard link that really is
// the same file (what a case-insensitive filesystem gives) is allowed.
func TestCaseAliasRefusedOnRealFiles(t *testing.T) {
	dir := caseSensitiveDir(t)
	head, HEAD := filepath.Join(dir, "head"), filepath.Join(dir, "HEAD")
	a := policy.CompileAllowlist([]string{head}, "/nonexistent")
	a.SameFile = SameFile
	if got := a.Match(head); got != head {
		t.Fatalf("Match(%s) = %q, want the pattern", head, got)
	}
	r := a.Explain(HEAD)
	if r.Pattern != "" || len(r.Refused) != 1 || r.Refused[0] != head {
		t.Fatalf("Explain(%s) = %+v: a different file must not be allowed", HEAD, r)
	}

	// Same inode under another case: allowed, and reported as fold-only.
	alias := filepath.Join(dir, "Head")
	if err := os.Link(head, alias); err != nil {
		t.Fatal(err)
	}
	if r := a.Explain(alias); r.Pattern != head || !r.FoldOnly {
		t.Fatalf("Explain(%s) = %+v: the same file must be allowed as a fold-only match", alias, r)
	}
	if SameFile(head, filepath.Join(dir, "missing")) {
		t.Fatal("SameFile with a missing file must be false")
	}
}

// TestNearMissWarning: `approvals get` (Resolve) warns that the pattern
// does not cover the case-variant file next to it.
func TestNearMissWarning(t *testing.T) {
	dir := caseSensitiveDir(t)
	head := filepath.Join(dir, "head")
	f := &File{Version: Version, Agents: map[string]*Agent{"*": {Allowlist: []Entry{{Pattern: head}}}}}
	r := f.Resolve("*")
	var found bool
	for _, w := range r.Warnings {
		if strings.Contains(w, filepath.Join(dir, "HEAD")) && strings.Contains(w, "NOT allowed") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no near-miss warning for %s/HEAD in %q", dir, r.Warnings)
	}
}
