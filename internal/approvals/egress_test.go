package approvals

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/confine"
)

// TestEgressList decodes "network" as a list of patterns at both levels,
// keeps it through a rewrite, and resolves it: the first level with a
// network word wins, a list makes the run's own network none, and the
// patterns are kept in their canonical form with their source.
func TestEgressList(t *testing.T) {
	src := `{"version":1,
	"defaults":{"confine":{"network":["GitHub.com:443","*.example.com"]}},
	"agents":{"go":{"confine":{"network":["proxy.golang.example:443","git.corp.example:443/private"]}},
	          "wide":{"confine":{"network":"all"}},
	          "shut":{"confine":{"network":[]}}}}`
	f, err := Parse("x.json", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	out, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse("x.json", out)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(f.Defaults.Confine, again.Defaults.Confine); d != "" {
		t.Errorf("round trip (-first +second):\n%s\n%s", d, out)
	}
	if d := cmp.Diff(f.Agents["shut"].Confine, again.Agents["shut"].Confine); d != "" || again.Agents["shut"].Confine.Egress == nil {
		t.Errorf("an empty list did not survive a rewrite as a list:\n%s\n%s", d, out)
	}
	for _, tc := range []struct {
		agent, source, text string
		network             confine.Network
		egress              []string
	}{
		{"other", "defaults", "none; egress by name: github.com:443, *.example.com", confine.NetworkNone, []string{"github.com:443", "*.example.com"}},
		{"go", "agents.go", "none; egress by name: proxy.golang.example:443, git.corp.example:443/private", confine.NetworkNone, []string{"proxy.golang.example:443", "git.corp.example:443/private"}},
		{"wide", "agents.wide", "all", confine.NetworkAll, nil},
		{"shut", "agents.shut", "none; egress by name: no names (under ask, each is asked)", confine.NetworkNone, []string{}},
	} {
		rc := f.resolve(tc.agent, "/home/u", false).Confine
		if rc == nil || rc.Network != tc.network || rc.Sources["network"] != tc.source || rc.NetworkText() != tc.text {
			t.Errorf("%s: %+v, text %q", tc.agent, rc, rc.NetworkText())
			continue
		}
		if d := cmp.Diff(tc.egress, rc.Egress); d != "" {
			t.Errorf("%s: egress (-want +got):\n%s", tc.agent, d)
		}
		if (tc.egress == nil) != (rc.EgressPatterns() == nil) || len(rc.EgressPatterns()) != len(tc.egress) {
			t.Errorf("%s: patterns %v", tc.agent, rc.EgressPatterns())
		}
	}
}

// TestEgressListErrors: a bad pattern fails the load, naming the entry,
// its line and what to write instead.
func TestEgressListErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`{"version":1,"defaults":{"confine":{"network":["github.com:443","*"]}}}`, `defaults.confine.network[1]: egress pattern "*"`},
		{`{"version":1,"agents":{"a":{"confine":{"network":["http://x.example"]}}}}`, `agents.a.confine.network[0]`},
		{`{"version":1,"agents":{"a":{"confine":{"network":["x.example:99999"]}}}}`, "1 to 65535"},
		{`{"version":1,"agents":{"a":{"confine":{"network":[443]}}}}`, "agents.a.confine.network[0]: expected a string"},
		{`{"version":1,"defaults":{"confine":{"network":false}}}`, "defaults.confine.network: expected a string"},
	} {
		_, err := Parse("x.json", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.src, err, tc.want)
		}
	}
	_, err := Parse("x.json", []byte("{\"version\":1,\n\"defaults\":{\"confine\":{\"network\":[\"*.com\"]}}}"))
	if err == nil || !strings.Contains(err.Error(), ":2:") || !strings.Contains(err.Error(), "hint") {
		t.Errorf("error without position or hint: %v", err)
	}
}

// TestEgressWidenings: a pattern added to a run's egress list lets it
// reach a name it could not, so a remote edit that adds one is a widening;
// a list replacing all, or a pattern removed, is not.
func TestEgressWidenings(t *testing.T) {
	parse := func(src string) *File {
		f, err := Parse("x.json", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	doc := func(network string) string {
		return `{"version":1,"defaults":{"security":"allowlist"},"agents":{"go":{"confine":{"network":` + network + `}}}}`
	}
	for _, tc := range []struct {
		name, cur, next string
		want            []string
	}{
		{"a pattern added", `["github.com:443"]`, `["github.com:443","*.example.com"]`, []string{"agents.go.confine.network (absent)→*.example.com"}},
		{"none to a list", `"none"`, `["github.com:443"]`, []string{"agents.go.confine.network (absent)→github.com:443"}},
		{"a pattern removed", `["github.com:443","*.example.com"]`, `["github.com:443"]`, nil},
		{"all to a list", `"all"`, `["github.com:443"]`, nil},
		{"a list to all", `["github.com:443"]`, `"all"`, []string{"agents.go.confine.network none→all"}},
		{"respelled the same", `["github.com:443"]`, `["GitHub.com.:443"]`, nil},
	} {
		var got []string
		for _, w := range Widenings(parse(doc(tc.cur)), parse(doc(tc.next))) {
			got = append(got, w.String())
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
	}
}
