package approvals

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/confine"
)

// TestConfineMember decodes "confine" at both levels, keeps an unknown
// member inside it through a rewrite, and resolves each field from the
// first level with a valid value, "~" expanded, with its source.
func TestConfineMember(t *testing.T) {
	src := `{"version":1,
	"defaults":{"security":"allowlist","confine":{"writable":["~/cache","rel/dir"],"network":"loopback","unsupported":"warn","future":{"x":1}}},
	"agents":{"dev":{"confine":{"network":"everywhere"}},"ops":{"confine":{"writable":[],"network":"all","unsupported":"deny"}}}}`
	f, err := Parse("x.json", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	out, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"future": {`) || !strings.Contains(string(out), `"~/cache"`) {
		t.Errorf("rewrite lost the confine member or its unknown field:\n%s", out)
	}
	again, err := Parse("x.json", out)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(f.Defaults.Confine, again.Defaults.Confine); d != "" {
		t.Errorf("round trip (-first +second):\n%s", d)
	}
	dev := f.resolve("dev", "/home/u", false)
	want := &ResolvedConfine{
		Sources:  sources("writable", "defaults", "network", "defaults", "unsupported", "defaults"),
		Writable: []string{"/home/u/cache"}, Network: confine.NetworkLoopback, Unsupported: confine.UnsupportedWarn,
	}
	if d := cmp.Diff(want, dev.Confine); d != "" {
		t.Errorf("dev (-want +got):\n%s", d)
	}
	for _, s := range []string{`defaults.confine.writable "rel/dir"`, `agents.dev.confine.network "everywhere"`} {
		if !strings.Contains(strings.Join(dev.Skipped, "\n"), s) {
			t.Errorf("skipped %q not reported: %v", s, dev.Skipped)
		}
	}
	ops := f.resolve("ops", "/home/u", false)
	want = &ResolvedConfine{
		Sources:  sources("writable", "agents.ops", "network", "agents.ops", "unsupported", "agents.ops"),
		Writable: []string{}, Network: confine.NetworkAll, Unsupported: confine.UnsupportedDeny,
	}
	if d := cmp.Diff(want, ops.Confine); d != "" {
		t.Errorf("ops (-want +got):\n%s", d)
	}
	if none := Default().ResolvePolicy("x"); none.Confine != nil {
		t.Errorf("a file without confine resolved %+v", none.Confine)
	}
}

// TestConfineMemberErrors refuses values of the wrong type with the
// position and the field.
func TestConfineMemberErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`{"version":1,"defaults":{"confine":"none"}}`, "defaults.confine: expected an object"},
		{`{"version":1,"defaults":{"confine":{"writable":"/tmp"}}}`, "defaults.confine.writable: expected an array of strings"},
		{`{"version":1,"agents":{"a":{"confine":{"writable":[1]}}}}`, "agents.a.confine.writable[0]: expected a string"},
		{`{"version":1,"defaults":{"confine":{"network":false}}}`, "defaults.confine.network: expected a string"},
	} {
		_, err := Parse("x.json", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.src, err, tc.want)
		}
	}
}

// sources is a ResolvedConfine's Sources: built-in for every word but the
// word/level pairs given.
func sources(kv ...string) map[string]string {
	m := map[string]string{}
	for _, w := range confineWords {
		m[w] = SourceBuiltIn
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// TestConfineJailWords decodes sockets, hidden, readable and
// writablePersistence at every level, keeps them through a rewrite, and
// resolves them: the first level with a list wins for sockets, readable
// and writablePersistence (an empty list at the agent sets "none" over
// the defaults); hidden adds up over every level, so no level can un-hide
// another's; a bad entry is skipped and reported, which only ever opens
// less (readable of a path outside the default hidden set opens nothing).
func TestConfineJailWords(t *testing.T) {
	src := `{"version":1,
	"defaults":{"confine":{"sockets":["/run/docker.sock"],"hidden":["~/secrets"],"readable":["~/.aws","~/notes"],"writablePersistence":[".git/hooks/","~/.bashrc","rel"]}},
	"agents":{
	  "*":{"confine":{"hidden":["/srv/keys","rel/key"]}},
	  "dev":{"confine":{"sockets":[],"readable":["~/.ssh/known_hosts"],"hidden":[]}},
	  "ops":{"confine":{"writablePersistence":[]}}}}`
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
	for id, a := range f.Agents {
		if d := cmp.Diff(a.Confine, again.Agents[id].Confine); d != "" {
			t.Errorf("agents.%s round trip (-first +second):\n%s", id, d)
		}
	}
	if d := cmp.Diff(f.Defaults.Confine, again.Defaults.Confine); d != "" {
		t.Errorf("defaults round trip (-first +second):\n%s", d)
	}

	dev := f.resolve("dev", "/home/u", false)
	want := &ResolvedConfine{
		Sources: sources("sockets", "agents.dev", "readable", "agents.dev", "writablePersistence", "defaults",
			"hidden", "agents.dev + agents.* + defaults"),
		Sockets:             []string{},
		Hidden:              []string{"/srv/keys", "/home/u/secrets"},
		Readable:            []string{"/home/u/.ssh/known_hosts"},
		WritablePersistence: []string{".git/hooks", "/home/u/.bashrc"},
	}
	if d := cmp.Diff(want, dev.Confine); d != "" {
		t.Errorf("dev (-want +got):\n%s", d)
	}
	skipped := strings.Join(dev.Skipped, "\n")
	for _, s := range []string{`agents.*.confine.hidden "rel/key" is not an absolute path`, `defaults.confine.writablePersistence "rel" is not an absolute path`} {
		if !strings.Contains(skipped, s) {
			t.Errorf("skipped %q not reported: %v", s, dev.Skipped)
		}
	}

	ops := f.resolve("ops", "/home/u", false)
	want = &ResolvedConfine{
		Sources: sources("sockets", "defaults", "readable", "defaults", "writablePersistence", "agents.ops",
			"hidden", "agents.* + defaults"),
		Sockets:             []string{"/run/docker.sock"},
		Hidden:              []string{"/srv/keys", "/home/u/secrets"},
		Readable:            []string{"/home/u/.aws"},
		WritablePersistence: []string{},
	}
	if d := cmp.Diff(want, ops.Confine); d != "" {
		t.Errorf("ops (-want +got):\n%s", d)
	}
	if !strings.Contains(strings.Join(ops.Skipped, "\n"), `defaults.confine.readable "~/notes" is not in the default hidden set`) {
		t.Errorf("readable outside the hidden set not reported: %v", ops.Skipped)
	}
}

// TestConfineJailWordsErrors refuses the new words with the wrong type.
func TestConfineJailWordsErrors(t *testing.T) {
	for _, w := range []string{"sockets", "hidden", "readable", "writablePersistence"} {
		_, err := Parse("x.json", []byte(`{"version":1,"defaults":{"confine":{"`+w+`":"/x"}}}`))
		if want := "defaults.confine." + w + ": expected an array of strings"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", w, err, want)
		}
	}
}

// TestDefaultHidden expands "~" and lists what the issue names.
func TestDefaultHidden(t *testing.T) {
	got := DefaultHidden("/home/u")
	for _, p := range []string{"/home/u/.ssh", "/home/u/.aws", "/home/u/.config/gcloud", "/home/u/.azure", "/home/u/.kube",
		"/home/u/.netrc", "/home/u/.docker/config.json", "/home/u/.password-store", "/home/u/.gnupg", "/home/u/.mozilla",
		"/home/u/.config/google-chrome", "/home/u/.config/chromium", "/home/u/.git-credentials", "/home/u/.config/gh/hosts.yml"} {
		if !slices.Contains(got, p) {
			t.Errorf("default hidden set lacks %s", p)
		}
	}
	got[0] = "changed"
	if DefaultHidden("/home/u")[0] == "changed" {
		t.Error("DefaultHidden shares its slice")
	}
	for _, p := range []string{"/home/u/.bashrc", "/home/u/.ssh/authorized_keys", "/home/u/.config/autostart", "/home/u/.config/systemd/user"} {
		if !slices.Contains(Persistence("/home/u"), p) {
			t.Errorf("persistence lacks %s", p)
		}
	}
}
