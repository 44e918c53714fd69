package host

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/exechost/exechost/internal/hint"
)

// runTempPrefix starts the name of the directory an engine makes its
// runs' private temporary directories in, in the host's temporary
// directory; the creating process's pid follows (runTempPrefix + pid + "-"
// + random), so that a later engine can remove what a killed one left
// behind (sweepRunTemps).
const runTempPrefix = "exechost-run-"

// runTemps makes an engine's runs' private temporary directories, each
// inside one directory of the engine's own (0700, made on first use): a
// run's start and end then add and remove no entry of the host's
// temporary directory itself, which every cache watching a path beneath
// it (a state directory, a cwd or a file in /tmp: fschange) would count as
// a change, and work out again for every run. The zero value is ready.
//
// A run's directory is made ahead, after the run before it started (the
// spare), and removed after the run on another goroutine: a mkdir and an
// rmdir on a disk file system are a few hundred microseconds of the run's
// path on a small machine (issue 39).
type runTemps struct {
	mu     sync.Mutex
	dir    string // the engine's directory; "" until made
	spare  string // a run directory made ahead that no run has had; "" when none
	making bool   // a spare is being made
	// bg counts the removals and the making ahead under way; closing
	// (set while close waits for them) keeps new ones from starting.
	bg      sync.WaitGroup
	closing bool
}

// parent returns the engine's directory, making it when there is none or
// it is gone (the host's temporary files cleaner removes an idle one).
func (t *runTemps) parent(gone string) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if gone != "" && t.dir == gone {
		t.dir = ""
	}
	if t.dir == "" {
		d, err := os.MkdirTemp("", runTempPrefix+strconv.Itoa(os.Getpid())+"-")
		if err != nil {
			return "", err
		}
		t.dir = d
	}
	return t.dir, nil
}

// close waits for the removals and the making ahead under way, then
// removes the engine's directory (a run after it makes another).
func (t *runTemps) close() error {
	t.mu.Lock()
	t.closing = true
	t.mu.Unlock()
	t.bg.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closing = false
	t.spare = ""
	if t.dir == "" {
		return nil
	}
	err := os.RemoveAll(t.dir)
	t.dir = ""
	return err
}

// make creates a run's private temporary directory (0700, removed by the
// returned function after the run) and returns env with TMPDIR set to it:
// the command's temporary files go where it may write, and never into a
// directory the request named.
func (t *runTemps) make(env map[string]string) (string, map[string]string, func(), error) {
	dir, err := t.take()
	if err != nil {
		return "", nil, nil, hint.Wrap(fmt.Errorf("create the run's temporary directory: %w", err), "check that the host's temporary directory is writable")
	}
	t.ahead()
	env = maps.Clone(env)
	if env == nil {
		env = map[string]string{}
	}
	env["TMPDIR"] = dir
	return dir, env, func() { t.later(func() { _ = os.RemoveAll(dir) }) }, nil
}

// take returns the spare when it is still as it was made (an empty 0700
// directory, no link: a run of security=full could have written there),
// else makes a directory.
func (t *runTemps) take() (string, error) {
	t.mu.Lock()
	spare := t.spare
	t.spare = ""
	t.mu.Unlock()
	if spare != "" {
		if unused(spare) {
			return spare, nil
		}
		t.later(func() { _ = os.RemoveAll(spare) })
	}
	return t.run()
}

// ahead makes the next run's directory on another goroutine, unless one
// is spare or being made.
func (t *runTemps) ahead() {
	t.mu.Lock()
	if t.spare != "" || t.making || t.closing {
		t.mu.Unlock()
		return
	}
	t.making = true
	t.bg.Add(1)
	t.mu.Unlock()
	go func() {
		defer t.bg.Done()
		dir, err := t.run()
		t.mu.Lock()
		t.making = false
		if err == nil && t.spare == "" {
			t.spare, dir = dir, ""
		}
		t.mu.Unlock()
		if err == nil && dir != "" {
			_ = os.RemoveAll(dir)
		}
	}()
}

// later runs f (a removal) on another goroutine that close waits for;
// while close waits, on this one.
func (t *runTemps) later(f func()) {
	t.mu.Lock()
	if t.closing {
		t.mu.Unlock()
		f()
		return
	}
	t.bg.Add(1)
	t.mu.Unlock()
	go func() {
		defer t.bg.Done()
		f()
	}()
}

func (t *runTemps) run() (string, error) {
	gone := ""
	for range 2 {
		parent, err := t.parent(gone)
		if err != nil {
			return "", err
		}
		dir, err := os.MkdirTemp(parent, "")
		if !errors.Is(err, fs.ErrNotExist) {
			return dir, err
		}
		gone = parent // removed under the engine: made again, once
	}
	return "", fmt.Errorf("%s keeps disappearing", os.TempDir())
}

// sweepRunTemps removes the run directories in tmp that a process which no
// longer exists created: a host killed mid-run (SIGKILL, the OOM killer)
// never removes its runs' directories, and their files may hold what a
// command wrote. A directory of a live process, of another user, or not
// named as runTemp names them is left alone. It returns how many it
// removed.
func sweepRunTemps(tmp string) int {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return 0
	}
	removed := 0
	for _, ent := range entries {
		pid, ok := runTempPID(ent.Name())
		if !ok || !ent.IsDir() || pid == os.Getpid() || processExists(pid) {
			continue
		}
		dir := filepath.Join(tmp, ent.Name())
		if !ownedByUs(dir) {
			continue
		}
		if os.RemoveAll(dir) == nil {
			removed++
		}
	}
	return removed
}

// runTempPID is the creating pid in a run directory's name.
func runTempPID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, runTempPrefix)
	if !ok {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(digits)
	return pid, err == nil && pid > 0
}
