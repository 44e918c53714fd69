//go:build unix

package shellrun

import (
	"errors"
	"fmt"
	"os"

	"github.com/exechost/exechost/internal/runner"
)

// MainWarm is what a warm interpreter process does (WarmArgv): past the
// runtime's and the packages' initialisation, it waits for its one
// hand-over (runner.AwaitHandOver), which gives it the run's working
// directory and environment and the argv a fresh start would have had
// (Argv's), and then runs that plan exactly as Main does for a fresh
// start: confinement first, then the bounds, then the tree. One plan, then
// the process exits. A process let go without a hand-over exits 0 quietly.
func MainWarm() int {
	argv, err := runner.AwaitHandOver()
	if errors.Is(err, runner.ErrNoHandOver) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "exechost: interpreter: %v\n", err)
		return DeniedExit
	}
	// Only a plan: a warm interpreter never becomes anything else.
	if len(argv) != 3 || argv[1] != arg || argv[2] == warmPlan {
		fmt.Fprintf(os.Stderr, "exechost: interpreter: a warm interpreter was handed something other than a plan\n")
		return DeniedExit
	}
	return Main(argv[2])
}
