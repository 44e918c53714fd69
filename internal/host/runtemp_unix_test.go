//go:build unix

package host

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/fschange"
)

// TestSweepRunTemps: a killed host's run directories are removed by the
// next engine; a live process's, an unparseable name and a file are not.
func TestSweepRunTemps(t *testing.T) {
	tmp := t.TempDir()
	dead := exec.Command("/bin/true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{ // name → want removed
		runTempPrefix + strconv.Itoa(dead.Process.Pid) + "-123": true,
		runTempPrefix + strconv.Itoa(os.Getpid()) + "-456":      false,
		runTempPrefix + "1-789":                                 false, // init lives
		runTempPrefix + "3141592":                               false, // no pid in the name
		"unrelated-" + strconv.Itoa(dead.Process.Pid) + "-1":    false,
	}
	for n := range names {
		if err := os.MkdirAll(filepath.Join(tmp, n, "inner"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	file := runTempPrefix + strconv.Itoa(dead.Process.Pid) + "-file"
	if err := os.WriteFile(filepath.Join(tmp, file), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	names[file] = false
	if got := sweepRunTemps(tmp); got != 1 {
		t.Errorf("removed %d, want 1", got)
	}
	for n, gone := range names {
		_, err := os.Stat(filepath.Join(tmp, n))
		if gone != os.IsNotExist(err) {
			t.Errorf("%s: removed=%v, want %v", n, os.IsNotExist(err), gone)
		}
	}
}

// TestRunTempNamesItsProcess: a run's directory is inside one that
// carries this process's pid, so a sweep can tell whose it is.
func TestRunTempNamesItsProcess(t *testing.T) {
	var temps runTemps
	defer temps.close()
	dir, env, done, err := temps.make(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if pid, ok := runTempPID(filepath.Base(filepath.Dir(dir))); !ok || pid != os.Getpid() || filepath.Dir(filepath.Dir(dir)) != filepath.Clean(os.TempDir()) {
		t.Fatalf("%s: pid %d ok %v, want %d", dir, pid, ok, os.Getpid())
	}
	if env["TMPDIR"] != dir {
		t.Fatalf("TMPDIR %q, want %q", env["TMPDIR"], dir)
	}
	done()
	temps.bg.Wait() // the removal runs off the run's path
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s still there after done: %v", dir, err)
	}
}

// TestRunTempSpare: a run's directory is made ahead and handed to the
// next run only while it is as it was made: every run has a directory of
// its own, and a spare someone wrote into (a run of security=full can) or
// replaced by a link is never handed out.
func TestRunTempSpare(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	var temps runTemps
	defer temps.close()
	seen := map[string]bool{}
	take := func() (string, func()) {
		t.Helper()
		dir, _, done, err := temps.make(nil)
		if err != nil {
			t.Fatal(err)
		}
		if seen[dir] {
			t.Fatalf("%s handed out twice", dir)
		}
		seen[dir] = true
		if !unused(dir) {
			t.Fatalf("%s was handed out not empty", dir)
		}
		return dir, done
	}
	_, done := take()
	temps.bg.Wait()
	spare := temps.spare
	if spare == "" {
		t.Fatal("no directory was made ahead")
	}
	if dir, done2 := take(); dir != spare {
		t.Errorf("the spare %s was not handed to the next run (got %s)", spare, dir)
	} else {
		done2()
	}
	done()
	for _, plant := range []func(string) error{
		func(d string) error { return os.WriteFile(filepath.Join(d, "planted"), []byte("x"), 0o600) },
		func(d string) error { return os.Chmod(d, 0o755) },
		func(d string) error {
			if err := os.Remove(d); err != nil {
				return err
			}
			return os.Symlink(t.TempDir(), d)
		},
	} {
		temps.bg.Wait()
		spare := temps.spare
		if spare == "" {
			t.Fatal("no directory was made ahead")
		}
		if err := plant(spare); err != nil {
			t.Fatal(err)
		}
		dir, done := take()
		if dir == spare {
			t.Errorf("a spare changed after it was made was handed out: %s", dir)
		}
		done()
	}
	temps.bg.Wait()
	if err := temps.close(); err != nil {
		t.Fatal(err)
	}
	for d := range seen {
		if _, err := os.Lstat(d); !os.IsNotExist(err) {
			t.Errorf("%s outlived close: %v", d, err)
		}
	}
}

// TestRunsLeaveTheTempDirAlone: runs add and remove no entry of the
// host's temporary directory (a watch on a path beneath it, as the
// policy cache takes on a state directory in /tmp, stays unchanged), and
// an engine directory removed under the engine is made again.
func TestRunsLeaveTheTempDirAlone(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	state := filepath.Join(tmp, "state")
	if err := os.WriteFile(filepath.Join(tmp, "policy.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	var temps runTemps
	defer temps.close()
	run := func() string {
		t.Helper()
		dir, _, done, err := temps.make(nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "scratch"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		done()
		return dir
	}
	run() // the engine's directory is made
	w := fschange.New()
	set, ok := w.Watch([]string{state, filepath.Join(tmp, "policy.json")})
	if !ok {
		t.Skip("the temporary directory cannot be watched here")
	}
	for range 3 {
		run()
	}
	if !fschange.Unchanged(set) {
		t.Error("runs changed the host's temporary directory")
	}
	ents, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 2 {
		t.Errorf("the temporary directory holds %d entries, want policy.json and the engine's directory", len(ents))
	}

	gone := filepath.Dir(run())
	temps.bg.Wait() // the next run's directory, made ahead in it, too
	if err := os.RemoveAll(gone); err != nil {
		t.Fatal(err)
	}
	if dir := run(); !strings.HasPrefix(filepath.Base(filepath.Dir(dir)), runTempPrefix) {
		t.Errorf("after its directory was removed: a run's directory %s", dir)
	}
}

// BenchmarkRunTemp is what a run's private temporary directory costs the
// run's path: "made per run" is the mkdir and the removal a run did
// itself before the directory was made ahead; "made ahead" is make and
// done as the engine calls them (the making ahead and the removal run on
// other goroutines, waited for outside the timer).
func BenchmarkRunTemp(b *testing.B) {
	b.Run("made per run", func(b *testing.B) {
		dir := b.TempDir()
		for b.Loop() {
			d, err := os.MkdirTemp(dir, "")
			if err != nil {
				b.Fatal(err)
			}
			if err := os.RemoveAll(d); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("made ahead", func(b *testing.B) {
		b.Setenv("TMPDIR", b.TempDir())
		var temps runTemps
		defer temps.close()
		for b.Loop() {
			_, _, done, err := temps.make(nil)
			if err != nil {
				b.Fatal(err)
			}
			done()
			b.StopTimer()
			temps.bg.Wait()
			b.StartTimer()
		}
	})
}
