package runner

import (
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/policy"
)

// isShellStartupEnv is policy.ShellStartupEnv: the one list of variables
// that make a shell read a file or run code before (or while) it runs the
// command. They are removed from every child's environment, inherited or
// not, and refused in an overlay.
func isShellStartupEnv(name string) bool { return policy.ShellStartupEnv(name) }

// CheckEnv refuses an overlay that sets a name policy.DangerousEnv or a
// shell start-up variable flags, or a value with a NUL byte, with
// ErrDangerousEnv: what buildEnv checks, for an overlay that travels
// another way (the interpreter's plan).
func CheckEnv(overlay map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(overlay)) {
		if policy.DangerousEnv(name) || isShellStartupEnv(name) {
			return hint.Wrap(fmt.Errorf("env %q: %w: it could change what runs", name, ErrDangerousEnv), "drop it from the request's env; set it on the host if it is really needed")
		}
		if strings.ContainsRune(overlay[name], 0) {
			return hint.Wrap(fmt.Errorf("env %q: %w: value contains a NUL byte", name, ErrDangerousEnv), "drop it from the request's env")
		}
	}
	return nil
}

// buildEnv returns base (the runner's environment when nil) without shell
// start-up variables and without the names overlay sets, followed by the
// overlay in name order. An overlay name that policy.DangerousEnv or
// isShellStartupEnv flags refuses the whole environment with
// ErrDangerousEnv; so does a value containing NUL, which no environment can
// carry.
func buildEnv(base []string, overlay map[string]string) ([]string, error) {
	if err := CheckEnv(overlay); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(overlay))
	for name := range overlay {
		names = append(names, name)
	}
	slices.Sort(names) // apply in a stable order
	if base == nil {
		base = os.Environ()
	}
	env := make([]string, 0, len(base)+len(names))
	for _, kv := range base {
		// An entry starting with "=" (Windows' per-drive working
		// directories, "=C:=C:\dir") has no name to match; keep it.
		name, _, _ := strings.Cut(kv, "=")
		if name != "" && (isShellStartupEnv(name) || overlaid(name, overlay)) {
			continue
		}
		env = append(env, kv)
	}
	for _, name := range names {
		env = append(env, name+"="+overlay[name])
	}
	return env, nil
}

// overlaid reports whether overlay sets name, ignoring case on Windows,
// where the environment does.
func overlaid(name string, overlay map[string]string) bool {
	if _, ok := overlay[name]; ok {
		return true
	}
	if runtime.GOOS != "windows" {
		return false
	}
	for o := range overlay {
		if strings.EqualFold(o, name) {
			return true
		}
	}
	return false
}
