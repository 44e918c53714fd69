package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestScripts runs the CLI flows in testdata/script against the built
// binary: usage errors, hints and config errors as users see them.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", filepath.Dir(bin)+string(os.PathListSeparator)+env.Getenv("PATH"))
			env.Setenv("OPENCLAW_STATE_DIR", filepath.Join(env.WorkDir, "state"))
			env.Setenv("EXECHOST_GATEWAY_TOKEN", "")
			return nil
		},
	})
}
