//go:build !linux

package confine

import (
	"fmt"
	"os"
)

// Supported is false: Landlock is Linux's, so Wrap is not used here.
const Supported = false

// KernelABI is 0 here: Landlock is Linux's.
func KernelABI() int { return 0 }

// ApplyProcess enforces nothing here (there is no Landlock): it refuses an
// active Confinement that says deny and warns for one that says warn, as
// Check says.
func ApplyProcess(c *Confinement, abi int) (string, error) {
	if !c.Active() {
		return "", nil
	}
	return c.Check(0)
}

// Launch refuses: there is no launcher where there is no Landlock.
func Launch(string, []string) int {
	fmt.Fprintln(os.Stderr, "exechost: confine: no launcher on this platform")
	return 126
}

// hostShielded is false here: there is no in-thread start without Landlock.
func hostShielded() (bool, string) { return false, "no Landlock on this platform" }

// ApplyThread enforces nothing here, as ApplyProcess.
func ApplyThread(c *Confinement, abi int) (string, error) { return ApplyProcess(c, abi) }

// Builder builds nothing here: there is no Landlock.
type Builder struct {
	// Afresh is Linux's Builder.Afresh; nothing is reused here.
	Afresh bool
}

// ApplyProcess is the package's ApplyProcess.
func (*Builder) ApplyProcess(c *Confinement, abi int) (string, error) { return ApplyProcess(c, abi) }

// ApplyThread is the package's ApplyThread.
func (*Builder) ApplyThread(c *Confinement, abi int) (string, error) { return ApplyThread(c, abi) }

// ApplyForkingThread is the package's ApplyThread (there is no in-thread
// start here).
func (*Builder) ApplyForkingThread(c *Confinement, abi int) (string, error) {
	return ApplyThread(c, abi)
}

// Close releases nothing.
func (*Builder) Close() error { return nil }

// Base hands no base layer here: there is no Landlock.
func (*Builder) Base(*Confinement, int) (*BaseLayer, error) { return nil, nil }

// baseKey is empty here: there are no base layers.
func (*Confinement) baseKey(int) string { return "" }
