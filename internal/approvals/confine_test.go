package approvals

import (
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
		Sources:  map[string]string{"writable": "defaults", "network": "defaults", "unsupported": "defaults"},
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
		Sources:  map[string]string{"writable": "agents.ops", "network": "agents.ops", "unsupported": "agents.ops"},
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
