package cli

import (
	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/node"
)

// nodeLimitFlags are `exechost node run`'s admission limits.
type nodeLimitFlags struct {
	maxRuns int
}

func (f *nodeLimitFlags) add(cmd *cobra.Command) {
	cmd.Flags().IntVar(&f.maxRuns, "max-runs", node.DefaultMaxRuns,
		"most commands this node runs at once; more are answered BUSY (0: the default)")
}

// check refuses a negative limit (0, as in the flags `exechost up` builds,
// is the default).
func (f nodeLimitFlags) check() error {
	if f.maxRuns < 0 {
		return usagef("--max-runs %d: must be a positive number (or 0 for the default %d)", f.maxRuns, node.DefaultMaxRuns)
	}
	return nil
}
