package approvals

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// An entry whose examples do not check is refused: it applies to nothing
// (neither as a path nor as a rule), Resolve says which example failed,
// and loading never rewrites the file.
func TestArgRuleExamplesCheckedOnLoad(t *testing.T) {
	doc := `{"version": 1, "agents": {"*": {"allowlist": [
  {"pattern": "/usr/bin/git", "args": ["push", "origin", "*"], "examples": ["git push origin main"], "counterExamples": ["git push origin main --force"]},
  {"pattern": "/usr/bin/git", "args": ["push", "--force"], "deny": true, "examples": ["git push origin main --force"]},
  {"pattern": "/usr/bin/make", "args": ["test"], "examples": ["make build"]},
  {"pattern": "/usr/bin/rm", "args": []},
  {"pattern": "/usr/bin/ls"}
]}}}`
	dir := t.TempDir()
	path := filepath.Join(dir, "exec-approvals.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	s := NewStore(dir)
	f, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	r := f.Resolve("dev")
	if got := r.Patterns(); !slices.Equal(got, []string{"/usr/bin/ls"}) {
		t.Errorf("path-only patterns = %q; argument rules and refused entries must not allow a path", got)
	}
	rules := r.ArgRules()
	if len(rules) != 2 || rules[0].Deny || !rules[1].Deny {
		t.Errorf("rules = %+v, want the git allow and deny rules", rules)
	}
	var refused []string
	for _, e := range r.Allowlist {
		if e.Refused != "" {
			refused = append(refused, e.Entry.Pattern+": "+e.Refused)
		}
	}
	if len(refused) != 2 || !strings.Contains(refused[0], `example "make build" does not match`) || !strings.Contains(refused[1], "args is empty") {
		t.Errorf("refused = %q", refused)
	}
	if !slices.ContainsFunc(r.Warnings, func(w string) bool { return strings.Contains(w, "allowlist[2]: refused") }) {
		t.Errorf("warnings %q do not say entry 2 is refused", r.Warnings)
	}
	got, _ := os.ReadFile(path)
	if string(got) != doc {
		t.Error("loading rewrote the file")
	}
	// A rewrite keeps every member, "args": [] included: dropping it
	// would turn a refused rule into an entry allowing rm outright.
	out, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("x", out)
	if err != nil {
		t.Fatal(err)
	}
	if rb := back.Resolve("dev"); !slices.Equal(rb.Patterns(), r.Patterns()) || len(rb.ArgRules()) != 2 {
		t.Errorf("round trip changed what applies: %q %+v\n%s", rb.Patterns(), rb.ArgRules(), out)
	}
	if !strings.Contains(string(out), `"args": []`) || !strings.Contains(string(out), `"counterExamples"`) {
		t.Errorf("rewrite lost members:\n%s", out)
	}
}

// A remote file may add deny rules but neither an allow rule nor the loss
// of a deny rule.
func TestArgRuleWidenings(t *testing.T) {
	parse := func(list string) *File {
		f, err := Parse("x", []byte(`{"version":1,"agents":{"*":{"allowlist":[`+list+`]}}}`))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	deny := `{"pattern":"/usr/bin/git","args":["push","--force"],"deny":true}`
	allow := `{"pattern":"/usr/bin/git","args":["status"]}`
	ls := `{"pattern":"/usr/bin/ls"}`
	for _, c := range []struct {
		cur, next string
		widens    bool
	}{
		{ls, ls + "," + deny, false},
		{ls + "," + deny, ls, true},
		{ls, ls + "," + allow, true},
		{ls + "," + allow, ls + "," + allow, false},
		{allow, `{"pattern":"/usr/bin/git"}`, true},
	} {
		if got := len(Widenings(parse(c.cur), parse(c.next))) > 0; got != c.widens {
			t.Errorf("%s → %s: widens %v, want %v", c.cur, c.next, got, c.widens)
		}
	}
}

// Grants keep expiresAt and scope through a rewrite (an unknown scope
// member too, which refuses the entry), stay out of the standing
// allowlist, and `approvals get` shows them.
func TestGrantMembersRoundTrip(t *testing.T) {
	doc := `{"version":1,"agents":{"*":{"allowlist":[
  {"pattern":"/usr/bin/make","expiresAt":1795780800000,"scope":{"cwd":"/src/x","session":"s1"}},
  {"pattern":"/usr/bin/git","args":["status"],"expiresAt":1795780800000},
  {"pattern":"/usr/bin/rm","scope":{"host":"h1"}}]}}}`
	f, err := Parse("x", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	out, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("x", out)
	if err != nil {
		t.Fatal(err)
	}
	r := back.Resolve("dev")
	if len(r.Patterns()) != 0 || len(r.ArgRules()) != 0 {
		t.Errorf("grants leaked into the standing allowlist: %q %+v", r.Patterns(), r.ArgRules())
	}
	g := r.Grants()
	if len(g) != 2 || g[0].Cwd != "/src/x" || g[0].Session != "s1" || g[1].Rule.Args[0] != "status" || g[1].ExpiresAt.UnixMilli() != 1795780800000 {
		t.Errorf("grants = %+v", g)
	}
	var shown []string
	for _, e := range r.Allowlist {
		k, s := e.Describe()
		shown = append(shown, k+" "+s)
	}
	want := []string{
		`allow /usr/bin/make until 2026-11-27T12:00:00Z in /src/x for session "s1"`,
		`allow /usr/bin/git status until 2026-11-27T12:00:00Z`,
		`refused /usr/bin/rm (scope has a member this version does not know (host): it may limit more than this version can enforce)`,
	}
	if !slices.Equal(shown, want) {
		t.Errorf("shown:\n%s\nwant:\n%s", strings.Join(shown, "\n"), strings.Join(want, "\n"))
	}
}
