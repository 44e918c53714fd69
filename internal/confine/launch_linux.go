package confine

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"github.com/exechost/exechost/internal/reexec"
)

// The launcher: the binary re-executed as [exe, Arg, confinement JSON,
// program, args...]. It restricts its locked thread and execs the
// program, so the program's first instruction already runs confined. It
// starts every confined command, so it is early (reexec.RegisterEarly):
// this package imports only the standard library, x/sys, go-landlock and
// reexec, and runs before the binary's heavier package inits (dispatched
// from main instead, each start cost about 2 ms more CPU).
func init() { reexec.RegisterEarly(Arg, launcher) }

// launcher is the launcher's entry point (see reexec.Init).
func launcher() {
	args := reexec.Args(2, -1, "CONFINEMENT PROGRAM [ARG...]")
	os.Exit(Launch(args[0], args[1:]))
}

// Launch is the launcher's work: it applies confinement JSON to this
// thread and execs argv. It returns only on failure, with the status a
// shell would report. A warm process handed a launcher's argv (Wrap's)
// calls it as a fresh launcher's start does.
func Launch(confJSON string, argv []string) int {
	var c Confinement
	if err := json.Unmarshal([]byte(confJSON), &c); err != nil {
		fmt.Fprintf(os.Stderr, "exechost: confine: bad confinement: %v\n", err)
		return 126
	}
	runtime.LockOSThread() // never unlocked: this thread execs or the process exits
	warning, err := ApplyThread(&c, KernelABI())
	if err != nil {
		fmt.Fprintf(os.Stderr, "exechost: %v\n", err)
		return 126
	}
	if warning != "" {
		fmt.Fprintf(os.Stderr, "exechost: %s\n", warning)
	}
	path := argv[0]
	if c.Exec != "" {
		path = c.Exec // the inherited descriptor of the file decided on
	}
	err = syscall.Exec(path, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "exechost: confine: exec %s: %v%s\n", argv[0], err, denialHint(err))
	if errors.Is(err, syscall.ENOENT) {
		return 127
	}
	return 126
}

// denialHint makes a refusal Landlock may have caused actionable.
func denialHint(err error) string {
	if errors.Is(err, syscall.EACCES) {
		return " (hint: the run's confinement lets it execute nothing in the protected set; see `exechost approvals check`)"
	}
	return ""
}
