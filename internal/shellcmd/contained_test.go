package shellcmd

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/exechost/exechost/internal/policy"
)

// containedFor is the walls of a run in f's work directory, as the host
// passes them when the jail holds: writable only there, its .git/hooks
// read-only.
func containedFor(f *fixture) *Contained {
	return &Contained{JailHolds: true, WritableRoots: []string{f.work}, ReadOnly: []string{filepath.Join(f.work, ".git/hooks"), filepath.Join(f.home, ".bashrc")}}
}

// containedAllows are the bypass corpus entries the contained rules allow
// on purpose: writes inside the writable roots and reads by redirection
// (docs/policy.md, "What the walls contain"); every other entry stays a
// miss.
var containedAllows = []string{"cat < /etc/shadow", "ls 2> out", "ls >| out", "{ ls; } > out", "exec 3> out"}

// TestBypassCorpusContained replays the bypass corpus under the contained
// rules: only the entries whose whole effect the walls contain are
// allowed, and each of those is a miss under the strict rules (the
// control: the walls are what changed the answer).
func TestBypassCorpusContained(t *testing.T) {
	f := newFixture(t)
	patterns := fixturePatterns(f)
	strict := f.env
	f.env.Contained = containedFor(f)
	for _, cmd := range bypassCorpus {
		ok, a := allowedBy(f, patterns, cmd)
		want := slices.Contains(containedAllows, cmd)
		if ok != want {
			t.Errorf("contained rules: %q allowed=%v, want %v (err %q, %v)", cmd, ok, want, a.Error, segSummary(f, a))
		}
		if want {
			if len(a.Contained) == 0 {
				t.Errorf("%q allowed under the contained rules without naming what the walls contain", cmd)
			}
			if sa := Analyze(f.expand(cmd), strict); sa.OK {
				t.Errorf("control: %q is allowed by the strict rules too", cmd)
			}
		}
	}
}

// TestContainedConstructs: each construct the contained rules allow is
// allowed with the walls and a miss without them; each they keep a miss
// stays one with the walls.
func TestContainedConstructs(t *testing.T) {
	f := newFixture(t)
	patterns := fixturePatterns(f)
	for _, tc := range []struct {
		cmd   string
		allow bool
	}{
		{`cd "$(git rev-parse --show-toplevel)" && make test`, true},
		{`ls -l $(git ls-files)`, true},
		{`for f in $(git ls-files); do grep -c x "$f"; done`, true},
		{`X=$(git rev-parse HEAD) && echo "$X"`, true},
		{`echo "$(ls $(git rev-parse --show-toplevel))"`, true},
		{`make > build.log 2>&1`, true},
		{`git diff >> sub/patch.diff`, true},
		{`while read -r f; do ls "$f"; done < notes`, false}, // read assigns from input: strict still
		{`grep x < notes`, true},
		// A substitution's commands are segments: one not allowlisted is a miss.
		{`ls "$(rm x)"`, false},
		{`ls $(cat notes | sh)`, false},
		// Command-name position, eval, backquotes, here-documents.
		{`$(git rev-parse --show-toplevel)/x`, false},
		{`$(echo ls) -l`, false},
		{`eval "$(git config x)"`, false},
		{"ls `git ls-files`", false},
		{"cat <<EOF\n$(git status)\nEOF", false},
		{`ls > "$(git rev-parse HEAD)"`, false},
		{`case $(git status) in *) ls;; esac`, false},
		// Writes outside the roots, to persistence paths, to run-time paths.
		{`echo x > ~/.bashrc`, false},
		{`echo x > $HOME/.ssh/authorized_keys`, false},
		{`echo x > HOME/.ssh/authorized_keys`, false},
		{`echo x > .git/hooks/pre-commit`, false},
		{`echo x >> ../x`, false},
		{`echo x > /tmp/x`, false},
		{`echo x > link/y`, false}, // link -> outside the work directory
		{`cd "$(git rev-parse --show-toplevel)" && echo x > y`, false},
		// Dangerous variables stay misses.
		{`PATH=$(git rev-parse --show-toplevel) ls`, false},
		{`LD_PRELOAD=$(ls) ls`, false},
		// A shell binary runs the payload: the guard would not see it.
		{`sh -c "ls $(ls)"`, false}, // a run-time payload
		{`HOME/bin/sneaky -c 'ls $(ls)'`, false},
	} {
		cmd := f.expand(tc.cmd)
		env := f.env
		env.Contained = containedFor(f)
		a := Analyze(cmd, env)
		_, matched := policy.MatchAll(patterns, a.Paths(), f.home)
		if got := a.OK && matched; got != tc.allow {
			t.Errorf("contained: %q allowed=%v, want %v (err %q, %v)", tc.cmd, got, tc.allow, a.Error, segSummary(f, a))
		}
		if tc.allow {
			if s := Analyze(cmd, f.env); s.OK {
				t.Errorf("control: %q is allowed by the strict rules", tc.cmd)
			}
			off := env
			off.Contained = &Contained{WritableRoots: env.Contained.WritableRoots} // the jail does not hold
			if s := Analyze(cmd, off); s.OK {
				t.Errorf("control: %q is allowed when the jail does not hold", tc.cmd)
			}
		}
	}
}

// TestContainedMemoKeepsRulesApart: the memo and the parse cache never
// answer a strict analysis with a contained one, or one set of roots with
// another's.
func TestContainedMemoKeepsRulesApart(t *testing.T) {
	f := newFixture(t)
	z := New(Options{})
	cmd := "ls $(git ls-files) > out"
	env := f.env
	env.Contained = containedFor(f)
	for range 2 {
		if a := z.Analyze(cmd, env); !a.OK {
			t.Fatalf("contained: %s", a.Error)
		}
	}
	if a := z.Analyze(cmd, f.env); a.OK {
		t.Fatal("strict analysis answered from the contained one")
	}
	other := env
	other.Contained = &Contained{JailHolds: true, WritableRoots: []string{f.home}}
	if a := z.Analyze(cmd, other); a.OK {
		t.Fatal("analysis with other writable roots answered from the first")
	}
}
