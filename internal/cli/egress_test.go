package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/state"
)

// TestApprovalsGetShowsEgress: `approvals get` shows an egress list as the
// network word with its source, in text and JSON, and a bad pattern fails
// with the entry and the fix.
func TestApprovalsGetShowsEgress(t *testing.T) {
	dir := t.TempDir()
	write := func(doc string) {
		if err := os.WriteFile(filepath.Join(dir, state.ApprovalsFile), []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"version":1,"defaults":{"security":"allowlist","confine":{"network":["GitHub.com:443","*.example.com"]}}}`)
	out, stderr, err := execCLI(t, "approvals", "get", "--state-dir", dir)
	if err != nil || !strings.Contains(out, "network: none; egress by name: github.com:443, *.example.com (from defaults)") {
		t.Fatalf("approvals get: %v\n%s\n%s", err, out, stderr)
	}
	out, _, err = execCLI(t, "approvals", "get", "--json", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"egress": [`) || !json.Valid([]byte(out)) {
		t.Fatalf("approvals get --json:\n%s", out)
	}
	write(`{"version":1,"defaults":{"confine":{"network":["github.com:443","*"]}}}`)
	out, stderr, err = execCLI(t, "approvals", "get", "--state-dir", dir)
	if err == nil || !strings.Contains(err.Error()+stderr+out, `defaults.confine.network[1]: egress pattern "*"`) {
		t.Fatalf("a bad pattern: %v\n%s\n%s", err, out, stderr)
	}
}
