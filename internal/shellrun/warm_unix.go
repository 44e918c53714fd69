//go:build unix

package shellrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/shellcmd"
)

// MainWarm is what a warm interpreter process does (WarmArgv): past the
// runtime's and the packages' initialisation, it warms the code every run
// goes through (warmUp), then waits for its one hand-over
// (runner.AwaitHandOver), which gives it the run's working directory and
// environment and the argv a fresh start would have had (Argv's), and
// runs that plan exactly as Main does for a fresh start: confinement
// first, then the bounds, then the tree. One plan, then the process exits.
// A process let go without a hand-over exits 0 quietly. Handed the
// confining launcher's argv instead of a plan, it is the launcher: the
// start of a confined direct command without a start of this binary.
func MainWarm() int {
	warmUp()
	argv, err := runner.AwaitHandOver()
	if errors.Is(err, runner.ErrNoHandOver) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "exechost: interpreter: %v\n", err)
		return DeniedExit
	}
	// What a fresh start of this binary may be for a run, and nothing
	// else: the interpreter with a plan, or the confining launcher
	// (confine.Wrap's argv), which restricts this process's thread and
	// execs the command in place.
	switch {
	case len(argv) == 3 && argv[1] == arg && argv[2] != warmPlan:
		return Main(argv[2])
	case len(argv) >= 4 && argv[1] == confine.Arg:
		return confine.Launch(argv[2], argv[3:])
	}
	fmt.Fprintf(os.Stderr, "exechost: interpreter: a warm process was handed something other than a plan or a confined start\n")
	return DeniedExit
}

// warmUp runs, before any run is known, the first-use work of what every
// run does — decoding a plan (encoding/json's per-type caches), parsing
// and printing a text, building an interpreter and running builtins in
// it — then collects the garbage and returns the freed pages, so none of
// it is left for the run and an idle process holds little.
// It uses constant inputs only, starts nothing, opens nothing and keeps
// nothing: the run that follows shares no state with it but the caches a
// fresh process would build the same way.
func warmUp() {
	var p Plan
	_ = json.Unmarshal([]byte(`{"text":"true\n","sha256":"","enforce":true,"executables":["/bin/true"],"path":"/bin","home":"/","env":{"A":"1"},"envAllow":["A"],"files":{"/bin/true":{}},"confine":{"writable":["/"]}}`), &p)
	var h struct {
		Argv []string `json:"argv"`
	}
	_ = json.Unmarshal([]byte(`{"argv":["a"],"env":["A=1"],"dir":"/"}`), &h)
	const text = "true a | true b && : \"$X\"; false || true\n"
	f, canonical, err := shellcmd.Canonical(text)
	_ = shellcmd.Hash(canonical)
	if err == nil {
		// Builtins only: the exec and open handlers are not even set.
		if r, err := interp.New(interp.StdIO(nil, io.Discard, io.Discard), interp.Env(expand.ListEnviron()), interp.Dir("/")); err == nil {
			_ = r.Run(context.Background(), f)
		}
	}
	debug.FreeOSMemory() // a collection, and the freed pages back to the system: an idle one costs little
}
