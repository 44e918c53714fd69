//go:build unix

package host

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
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

// TestRunTempNamesItsProcess: runTemp's directory carries this process's
// pid, so a sweep can tell whose it is.
func TestRunTempNamesItsProcess(t *testing.T) {
	dir, env, done, err := runTemp(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if pid, ok := runTempPID(filepath.Base(dir)); !ok || pid != os.Getpid() {
		t.Fatalf("%s: pid %d ok %v, want %d", dir, pid, ok, os.Getpid())
	}
	if env["TMPDIR"] != dir {
		t.Fatalf("TMPDIR %q, want %q", env["TMPDIR"], dir)
	}
	done()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s still there after done: %v", dir, err)
	}
}
