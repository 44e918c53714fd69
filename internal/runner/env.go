package runner

import (
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/exechost/exechost/internal/policy"
)

// shellStartupEnv lists variables that make a shell read a file or run code
// before (or while) it runs the command, without the command text showing
// it. They are removed from every child's environment, inherited or not,
// and refused in an overlay: a planted BASH_ENV would otherwise run for
// every `/bin/sh -c` on a host where sh is bash.
var shellStartupEnv = []string{
	"BASH_ENV",       // bash: file sourced by non-interactive shells
	"ENV",            // sh/dash/ksh/bash --posix: file sourced at start-up
	"ZDOTDIR",        // zsh: directory of start-up files
	"SHELLOPTS",      // bash: enables options such as xtrace at start-up
	"BASHOPTS",       // bash: enables shopt options at start-up
	"PS4",            // expanded (command substitution included) under xtrace
	"PROMPT_COMMAND", // run by interactive bash before each prompt
	"BASH_XTRACEFD",  // redirects xtrace output to an inherited descriptor
	"IFS",            // word splitting of everything the shell runs
	"INPUTRC",        // readline start-up file
	"KSH_ENV",        // ksh/mksh start-up file
}

// shellStartupPrefixes are prefixes of such variables: exported bash
// functions (BASH_FUNC_name%%) replace commands by name.
var shellStartupPrefixes = []string{"BASH_FUNC_"}

// isShellStartupEnv reports whether name is in shellStartupEnv or starts
// with one of shellStartupPrefixes, ignoring case to fail closed on
// platforms that fold it.
func isShellStartupEnv(name string) bool {
	n := strings.ToUpper(name)
	if slices.Contains(shellStartupEnv, n) {
		return true
	}
	for _, p := range shellStartupPrefixes {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

// CheckEnv refuses an overlay that sets a name policy.DangerousEnv or a
// shell start-up variable flags, or a value with a NUL byte, with
// ErrDangerousEnv: what buildEnv checks, for an overlay that travels
// another way (the interpreter's plan).
func CheckEnv(overlay map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(overlay)) {
		if policy.DangerousEnv(name) || isShellStartupEnv(name) {
			return fmt.Errorf("env %q: %w: it could change what runs (hint: drop it from the request's env; set it on the host if it is really needed)", name, ErrDangerousEnv)
		}
		if strings.ContainsRune(overlay[name], 0) {
			return fmt.Errorf("env %q: %w: value contains a NUL byte (hint: drop it from the request's env)", name, ErrDangerousEnv)
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
