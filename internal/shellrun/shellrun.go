// Package shellrun runs an analysed command tree: what was analysed is what
// runs. The execution host never hands command text that it vouched for to
// /bin/sh, whose parser may read the same bytes differently (here-document
// terminators, builtins such as bash's `jobs -x`, multibyte locales). Instead
// the runner starts this package's interpreter (mvdan.cc/sh/v3/interp) as a
// child process of the same binary, in the command's own process group, and
// gives it a Plan: the canonical text that the analysis parsed, its sha256,
// and the executables the analysis allowed.
//
// The interpreter parses the canonical text with shellcmd.Parse — the
// analysis parsed exactly those bytes with exactly that function — checks
// the hash, and runs the tree with every effect behind a handler:
//
//   - Every external command goes through one exec handler that resolves it
//     as the analysis did (shellcmd.Resolve) and, when the plan enforces,
//     refuses (exit 126, SYSTEM_RUN_DENIED naming the path, the run stops)
//     anything that is not one of the plan's executables.
//   - Wrappers the runner applies (env, nice, nohup, timeout, time) are
//     applied here; their programs never run. `sh -c` / `bash -c` payloads
//     are parsed by the same parser and run by a nested interpreter; no
//     shell process starts.
//   - Builtins outside shellcmd's vouched list are refused by the call
//     handler; opens are limited to /dev/null (here-documents and descriptor
//     duplications never open anything).
//
// Running in a child process keeps everything the runner guarantees for a
// shell: the process group that a timeout kills, the reaper, the
// parent-death signal, the PTY, the output caps; and a script that loops or
// grows a variable without bound costs the child, never the daemon.
package shellrun

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/exechost/exechost/internal/confine"
)

// arg makes the exechost binary (or a test binary linking this package) run
// as the interpreter instead of its normal main.
const arg = "--exechost-interp=v1"

// maxPlan bounds the plan passed on the command line: Linux refuses a
// single argument over 128 KiB (MAX_ARG_STRLEN).
const maxPlan = 120 << 10

// ErrDenied is what run-time enforcement reports when the interpreter was
// asked to start something the analysis did not allow.
var ErrDenied = errors.New("SYSTEM_RUN_DENIED")

// DeniedExit is the exit status of a run stopped by run-time enforcement,
// as a shell reports a command it found but cannot execute.
const DeniedExit = 126

// Plan is what the interpreter runs.
type Plan struct {
	// Text is the canonical command text (shellcmd.Canonical).
	Text string `json:"text"`
	// Hash is the sha256 of Text; the interpreter refuses a mismatch.
	Hash string `json:"sha256"`
	// Enforce limits what runs to Executables, the vouched builtins and
	// /dev/null opens. It is false only for a tree a human approved though
	// the analysis could not vouch for it.
	Enforce bool `json:"enforce"`
	// Executables are the resolved paths the interpreter may start.
	Executables []string `json:"executables,omitempty"`
	// PATH and Home are the host's, for resolving names as the analysis
	// did; the request never supplies them.
	PATH string `json:"path"`
	Home string `json:"home"`
	// Confine is the run's confinement, applied to this whole process
	// before it runs anything (confine.go); nil confines nothing.
	Confine *confine.Confinement `json:"confine,omitempty"`
}

// Argv returns the argv that runs plan: this binary in interpreter mode.
func Argv(plan Plan) ([]string, error) {
	if !Supported {
		return nil, errors.New("the command interpreter is not available on this platform")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this executable for the interpreter: %w", err)
	}
	b, err := json.Marshal(plan)
	if err != nil {
		return nil, err
	}
	if len(b) > maxPlan {
		return nil, fmt.Errorf("command too large for the interpreter (%d bytes, at most %d)", len(b), maxPlan)
	}
	return []string{exe, arg, string(b)}, nil
}
