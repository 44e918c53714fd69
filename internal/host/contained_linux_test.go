package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/policy"
)

// TestContainedRulesInTheEngine: where the jail holds, the engine analyses
// under the contained rules, and what they allowed runs in the guarded
// interpreter (what was analysed is what runs) without a prompt; what the
// walls cannot contain stays a miss and nothing of it runs. The control:
// the same engine without a jail (NoJail) applies the strict rules, says
// why, and allows none of it.
func TestContainedRulesInTheEngine(t *testing.T) {
	if analysisOff {
		t.Skip("the analysis-off build takes every text as allowed: no rule set applies")
	}
	f := newFixture(t, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "$BIN/hello", "$BIN/other")
	ctx := context.Background()
	allowed := []struct{ text, stdout, file, content string }{
		{`hello "$(other x)" > out.log 2>&1`, "", "out.log", "hello other x\n"},
		{`for w in $(other a b); do hello "$w"; done`, "hello other\nhello a\nhello b\n", "", ""},
		{`X=$(other y) && hello "$X" >> app.log`, "", "app.log", "hello other y\n"},
		{`hello < /etc/hostname`, "hello\n", "", ""},
	}
	for _, tc := range allowed {
		p, err := f.engine.Prepare(Request{RawCommand: tc.text, Cwd: f.dir})
		if err != nil {
			t.Fatal(err)
		}
		if p.Rules != RulesContained || p.Decision.Outcome != policy.Allow || p.RunsAs() != RunsInterpreted || len(p.Analysis.Contained) == 0 {
			t.Fatalf("%q: rules %s (%s) decision %s runs as %s contained %v; want contained, allow, interpreter (err %s)",
				tc.text, p.Rules, p.RulesWhy, p.Decision.Outcome, p.RunsAs(), p.Analysis.Contained, p.Analysis.Error)
		}
		res, err := f.engine.Run(ctx, Request{RawCommand: tc.text, Cwd: f.dir})
		if err != nil || res.ExitCode != 0 || res.Stdout != tc.stdout {
			t.Fatalf("%q: %v exit %d stdout %q stderr %q", tc.text, err, res.ExitCode, res.Stdout, res.Stderr)
		}
		if tc.file != "" {
			if b, _ := os.ReadFile(filepath.Join(f.dir, tc.file)); string(b) != tc.content {
				t.Fatalf("%q: %s holds %q, want %q", tc.text, tc.file, b, tc.content)
			}
		}
	}

	ssh := filepath.Join(f.dir, ".ssh")
	if err := os.Mkdir(ssh, 0o700); err != nil {
		t.Fatal(err)
	}
	markerRan := filepath.Join(f.dir, "marker-ran")
	for _, text := range []string{
		`hello x > ~/.bashrc`,                          // a persistence path (home is the work directory here)
		`echo x > $HOME/.ssh/authorized_keys`,          // a run-time path
		`hello x > ` + filepath.Join(f.bin, "planted"), // outside the writable roots
		`$(other) a`,                          // command-name position
		`hello "$(marker ` + markerRan + `)"`, // marker is not allowlisted
		`eval "$(other)"`,
	} {
		p, err := f.engine.Prepare(Request{RawCommand: text, Cwd: f.dir})
		if err != nil {
			t.Fatal(err)
		}
		if p.Rules != RulesContained || p.Decision.Outcome == policy.Allow {
			t.Errorf("%q: rules %s decision %s; want the contained rules to refuse it", text, p.Rules, p.Decision.Outcome)
		}
		if _, err := f.engine.Run(ctx, Request{RawCommand: text, Cwd: f.dir}); err == nil {
			t.Errorf("%q ran", text)
		}
	}
	for _, p := range []string{filepath.Join(f.dir, ".bashrc"), filepath.Join(ssh, "authorized_keys"), filepath.Join(f.bin, "planted"), markerRan} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}

	// Control: no jail, the strict rules, and why.
	f.engine.NoJail = true
	p, err := f.engine.Prepare(Request{RawCommand: allowed[0].text, Cwd: f.dir})
	if err != nil {
		t.Fatal(err)
	}
	if p.Rules != RulesStrict || !strings.Contains(p.RulesWhy, "no jail") || p.Decision.Outcome == policy.Allow {
		t.Fatalf("without a jail: rules %s (%s) decision %s; want strict, saying there is no jail, and no allow", p.Rules, p.RulesWhy, p.Decision.Outcome)
	}
}
