package host

import (
	"context"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/testdep"
)

// BenchmarkConfinement measures a whole allowed run (decision, private
// temporary directory, start, exit) of a direct and an interpreted
// command, confined and unconfined, in the same benchmark: the difference
// is what confinement costs per run.
func BenchmarkConfinement(b *testing.B) {
	if confine.KernelABI() < 4 {
		testdep.Missing(b, "landlock", "confinement needs Landlock ABI 4")
	}
	for _, how := range []struct{ name, text string }{
		{"direct", "true"},
		{"interpreted", "true && true"},
	} {
		for _, confined := range []bool{false, true} {
			name := how.name + "/unconfined"
			if confined {
				name = how.name + "/confined"
			}
			b.Run(name, func(b *testing.B) {
				f := newFixture(b, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "/usr/bin/true")
				f.engine.noConfine = !confined
				req := Request{RawCommand: how.text, Cwd: f.dir}
				for b.Loop() {
					res, err := f.engine.Run(context.Background(), req)
					if err != nil || res.ExitCode != 0 {
						b.Fatalf("run: %v %+v", err, res)
					}
				}
			})
		}
	}
}

// BenchmarkConfinedWarm measures a confined direct run with the engine's
// warm pool off and on, each run after the pool is full again (untimed):
// the launcher in a warm process against a fresh start of it; each handed
// the engine's kept base layer, and building it (ConfineRulesAfresh, the
// -afresh rows). The runs' private temporary directories go to the work
// directory, beside the state directory, as they would for a state
// directory in the home directory: in the fixture's temporary directory,
// on the way to the state directory, every run would change a directory
// the base layer lists, and it would be built for every run.
func BenchmarkConfinedWarm(b *testing.B) {
	if confine.KernelABI() < 4 {
		testdep.Missing(b, "landlock", "confinement needs Landlock ABI 4")
	}
	for _, afresh := range []bool{false, true} {
		for _, warm := range []int{0, 1} {
			name := map[int]string{0: "fresh", 1: "warm"}[warm]
			if afresh {
				name += "-afresh"
			}
			b.Run(name, func(b *testing.B) { benchConfinedWarm(b, warm, afresh) })
		}
	}
}

func benchConfinedWarm(b *testing.B, warm int, afresh bool) {
	f := newFixture(b, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "/usr/bin/true")
	f.engine.WarmInterpreters, f.engine.ConfineRulesAfresh = warm, afresh
	b.Setenv("TMPDIR", f.dir)
	// The fixture's directories were made a moment ago: a base
	// layer listing them is kept only once they are 2 s old.
	time.Sleep(2100 * time.Millisecond)
	// A path, not the builtin: it starts directly.
	req := Request{RawCommand: "/usr/bin/true", Cwd: f.dir}
	for b.Loop() {
		if warm > 0 {
			b.StopTimer()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := f.engine.warm().waitReady(ctx, 1); err != nil {
				b.Fatal(err)
			}
			cancel()
			b.StartTimer()
		}
		res, err := f.engine.Run(context.Background(), req)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("run: %v %+v", err, res)
		}
	}
	b.StopTimer()
	_ = f.engine.Close()
}
