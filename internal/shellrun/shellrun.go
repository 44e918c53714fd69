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
//     handler, including those `command` runs; opens are limited to
//     /dev/null (here-documents and descriptor duplications never open
//     anything), or, for a plan the contained rules allowed
//     (Plan.Contained), to reads and to writes beneath the confinement's
//     writable roots (openContained).
//   - Every program start's whole environment passes the environment rule
//     (Plan.EnvAllow); a refused one is not started.
//   - The interpreter's own temporary files (process substitution's named
//     pipes) go to a private 0700 directory each runner creates and
//     removes; TMPDIR is never taken from the command.
//   - A refusal anywhere, $(…) included, ends the whole run with
//     DeniedExit; wrappers are applied everywhere (around a nested shell
//     too) or refused, never dropped.
//   - The interpreter process has memory, goroutine and child bounds
//     (DefaultMemoryBound, DefaultGoroutineBound, MaxChildren) and ends the
//     run with BoundExit and a message naming the bound it hit.
//
// A daemon's host engine usually hands the plan to a warm interpreter
// (WarmArgv, MainWarm): this binary started ahead of need and waiting for
// its one run, which it receives with the run's environment and working
// directory (runner.Spec.Warm) and then runs exactly as Main does.
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
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/runner"
)

// arg makes the exechost binary (or a test binary linking this package) run
// as the interpreter instead of its normal main.
const arg = "--exechost-interp=v1"

// warmPlan, in place of the plan, starts a warm interpreter (WarmArgv),
// which receives its plan when the host hands it a run (MainWarm). A plan
// is a JSON object, never this word.
const warmPlan = "warm"

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
	// Env is what the request adds to the host's environment. It travels
	// in the plan, not in the interpreter's own environment, so nothing a
	// request sets (GODEBUG, LD_PRELOAD, TMPDIR) reaches the interpreter
	// process itself; it is checked like any other variable at each start.
	Env map[string]string `json:"env,omitempty"`
	// EnvAllow names the variables (NAME, or PREFIX* for a prefix) that
	// the policy lets a command give a program beyond policy.SafeEnv.
	// When Enforce is set, every program start is refused unless each
	// variable of its environment is the host's own (unchanged) or a name
	// this or policy.SafeEnv permits and policy.RefusedEnv does not refuse.
	EnvAllow []string `json:"envAllow,omitempty"`
	// Files are the file ids of Executables recorded when the host decided:
	// each program starts only if the file at its path is still that file,
	// and starts by its descriptor (runner.Pin), so a file swapped in at
	// an allowed path after the decision never runs. Where the platform has
	// file ids (runner.FileIDsSupported), an enforced plan starts no
	// program it has no id for: a missing or empty map refuses every start
	// (fail closed); build it with runner.IDsOf.
	Files map[string]runner.FileID `json:"files"`
	// ArgRules are the allowlist's argument rules (policy.ArgRule). When
	// Enforce is set, every start is held against them on its expanded
	// argv: a deny rule that matches refuses it, and a program in ArgOnly
	// (one only an argument rule allowed) starts only when an allow rule
	// matches its arguments.
	ArgRules []policy.ArgRule `json:"argRules,omitempty"`
	ArgOnly  []string         `json:"argOnly,omitempty"`
	// MemoryBound and GoroutineBound override DefaultMemoryBound and
	// DefaultGoroutineBound when positive (tests use small ones).
	MemoryBound    int64 `json:"memoryBound,omitempty"`
	GoroutineBound int   `json:"goroutineBound,omitempty"`
	// Confine is the run's confinement, applied to this whole process
	// before it runs anything (confine.go); nil confines nothing.
	Confine *confine.Confinement `json:"confine,omitempty"`
	// Contained is set when the analysis accepted the text under the
	// contained rules (shellcmd.Contained): with Enforce, redirections may
	// read files and write files beneath its writable roots, outside its
	// read-only paths, checked on the real path when the file is opened.
	// Nil: only /dev/null opens. It is set whether the interpreter
	// confines itself (Confine) or starts inside the standing jail.
	Contained *Walls `json:"contained,omitempty"`
}

// Walls are the run's writable roots and the paths inside them that stay
// read-only or out of reach (the persistence paths, hidden and protected
// sets), absolute, as the run's confinement names them.
type Walls struct {
	Writable []string `json:"writable"`
	ReadOnly []string `json:"readOnly,omitempty"`
}

// The interpreter's own bounds: a text with no program in it still costs
// the interpreter memory and goroutines (a variable doubled in a loop,
// background subshells), and the allowlist says nothing about those.
const (
	// DefaultMemoryBound is the live heap at which the interpreter stops
	// the run (checked after every garbage collection, which the Go
	// runtime makes more frequent as the bound nears).
	DefaultMemoryBound = 512 << 20
	// DefaultGoroutineBound bounds background jobs, subshells and
	// pipelines alive at once.
	DefaultGoroutineBound = 10000
	// MaxChildren bounds the programs the interpreter runs at once.
	MaxChildren = 256
	// BoundExit is the exit status of a run stopped by a bound.
	BoundExit = 125
)

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

// WarmArgv returns the argv of a warm interpreter: this binary, waiting
// for the run it is handed (runner.Spec.Warm with an Argv from Argv).
func WarmArgv() ([]string, error) {
	if !Supported || !runner.WarmSupported() {
		return nil, errors.New("warm interpreters are not available on this platform")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this executable for the interpreter: %w", err)
	}
	return []string{exe, arg, warmPlan}, nil
}
