package jail

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/reexec"
	"github.com/exechost/exechost/internal/runner"
)

// warmTestArg makes this test binary a program the jail keeps warm:
// [exe, warmTestArg, "warm"] waits for its hand-over (as the interpreter
// does), [exe, warmTestArg, "write", path] is a run of it: it says
// whether it was warm and whether it is its pid namespace's init, then
// tries to write path.
const warmTestArg = "--exechost-test-jail-warm"

func init() {
	reexec.Register(warmTestArg, func() {
		args := os.Args
		warm := false
		if len(args) == 3 && args[2] == "warm" {
			got, err := runner.AwaitHandOver()
			if errors.Is(err, runner.ErrNoHandOver) {
				os.Exit(0)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			args, warm = got, true
		}
		if len(args) != 4 || args[2] != "write" {
			fmt.Fprintf(os.Stderr, "usage: %q\n", args)
			os.Exit(2)
		}
		fmt.Printf("warm=%v init=%v tmpdir=%s\n", warm, os.Getpid() == 1, os.Getenv("TMPDIR"))
		if err := os.WriteFile(args[3], []byte("x"), 0o644); err != nil {
			fmt.Printf("refused: %v\n", err)
			os.Exit(1)
		}
		fmt.Println("WROTE")
		os.Exit(0)
	})
}

// warmRun runs [exe, warmTestArg, "write", target] in j (asking for its
// warm process) as the host runs an interpreted text: by the decided
// file's descriptor.
func warmRun(t *testing.T, j *Jail, target string) runner.Result {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	id, err := runner.IDOf(exe)
	if err != nil {
		t.Fatal(err)
	}
	res, err := runner.Run(context.Background(), runner.Spec{
		Argv: []string{exe, warmTestArg, "write", target}, Executable: &id,
		BaseEnv: []string{"PATH=/usr/bin:/bin", "TMPDIR=/tmp/run"}, Jail: j.Warmed([]string{exe, warmTestArg, "warm"}),
		Timeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

// warmJail is a jail (layers: nil for all) whose view shows this test
// binary (it lives in the host's /tmp under go test).
func warmJail(t *testing.T, p *Pool, writable string, layers []confine.Layer) *Jail {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if layers == nil {
		layers = AllLayers
	}
	j, release, err := p.Get(Options{Confine: confine.Confinement{Writable: []string{writable}, Network: confine.NetworkNone}, Layers: layers, Readable: []string{exe}})
	if err != nil {
		t.Fatalf("start jail: %v", err)
	}
	t.Cleanup(release)
	return j
}

// handed runs target in j until a warm process took a run (the first run
// starts afresh and the server starts the warm process once it is done;
// WaitWarm waits for it), at most three times, and returns that run's
// result.
func handed(t *testing.T, j *Jail, target string) runner.Result {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		before := j.Handed()
		res := warmRun(t, j, target)
		if j.Handed() > before {
			if !strings.Contains(res.Stdout, "warm=true") {
				t.Fatalf("the jail counted a hand-over, the run says %q %q exit %d", res.Stdout, res.Stderr, res.ExitCode)
			}
			return res
		}
		if strings.Contains(res.Stdout, "warm=true") {
			t.Fatalf("a run says it was warm, the jail counted none: %q", res.Stdout)
		}
		if err := j.WaitWarm([]string{exe, warmTestArg, "warm"}, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("no run was handed to the warm process that stood ready")
	return runner.Result{}
}

// TestWarmHandOver: a run the jail hands to its warm process is the run a
// fresh start would be: its own pid namespace's init, the environment
// handed over (not the warm process's), its output and exit status, and
// every layer of the jail. The attack (a write outside the writable root)
// is refused in the warm process; the control, the same hand-over in a
// jail that builds no layer, lets it land.
func TestWarmHandOver(t *testing.T) {
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "jailed", true: "control: no layer"}[control], func(t *testing.T) {
			p, err := NewPool()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			w, outside := outsideDir(t), outsideDir(t)
			var layers []confine.Layer
			if control {
				layers = []confine.Layer{}
			}
			j := warmJail(t, p, w, layers)
			res := handed(t, j, filepath.Join(w, "inside"))
			if res.ExitCode != 0 || !strings.Contains(res.Stdout, "WROTE") || !strings.Contains(res.Stdout, "tmpdir=/tmp/run") {
				t.Fatalf("a handed run in its root: %+v", res)
			}
			if !control && !strings.Contains(res.Stdout, "init=true") {
				t.Fatalf("a handed run is not its pid namespace's init: %q", res.Stdout)
			}
			target := filepath.Join(outside, "planted")
			res = handed(t, j, target)
			_, statErr := os.Stat(target)
			if landed := statErr == nil; landed != control {
				t.Fatalf("a write outside the root from a warm process: landed=%v, want %v (%q %q)", landed, control, res.Stdout, res.Stderr)
			}
			if !control && res.ExitCode != 1 {
				t.Fatalf("refused write: exit %d (%q)", res.ExitCode, res.Stdout)
			}
		})
	}
}

// TestWarmNeverStale: a policy change never lets a run start in a warm
// process built under the old policy. Root A's jail has a warm process
// standing; the policy then makes B the writable root (another Options,
// another key, another jail): a run under it that writes into A is
// refused, even handed to a warm process of its own. The control, the
// same run under A's policy, lands in A.
func TestWarmNeverStale(t *testing.T) {
	p, err := NewPool()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	a, b := outsideDir(t), outsideDir(t)
	ja := warmJail(t, p, a, nil)
	if res := handed(t, ja, filepath.Join(a, "control")); res.ExitCode != 0 {
		t.Fatalf("control: a run under A's policy could not write A: %+v", res)
	}
	jb := warmJail(t, p, b, nil)
	if jb == ja || jb.Pid() == ja.Pid() {
		t.Fatal("another policy got the old policy's jail")
	}
	target := filepath.Join(a, "stale")
	res := handed(t, jb, target)
	if _, err := os.Stat(target); err == nil || res.ExitCode != 1 {
		t.Fatalf("a run under B's policy wrote A: exit %d %q", res.ExitCode, res.Stdout)
	}
}

// TestWarmOnlyTheDecidedFile: a run whose decided file is not the file
// the warm process is never handed to it (nor started at all: the fresh
// start refuses a file other than the decided one).
func TestWarmOnlyTheDecidedFile(t *testing.T) {
	p, err := NewPool()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	w := outsideDir(t)
	j := warmJail(t, p, w, nil)
	handed(t, j, filepath.Join(w, "first"))
	exe, _ := os.Executable()
	other, err := runner.IDOf("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	if err := j.WaitWarm([]string{exe, warmTestArg, "warm"}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	before := j.Handed()
	target := filepath.Join(w, "swapped")
	_, err = runner.Run(context.Background(), runner.Spec{
		Argv: []string{exe, warmTestArg, "write", target}, Executable: &other,
		BaseEnv: []string{"PATH=/usr/bin:/bin"}, Jail: j.Warmed([]string{exe, warmTestArg, "warm"}), Timeout: 30 * time.Second,
	})
	if err == nil || j.Handed() != before {
		t.Fatalf("a run decided on /bin/true was started as this binary: err %v, handed %d→%d", err, before, j.Handed())
	}
	if _, err := os.Stat(target); err == nil {
		t.Fatal("the swapped file ran")
	}
}
