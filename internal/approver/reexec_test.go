package approver

import (
	"testing"

	"github.com/exechost/exechost/internal/reexec/reexectest"
)

// TestMain lets this test binary play the roles the code under test starts
// it in (os.Executable is the test binary here): the exec host's engines
// re-execute it as the interpreter and the confining launcher.
func TestMain(m *testing.M) { reexectest.Main(m) }
