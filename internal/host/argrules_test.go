package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/policy"
)

// addRules writes argument rules for every agent into f's approvals file.
func (f *fixture) addRules(rules ...approvals.Entry) {
	f.t.Helper()
	_, err := f.store.Update(func(file *approvals.File) error {
		a := file.Agents[approvals.WildcardAgent]
		if a == nil {
			a = &approvals.Agent{}
			file.Agents[approvals.WildcardAgent] = a
		}
		for _, r := range rules {
			r.Pattern = strings.ReplaceAll(r.Pattern, "$BIN", f.bin)
			a.Allowlist = append(a.Allowlist, r)
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// TestArgRulesAnalysisWall: the decision alone, on the words the analysis
// knows, keeps a deny rule's arguments and anything an allow rule does not
// name from running; the guard never sees these commands. The control
// runs the same commands without the rules: they run.
func TestArgRulesAnalysisWall(t *testing.T) {
	if analysisOff {
		t.Skip("the analysis-off build proves the guard (TestArgRulesGuardWall)")
	}
	for _, withRules := range []bool{true, false} {
		f := newFixture(t, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "$BIN/hello")
		if withRules {
			f.addRules(
				approvals.Entry{Pattern: "$BIN/hello", Args: []string{"push", "--force"}, Deny: true,
					Examples: []string{"hello push origin main --force"}, CounterExamples: []string{"hello push origin main"}},
				approvals.Entry{Pattern: "$BIN/marker", Args: []string{"*/allowed"},
					Examples: []string{"marker /w/allowed"}, CounterExamples: []string{"marker /w/pwned", "marker /w/allowed /w/pwned"}},
			)
		} else {
			f.addRules(approvals.Entry{Pattern: "$BIN/marker"})
		}
		allowed, pwned := filepath.Join(f.dir, "allowed"), filepath.Join(f.dir, "pwned")
		for _, c := range []struct {
			cmd     string
			blocked bool // with the rules
		}{
			{"hello push origin main", false},
			{"hello push origin main --force", true},
			{"hello push origin \"$HOME\"", true}, // unknown word after push: may be --force
			{"marker " + allowed, false},
			{"marker " + pwned, true},
			{"marker " + filepath.Join(f.dir, "*"), true},
		} {
			_ = os.Remove(pwned)
			res, err := f.engine.Run(context.Background(), Request{RawCommand: c.cmd, Cwd: f.dir})
			if withRules && c.blocked {
				if !errors.Is(err, policy.ErrAllowlistMiss) || res.Decision.Outcome != policy.DenyRun {
					t.Errorf("%q: err %v, decision %+v; want an allowlist miss decided before the run", c.cmd, err, res.Decision)
				}
				if _, err := os.Stat(pwned); err == nil {
					t.Errorf("%q: ran", c.cmd)
				}
				continue
			}
			if err != nil || res.ExitCode != 0 {
				t.Errorf("rules %v: %q: err %v, exit %d; want it to run", withRules, c.cmd, err, res.ExitCode)
			}
		}
		if withRules {
			p, err := f.engine.Prepare(Request{RawCommand: "hello push origin main --force", Cwd: f.dir})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.ArgDenied) != 1 || !strings.Contains(p.ArgDenied[0], "push --force") {
				t.Errorf("ArgDenied = %q, want the deny rule named", p.ArgDenied)
			}
		}
	}
}

// TestArgRulesGuardWall: with the analysis taking every text as allowed
// (the exechost_analysis_off build: go test -tags exechost_analysis_off
// -run ArgRules ./internal/host), the guard alone refuses a start whose
// expanded argv a deny rule matches, or that no allow rule names, however
// the argument got there. Without the rules the same commands run.
func TestArgRulesGuardWall(t *testing.T) {
	if !analysisOff {
		t.Skip("needs the exechost_analysis_off build")
	}
	for _, withRules := range []bool{true, false} {
		f := newFixture(t, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "$BIN/hello")
		if withRules {
			f.addRules(
				approvals.Entry{Pattern: "$BIN/hello", Args: []string{"push", "--force"}, Deny: true},
				approvals.Entry{Pattern: "$BIN/marker", Args: []string{"*/allowed"}},
			)
		} else {
			f.addRules(approvals.Entry{Pattern: "$BIN/marker"})
		}
		pwned := filepath.Join(f.dir, "pwned")
		for _, cmd := range []string{
			"hello push origin $(echo --force)",
			"F=--force; hello push origin main $F",
			"marker " + filepath.Join(f.dir, "pw") + "$(echo ned)",
			"marker p-*",
		} {
			_ = os.Remove(pwned)
			_ = os.WriteFile(filepath.Join(f.dir, "p-stub-pwned"), nil, 0o600) // a glob target
			res, err := f.engine.Run(context.Background(), Request{RawCommand: cmd, Cwd: f.dir})
			if withRules && err == nil && res.ExitCode == 0 {
				t.Errorf("%q ran", cmd)
			}
			refused := res.ExitCode == 126 && strings.Contains(res.Stderr, "(refused at run time)")
			if withRules && !refused {
				t.Errorf("%q: exit %d, stderr %q; want a run-time refusal", cmd, res.ExitCode, res.Stderr)
			}
			if !withRules && refused {
				t.Errorf("control %q: refused without the rules: %q", cmd, res.Stderr)
			}
		}
	}
}
