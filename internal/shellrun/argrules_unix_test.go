//go:build unix

package shellrun_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/shellrun"
)

// TestArgRulesGuardAlone runs texts as if the analysis had allowed them
// (no analysis at all: a plan made by hand) with argument rules on ok: a
// deny rule for `push --force` and, for evil (allowed only by an argument
// rule), an allow rule for `status`. Each argument reaches the program
// through a substitution, a variable or a glob; the guard must refuse the
// start on its expanded argv. The control runs the same plans without the
// rules: the programs start.
func TestArgRulesGuardAlone(t *testing.T) {
	h := newHost(t)
	if err := os.WriteFile(filepath.Join(h.work, "--force"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ok, evil := filepath.Join(h.bin, "ok"), filepath.Join(h.bin, "evil")
	rules := []policy.ArgRule{
		{Pattern: ok, Args: []string{"push", "--force"}, Deny: true},
		{Pattern: filepath.Join(h.bin, "e*"), Args: []string{"status"}},
	}
	tests := []struct{ name, text, ran, errHas string }{
		{"deny through a substitution", "ok push origin $(printf %s --force)", "ok", "deny rule"},
		{"deny through a variable", "F=--force; ok push origin main $F", "ok", "deny rule"},
		{"deny through a glob", "ok push origin --forc?", "ok", "deny rule"},
		{"deny inside a substitution", "echo \"$(ok push --force)\"", "ok", "deny rule"},
		{"allow rule: other arguments by substitution", "evil $(printf %s rm)", "evil", "no argument rule"},
		{"allow rule: an extra argument by a variable", "X='status --all'; evil $X", "evil", "no argument rule"},
	}
	for _, withRules := range []bool{true, false} {
		mode := "rules"
		if !withRules {
			mode = "control"
		}
		for _, tt := range tests {
			t.Run(mode+"/"+tt.name, func(t *testing.T) {
				os.Remove(filepath.Join(filepath.Dir(h.bin), "ran-"+tt.ran))
				p := h.unanalysed(tt.text, "ok", "evil")
				if withRules {
					p.ArgRules, p.ArgOnly = rules, []string{evil}
				}
				_, errOut, code := h.run(p)
				if !withRules {
					if code == shellrun.DeniedExit || !h.ran(tt.ran) {
						t.Fatalf("control: exit %d stderr %q; want %s to run", code, errOut, tt.ran)
					}
					return
				}
				if code != shellrun.DeniedExit || !strings.Contains(errOut, tt.errHas) {
					t.Fatalf("exit %d stderr %q; want %d and %q", code, errOut, shellrun.DeniedExit, tt.errHas)
				}
				if h.ran(tt.ran) {
					t.Fatalf("%s ran", tt.ran)
				}
			})
		}
	}
	// What the rules allow still starts.
	p := h.unanalysed("ok push origin main; evil status", "ok", "evil")
	p.ArgRules, p.ArgOnly = rules, []string{evil}
	if out, errOut, code := h.run(p); code != 0 || !strings.Contains(out, evil+" status") {
		t.Fatalf("allowed starts: exit %d out %q err %q", code, out, errOut)
	}
}
