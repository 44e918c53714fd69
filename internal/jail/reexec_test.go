package jail

import (
	"testing"

	"github.com/exechost/exechost/internal/reexec/reexectest"
)

// TestMain lets this test binary be the jail server (os.Executable is the
// test binary here).
func TestMain(m *testing.M) { reexectest.Main(m) }
