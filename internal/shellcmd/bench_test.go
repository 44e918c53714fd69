package shellcmd

import (
	"fmt"
	"testing"

	"github.com/exechost/exechost/internal/policy"
)

const benchCommand = "cd /tmp && git status | grep -v x | sort | uniq -c"

// BenchmarkAnalyze measures the analysis of a 5-segment command (one cd and
// four resolved executables) against a PATH of one directory.
func BenchmarkAnalyze(b *testing.B) {
	f := newFixture(b)
	if a := Analyze(benchCommand, f.env); !a.OK || len(a.Segments) != 4 {
		b.Fatalf("Analyze(%q) = %+v", benchCommand, a)
	}
	b.ReportAllocs()
	for b.Loop() {
		Analyze(benchCommand, f.env)
	}
}

// BenchmarkAnalyzeLongPATH is the same command with the executables in the
// last of eight PATH directories, as on a typical host.
func BenchmarkAnalyzeLongPATH(b *testing.B) {
	f := newFixture(b)
	env := f.env
	env.PATH = "/nonexistent/a:/nonexistent/b:/nonexistent/c:/nonexistent/d:/nonexistent/e:/nonexistent/f:/nonexistent/g:" + f.bin
	b.ReportAllocs()
	for b.Loop() {
		Analyze(benchCommand, env)
	}
}

// BenchmarkAnalyzeAndMatch1000 is the whole allowlist check of an
// execution host: the analysis plus policy.MatchAll against 1,000 patterns
// (the design's target for the decision is ≤ 20 µs).
func BenchmarkAnalyzeAndMatch1000(b *testing.B) {
	f := newFixture(b)
	patterns := make([]string, 0, 1000)
	for i := 0; i < 996; i++ {
		patterns = append(patterns, fmt.Sprintf("/opt/tool%d/bin/*", i))
	}
	for _, n := range []string{"git", "grep", "sort", "uniq"} {
		patterns = append(patterns, f.bin+"/"+n)
	}
	b.ReportAllocs()
	for b.Loop() {
		a := Analyze(benchCommand, f.env)
		if _, ok := policy.MatchAll(patterns, a.Paths(), f.home); !ok {
			b.Fatal("not satisfied")
		}
	}
}
