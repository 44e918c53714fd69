package host

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/exechost/exechost/internal/hint"
)

// runTempPrefix starts the name of each run's private temporary directory
// in the host's temporary directory; the creating process's pid follows
// (runTempPrefix + pid + "-" + random), so that a later engine can remove
// what a killed one left behind (sweepRunTemps).
const runTempPrefix = "exechost-run-"

// runTemp creates the run's private temporary directory (0700, removed by
// the returned function after the run) and returns env with TMPDIR set to
// it: the command's temporary files go where it may write, and never into
// a directory the request named.
func runTemp(env map[string]string) (string, map[string]string, func(), error) {
	dir, err := os.MkdirTemp("", runTempPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", nil, nil, hint.Wrap(fmt.Errorf("create the run's temporary directory: %w", err), "check that the host's temporary directory is writable")
	}
	env = maps.Clone(env)
	if env == nil {
		env = map[string]string{}
	}
	env["TMPDIR"] = dir
	return dir, env, func() { _ = os.RemoveAll(dir) }, nil
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
