package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/confine"
)

// TestLauncherHandedBase runs a real launcher, fresh and warm, handed the
// base layer of its confinement (as BaseFD) from the runner's Builder: the
// secret stays unreadable, the work directory writable, and the ruleset's
// descriptor does not reach the command. A base layer built for another
// protected set (Spec.ConfineBase) refuses the run: nothing starts. (What
// the launcher does with whatever ruleset it is handed, its own path:
// confine's TestLauncherHandedRuleset.)
func TestLauncherHandedBase(t *testing.T) {
	if confine.KernelABI() < 3 {
		t.Skip("needs Landlock ABI 3") // the confine and host tests skip loudly
	}
	rules := &confine.Builder{}
	defer rules.Close()
	for _, mismatched := range []bool{false, true} {
		for _, warm := range []bool{false, true} {
			if warm && !testRunner.WarmSupported() {
				continue
			}
			name := map[bool]string{false: "builder", true: "built for another protected set"}[mismatched]
			if warm {
				name += ", warm"
			}
			t.Run(name, func(t *testing.T) {
				root := t.TempDir()
				work, state, other := filepath.Join(root, "work"), filepath.Join(root, "state"), filepath.Join(root, "other")
				for _, d := range []string{work, state, other} {
					if err := os.Mkdir(d, 0o700); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.WriteFile(filepath.Join(state, "secret"), []byte("SECRET"), 0o600); err != nil {
					t.Fatal(err)
				}
				c, _ := confine.Confinement{Writable: []string{work}, Protected: []string{state}, Network: confine.NetworkNone}.Resolve()
				spec := Spec{Command: `cat ../state/secret; readlink /proc/$$/fd/4; echo ok > f`, Cwd: work, Timeout: time.Minute, Confine: &c, ConfineRules: rules}
				if mismatched {
					wrong, _ := confine.Confinement{Writable: []string{work}, Protected: []string{other}, Network: confine.NetworkNone}.Resolve()
					base, err := rules.Base(&wrong, confine.KernelABI())
					if err != nil || base == nil {
						t.Fatalf("no base layer: %v", err)
					}
					defer base.Close()
					spec.ConfineBase = base
				}
				if warm {
					s := NewWarmStarter()
					defer s.Close()
					w, err := s.Start([]string{os.Args[0]}, []string{helperEnv + "=warm-launcher"}, time.Minute)
					if err != nil {
						t.Fatal(err)
					}
					defer w.Close()
					spec.Warm = w
				}
				res, err := testRunner.Run(context.Background(), spec)
				_, werr := os.Stat(filepath.Join(work, "f"))
				if mismatched {
					if !errors.Is(err, confine.ErrBaseMismatch) || werr == nil {
						t.Errorf("a base layer built for another protected set: %+v, %v; want the run refused, nothing started", res, err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				out := res.Stdout + res.Stderr
				if strings.Contains(out, "SECRET") || strings.Contains(out, "landlock") {
					t.Errorf("the secret or the ruleset's descriptor reached the command: %+v", res)
				}
				if res.ExitCode != 0 || werr != nil {
					t.Errorf("the run failed: %v %+v", werr, res)
				}
			})
		}
	}
}
