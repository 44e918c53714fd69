package shellrun

import (
	"fmt"
	"os"

	"github.com/exechost/exechost/internal/confine"
)

// applyConfinement restricts this interpreter process, every thread of
// it, to the plan's confinement before it runs anything, so everything
// the tree starts inherits it (internal/confine). The plan's
// Confine.Base names the descriptor holding the host's kept base layer
// when the runner handed one (runner.BaseFD); it is checked, used and
// closed before anything runs (confine.Confinement.Base). Main calls it;
// Run, which tests call in their own process, does not.
func applyConfinement(p Plan) error {
	if p.Confine == nil {
		return nil
	}
	warning, err := confine.ApplyProcess(p.Confine, confine.KernelABI())
	if err != nil {
		return err
	}
	if warning != "" {
		fmt.Fprintf(os.Stderr, "exechost: %s\n", warning)
	}
	return nil
}
