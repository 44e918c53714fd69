package host

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/policy"
)

// BenchmarkDecision measures one full decision on an execution host: load
// (cached) approvals, analyse a 5-segment command, resolve every executable,
// match against a 1,000-pattern allowlist and decide. Target ≤ 20 µs; compare
// with BenchmarkBaselineSpawnTrue from the same run.
func BenchmarkDecision(b *testing.B) {
	e, req := decisionBench(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.Prepare(req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecisionFirstSeen is BenchmarkDecision with a new word in the
// text each time: the analysis memo and the parse cache miss, as for an
// agent's first command of a kind. Target ≤ 50 µs.
func BenchmarkDecisionFirstSeen(b *testing.B) {
	e, req := decisionBench(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req.RawCommand = fmt.Sprintf("cd /tmp && git status | grep -v x%d | sort | uniq -c", i)
		p, err := e.Prepare(req)
		if err != nil {
			b.Fatal(err)
		}
		if p.Decision.Outcome != policy.Allow {
			b.Fatalf("decision %+v, want allow", p.Decision)
		}
	}
}

// decisionBench is an engine with a 1,000-pattern allowlist and the
// 5-segment command it allows.
func decisionBench(b *testing.B) (*Engine, Request) {
	b.Helper()
	dir := b.TempDir()
	store := approvals.NewStore(dir)
	_, err := store.Update(func(f *approvals.File) error {
		f.Defaults.Security, f.Defaults.Ask = "allowlist", "off"
		for i := 0; i < 996; i++ {
			if i%2 == 0 {
				f.AddPattern("*", fmt.Sprintf("/opt/tool%d/bin/*", i))
			} else {
				f.AddPattern("*", fmt.Sprintf("/usr/local/lib/pkg%d/bin/run", i))
			}
		}
		for _, p := range []string{"/usr/bin/git", "/usr/bin/grep", "/usr/bin/sort", "/usr/bin/uniq"} {
			f.AddPattern("*", p)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	// A file just written is reloaded on every decision for
	// policyRacyWindow; measure the steady state of a file not being edited.
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(store.Path, old, old); err != nil {
		b.Fatal(err)
	}
	e := NewEngine(dir, policy.HostGateway, "gw")
	e.PATH = "/usr/local/bin:/usr/bin:/bin"
	req := Request{RawCommand: "cd /tmp && git status | grep -v x | sort | uniq -c", Cwd: b.TempDir()} // no run works in the state directory
	p, err := e.Prepare(req)
	if err != nil {
		b.Fatal(err)
	}
	if p.Decision.Outcome != policy.Allow || len(p.Analysis.Segments) != 4 {
		b.Fatalf("benchmark command should be allowed with 4 executables, got %+v %+v", p.Decision, p.Analysis)
	}
	b.Cleanup(func() { _ = e.Close() })
	return e, req
}

// BenchmarkBaselineSpawnTrue is the baseline the decision is compared with:
// spawning /bin/true, the cheapest thing an exec can do.
func BenchmarkBaselineSpawnTrue(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}
