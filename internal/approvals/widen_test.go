package approvals

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mustParse(t testing.TB, s string) *File {
	t.Helper()
	f, err := Parse("(test)", []byte(s))
	if err != nil {
		t.Fatalf("parse %s: %v", s, err)
	}
	return f
}

func TestWidenings(t *testing.T) {
	base := `{"version":1,"defaults":{"security":"allowlist","ask":"on-miss","askFallback":"deny"},
		"agents":{"*":{"allowlist":[{"pattern":"/usr/bin/git"}]},"build":{"security":"allowlist","allowlist":[{"pattern":"/usr/bin/make"}]}}}`
	tests := []struct {
		name string
		cur  string // base when empty
		next string
		want []string
	}{
		{name: "same file", next: base},
		{name: "tighten everything",
			next: `{"defaults":{"security":"deny","ask":"always","askFallback":"deny"},"agents":{}}`},
		{name: "remove a pattern", next: `{"defaults":{"security":"allowlist","ask":"on-miss","askFallback":"deny"},"agents":{"build":{"allowlist":[{"pattern":"/usr/bin/make"}]}}}`},
		{name: "pattern respelled in case is the same pattern",
			next: `{"defaults":{"security":"allowlist","ask":"on-miss","askFallback":"deny"},"agents":{"*":{"allowlist":[{"pattern":" /USR/bin/git "}]},"build":{"allowlist":[{"pattern":"/usr/bin/make"}]}}}`},
		{name: "defaults security to full widens every agent once",
			next: `{"defaults":{"security":"full","ask":"on-miss","askFallback":"deny"},"agents":{"*":{"allowlist":[{"pattern":"/usr/bin/git"}]},"build":{"security":"allowlist","allowlist":[{"pattern":"/usr/bin/make"}]}}}`,
			want: []string{"agents.*.security allowlist→full"}},
		{name: "an agent's own override dropped inherits a looser default",
			cur:  `{"defaults":{"security":"full","ask":"off"},"agents":{"ci":{"security":"deny"}}}`,
			next: `{"defaults":{"security":"full","ask":"off"},"agents":{"ci":{}}}`,
			want: []string{"agents.ci.security deny→full"}},
		{name: "ask on-miss to off turns prompts into denials: not a widening",
			next: `{"defaults":{"security":"allowlist","ask":"off","askFallback":"deny"},"agents":{"*":{"allowlist":[{"pattern":"/usr/bin/git"}]},"build":{"allowlist":[{"pattern":"/usr/bin/make"}]}}}`},
		{name: "ask off to on-miss lets misses run through a prompt or the fallback",
			cur:  `{"defaults":{"security":"allowlist","ask":"off","askFallback":"full"}}`,
			next: `{"defaults":{"security":"allowlist","ask":"on-miss","askFallback":"full"}}`,
			want: []string{"agents.*.ask off→on-miss"}},
		{name: "ask always to off lets allowlisted commands run without a human",
			cur:  `{"defaults":{"security":"full","ask":"always"},"agents":{"ci":{"ask":"always"}}}`,
			next: `{"defaults":{"security":"full","ask":"always"},"agents":{"ci":{"ask":"off"}}}`,
			want: []string{"agents.ci.ask always→off"}},
		{name: "ask off to always widens (misses prompt) though allowlisted commands now ask",
			cur:  `{"defaults":{"security":"allowlist","ask":"off"}}`,
			next: `{"defaults":{"security":"allowlist","ask":"always"}}`,
			want: []string{"agents.*.ask off→always"}},
		{name: "an inherited ask loosened under a wildcard that denies is reported for the agent that runs",
			cur:  `{"defaults":{"security":"deny","ask":"off"},"agents":{"ci":{"security":"allowlist"}}}`,
			next: `{"defaults":{"security":"deny","ask":"on-miss","askFallback":"full"},"agents":{"ci":{"security":"allowlist"}}}`,
			want: []string{"agents.ci.ask off→on-miss", "agents.ci.askFallback deny→full"}},
		{name: "askFallback looser even while ask is off (a request may ask)",
			cur:  `{"defaults":{"security":"allowlist","ask":"off","askFallback":"deny"}}`,
			next: `{"defaults":{"security":"allowlist","ask":"off","askFallback":"full"}}`,
			want: []string{"agents.*.askFallback deny→full"}},
		{name: "new pattern for the wildcard",
			next: `{"defaults":{"security":"allowlist","ask":"on-miss","askFallback":"deny"},"agents":{"*":{"allowlist":[{"pattern":"/usr/bin/git"},{"pattern":"/usr/bin/curl"}]},"build":{"allowlist":[{"pattern":"/usr/bin/make"}]}}}`,
			want: []string{`agents.*.allowlist +"/usr/bin/curl"`}},
		{name: "pattern moved from an agent to the wildcard widens every other agent",
			next: `{"defaults":{"security":"allowlist","ask":"on-miss","askFallback":"deny"},"agents":{"*":{"allowlist":[{"pattern":"/usr/bin/git"},{"pattern":"/usr/bin/make"}]}}}`,
			want: []string{`agents.*.allowlist +"/usr/bin/make"`}},
		{name: "a new agent with its own looser policy",
			next: base[:len(base)-2] + `,"ops":{"security":"full","allowlist":[{"pattern":"/bin/*"}]}}}`,
			want: []string{"agents.ops.security allowlist→full", `agents.ops.allowlist +"/bin/*"`}},
		{name: "an invalid value falls back to the next level, not a widening",
			next: `{"defaults":{"security":"allowlist","ask":"on-miss","askFallback":"deny"},"agents":{"*":{"security":"fulll","allowlist":[{"pattern":"/usr/bin/git"}]},"build":{"allowlist":[{"pattern":"/usr/bin/make"}]}}}`},
		{name: "missing defaults mean the built-in deny",
			cur:  `{"defaults":{"security":"full","ask":"off","askFallback":"full"}}`,
			next: `{}`},
		{name: "confine tightened: fewer roots, network none, more hidden, no socket",
			cur:  `{"defaults":{"security":"allowlist","confine":{"writable":["/a","/b"],"network":"all","unsupported":"warn","sockets":["/s"]}}}`,
			next: `{"defaults":{"security":"allowlist","confine":{"writable":["/a/sub"],"network":"none","hidden":["/h"],"sockets":[]}}}`},
		{name: "confine widened word by word",
			cur: `{"defaults":{"security":"allowlist","confine":{"writable":["/a"],"hidden":["/h","/k"]}}}`,
			next: `{"defaults":{"security":"allowlist","confine":{"writable":["/a","/"],"network":"loopback","unsupported":"warn","sockets":["/run/docker.sock"],
				"hidden":["/k"],"readable":["~/.aws"],"writablePersistence":[".git/hooks"]}},"agents":{"ci":{"security":"allowlist"}}}`,
			want: []string{
				"agents.*.confine.writable (absent)→/", "agents.*.confine.network none→loopback", "agents.*.confine.unsupported deny→warn",
				"agents.*.confine.sockets (absent)→/run/docker.sock", "agents.*.confine.readable (absent)→" + confineHome("") + "/.aws",
				"agents.*.confine.writablePersistence (absent)→.git/hooks", "agents.*.confine.hidden /h→(absent)",
			}},
		{name: "a confine member added under allowlist widens by what it opens",
			cur:  `{"defaults":{"security":"allowlist"}}`,
			next: `{"defaults":{"security":"allowlist"},"agents":{"ci":{"confine":{"network":"all"}}}}`,
			want: []string{"agents.ci.confine.network none→all"}},
		{name: "the confine member removed under full leaves runs unjailed",
			cur:  `{"defaults":{"security":"full","confine":{}}}`,
			next: `{"defaults":{"security":"full"}}`,
			want: []string{"agents.*.confine jail→(absent)"}},
		{name: "the confine member added under full only tightens",
			cur:  `{"defaults":{"security":"full"}}`,
			next: `{"defaults":{"security":"full","confine":{"network":"all","unsupported":"warn"}}}`},
		{name: "an unknown member inside confine",
			cur:  `{"defaults":{"confine":{"future":1}}}`,
			next: `{"defaults":{"confine":{"future":2}}}`,
			want: []string{"defaults.confine.future 1→2"}},
		{name: "unknown members added, changed and removed",
			cur:  `{"defaults":{"security":"deny","autoAllowSkills":false},"agents":{"*":{"allowlist":[{"pattern":"/a","argPattern":"^x$"}]}},"old":1}`,
			next: `{"defaults":{"security":"deny","autoAllowSkills":true},"agents":{"*":{"allowlist":[{"pattern":"/a"}],"mcpTools":[]}}}`,
			want: []string{
				"old 1→(absent)",
				"defaults.autoAllowSkills false→true",
				"agents.*.mcpTools (absent)→[]",
				`agents.*.allowlist["/a"].argPattern "^x$"→(absent)`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cur := tt.cur
			if cur == "" {
				cur = base
			}
			var got []string
			for _, w := range Widenings(mustParse(t, cur), mustParse(t, tt.next)) {
				got = append(got, w.String())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Widenings (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzWidenings checks the properties the remote-edit rule relies on: a
// file never widens itself, and the relation is transitive, so a chain of
// accepted (non-widening) edits can never add up to a widening.
func FuzzWidenings(f *testing.F) {
	f.Add(`{"defaults":{"security":"allowlist","ask":"on-miss"}}`, `{"defaults":{"security":"deny"}}`, `{"defaults":{"ask":"off"}}`)
	f.Add(`{"agents":{"*":{"allowlist":[{"pattern":"/a"}]},"b":{"security":"full"}}}`, `{"agents":{"b":{"allowlist":[{"pattern":"/A"}]}}}`, `{"agents":{"*":{"allowlist":[{"pattern":"/a"}]}}}`)
	f.Add(`{"defaults":{"security":"full","ask":"off","askFallback":"full","x":1}}`, `{"defaults":{"x":1,"askFallback":"allowlist"}}`, `{}`)
	f.Fuzz(func(t *testing.T, a, b, c string) {
		fa, errA := Parse("a", []byte(a))
		fb, errB := Parse("b", []byte(b))
		fc, errC := Parse("c", []byte(c))
		if errA != nil || errB != nil || errC != nil {
			return
		}
		for _, x := range []*File{fa, fb, fc} {
			if ws := Widenings(x, x); len(ws) != 0 {
				t.Fatalf("a file widens itself: %v", ws)
			}
			if ws := Widenings(x, x.Clone()); len(ws) != 0 {
				t.Fatalf("a file widens its clone: %v", ws)
			}
		}
		if len(Widenings(fa, fb)) == 0 && len(Widenings(fb, fc)) == 0 {
			if ws := Widenings(fa, fc); len(ws) != 0 {
				t.Fatalf("a→b and b→c tighten, but a→c widens: %v\na=%s\nb=%s\nc=%s", ws, a, b, c)
			}
		}
	})
}
