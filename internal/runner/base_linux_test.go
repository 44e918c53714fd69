package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/landlock-lsm/go-landlock/landlock"
	"golang.org/x/sys/unix"

	"github.com/exechost/exechost/internal/confine"
)

// TestLauncherHandedBase runs a real launcher, fresh and warm, handed the
// base layer of its confinement (as BaseFD): from the runner's Builder
// (the secret stays unreadable, the work directory writable, and the
// ruleset's descriptor does not reach the command); a ruleset granting
// nothing in its place (used: nothing can be executed, exit 126); and a
// descriptor that is no ruleset (ignored: the launcher builds the base
// layer itself, and the secret stays unreadable).
func TestLauncherHandedBase(t *testing.T) {
	if confine.KernelABI() < 3 {
		t.Skip("needs Landlock ABI 3") // the confine and host tests skip loudly
	}
	denyAll := func(t *testing.T) *os.File {
		fd, _, err := landlock.Config{HandledAccessFS: landlock.AccessFSSet(unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE)}.NewRulesetFD()
		if err != nil || fd < 0 {
			t.Fatalf("ruleset: %d %v", fd, err)
		}
		return os.NewFile(uintptr(fd), "deny-all")
	}
	notRuleset := func(t *testing.T) *os.File {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	cases := []struct {
		name string
		base func(*testing.T) *os.File // Spec.ConfineBase; nil: the Builder's
		used bool                      // the handed ruleset confines
	}{
		{"builder", nil, false},
		{"deny-all handed", denyAll, true},
		{"not a ruleset", notRuleset, false},
	}
	rules := &confine.Builder{}
	defer rules.Close()
	for _, tc := range cases {
		for _, warm := range []bool{false, true} {
			if warm && !WarmSupported() {
				continue
			}
			name := tc.name
			if warm {
				name += ", warm"
			}
			t.Run(name, func(t *testing.T) {
				root := t.TempDir()
				work, state := filepath.Join(root, "work"), filepath.Join(root, "state")
				for _, d := range []string{work, state} {
					if err := os.Mkdir(d, 0o700); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.WriteFile(filepath.Join(state, "secret"), []byte("SECRET"), 0o600); err != nil {
					t.Fatal(err)
				}
				c, _ := confine.Confinement{Writable: []string{work}, Protected: []string{state}, Network: confine.NetworkNone}.Resolve()
				spec := Spec{Command: `cat ../state/secret; readlink /proc/$$/fd/4; echo ok > f`, Cwd: work, Timeout: time.Minute, Confine: &c, ConfineRules: rules}
				if tc.base != nil {
					spec.ConfineBase = tc.base(t)
					defer spec.ConfineBase.Close()
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
				res, err := Run(context.Background(), spec)
				if err != nil {
					t.Fatal(err)
				}
				out := res.Stdout + res.Stderr
				if strings.Contains(out, "SECRET") || strings.Contains(out, "landlock") {
					t.Errorf("the secret or the ruleset's descriptor reached the command: %+v", res)
				}
				_, werr := os.Stat(filepath.Join(work, "f"))
				switch {
				case tc.used && (res.ExitCode != 126 || werr == nil):
					t.Errorf("the handed ruleset was not used (it grants no execution): %+v", res)
				case !tc.used && (res.ExitCode != 0 || werr != nil):
					t.Errorf("the run failed: %v %+v", werr, res)
				}
			})
		}
	}
}
