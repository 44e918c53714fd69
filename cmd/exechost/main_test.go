package main

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/exechost/exechost/internal/cli"
	"github.com/exechost/exechost/internal/reexec"
)

// TestMain lets testscript run this test binary as `exechost`, so every
// script drives the real CLI in a real process; first, like main, it runs
// the re-exec entry point os.Args names (the interpreter and launcher the
// CLI's engines start are this test binary).
func TestMain(m *testing.M) {
	if reexec.Init() {
		return
	}
	testscript.Main(m, map[string]func(){
		"exechost": func() { os.Exit(cli.Main(os.Args[1:])) },
	})
}

// TestScripts runs the end-to-end CLI flows in testdata/script.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("OPENCLAW_STATE_DIR", env.WorkDir+"/state")
			env.Setenv("HOME", env.WorkDir+"/home")
			env.Setenv("PATH", os.Getenv("PATH"))
			return os.MkdirAll(env.WorkDir+"/home", 0o755)
		},
	})
}
