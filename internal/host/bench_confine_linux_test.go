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
// the launcher in a warm process against a fresh start of it.
func BenchmarkConfinedWarm(b *testing.B) {
	if confine.KernelABI() < 4 {
		testdep.Missing(b, "landlock", "confinement needs Landlock ABI 4")
	}
	for _, warm := range []int{0, 1} {
		b.Run(map[int]string{0: "fresh", 1: "warm"}[warm], func(b *testing.B) {
			f := newFixture(b, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "/usr/bin/true")
			f.engine.WarmInterpreters = warm
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
		})
	}
}
