package host

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/exechost/exechost/internal/policy"
)

// TestCachesChangeNothing decides a table of requests on an engine with
// its caches and on one without (NoCache), twice each: every Prepared —
// analysis, matches, environment, decision — must be equal.
func TestCachesChangeNothing(t *testing.T) {
	f := newFixture(t, policy.SecurityAllowlist, policy.AskOnMiss, policy.FallbackDeny, "$BIN/hello", "$BIN/other")
	fresh := NewEngine(f.engine.StateDir, policy.HostGateway, "gw")
	fresh.PATH, fresh.Home, fresh.NoCache = f.engine.PATH, f.engine.Home, true
	reqs := []Request{
		{RawCommand: "hello"}, {RawCommand: "hello | other x"}, {RawCommand: "marker x"},
		{RawCommand: "cd / && hello"}, {RawCommand: "A=1 hello"}, {RawCommand: "LC_ALL=C hello"},
		{RawCommand: "hello $(other)"}, {RawCommand: "sh -c 'other; hello'"}, {RawCommand: "nope"},
		{Argv: []string{"hello", "a b"}}, {RawCommand: "hello", Env: map[string]string{"X": "1"}},
		{RawCommand: "cat <<'A'B\nx\nAB"}, {RawCommand: "time nice hello"},
	}
	for _, req := range reqs {
		req.Cwd = f.dir
		want, werr := fresh.Prepare(req)
		for i := range 2 {
			got, err := f.engine.Prepare(req)
			if (err == nil) != (werr == nil) {
				t.Fatalf("%q: cached err %v, uncached %v", req.RawCommand, err, werr)
			}
			if err != nil {
				continue
			}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(Prepared{}), cmpopts.IgnoreFields(policy.Decision{}, "Err")); diff != "" {
				t.Fatalf("%q pass %d: cached (-uncached +cached):\n%s", req.RawCommand, i+1, diff)
			}
		}
	}
}
