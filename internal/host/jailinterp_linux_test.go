package host

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/policy"
)

// TestInterpretedRunsHandedToWarm: interpreted runs in the standing jail
// take the fast path, a hand-over to the jail's warm interpreter (issue
// 39), and that path holds the jail: a handed run writes in its root, and
// a handed run's write outside its roots (a file in the home) is refused.
// The control runs the same texts with the jail off: the write lands and
// nothing is handed.
func TestInterpretedRunsHandedToWarm(t *testing.T) {
	needABI(t, 4)
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "jailed", true: "control: no jail"}[control], func(t *testing.T) {
			j := newJailFixture(t, policy.SecurityAllowlist)
			j.engine.NoJail, j.engine.noConfine = control, control
			// run runs text until a warm interpreter took a run (the
			// first starts afresh; the jail starts its warm interpreter
			// once that is done), within 30 s; with the jail off, once.
			run := func(text string) (Result, bool) {
				deadline := time.Now().Add(30 * time.Second)
				for {
					var before int
					if p := j.engine.jails(); p != nil {
						before = p.Handed()
					}
					req := Request{RawCommand: text, Cwd: j.repo}
					p, err := j.engine.Prepare(req)
					if err != nil {
						t.Fatal(err)
					}
					if p.RunsAs() != RunsInterpreted {
						t.Fatalf("runs as %s: the test proves nothing", p.RunsAs())
					}
					res, err := j.engine.Run(context.Background(), req)
					if err != nil {
						t.Fatal(err)
					}
					pool := j.engine.jails()
					if pool == nil || pool.Handed() > before {
						return res, pool != nil
					}
					if time.Now().After(deadline) {
						t.Fatal("no interpreted run was handed to a warm interpreter within 30s")
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			inside := filepath.Join(j.repo, "inside")
			res, handed := run("true && marker " + inside)
			if handed == control {
				t.Fatalf("handed to a warm interpreter = %v with the jail off = %v", handed, control)
			}
			if _, err := os.Stat(inside); err != nil || res.ExitCode != 0 {
				t.Fatalf("a run in its root: %v %+v", err, res)
			}
			if jailed := slices.Contains(res.Layers, confine.LayerView); jailed == control {
				t.Fatalf("layers %v", res.Layers)
			}
			planted := filepath.Join(j.home, "docs", "planted")
			res, _ = run("for f in " + planted + "; do marker $f; done")
			_, err := os.Stat(planted)
			if landed := err == nil; landed != control {
				t.Fatalf("a handed run's write outside its roots landed = %v, want %v (%+v)", landed, control, res)
			}
		})
	}
}
