package host

import (
	"context"
	"testing"

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
