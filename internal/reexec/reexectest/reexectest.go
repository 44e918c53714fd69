// Package reexectest is the TestMain of a test binary whose code under
// test re-executes the running binary (os.Executable is the test binary
// there): as the reaper, the interpreter, the confining launcher, the
// bwrap helper or the sandbox agent. It is a package of its own so that
// package reexec, linked into every start of exechost, never imports
// testing.
package reexectest

import (
	"os"
	"testing"

	"github.com/exechost/exechost/internal/reexec"
)

// Main runs the re-exec entry point os.Args names, if any, and otherwise
// the tests. Call it as the whole TestMain, or first in one:
//
//	func TestMain(m *testing.M) { reexectest.Main(m) }
func Main(m *testing.M) {
	if reexec.Init() {
		return
	}
	os.Exit(m.Run())
}
