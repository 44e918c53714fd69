package shellcmd_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/reexec"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/shellcmd"
	"github.com/exechost/exechost/internal/shellrun"
	"github.com/exechost/exechost/internal/testdep"
	"github.com/exechost/exechost/internal/testproc"
)

// TestInterpreterMatchesDash runs 700 generated allowlist-able commands
// (chains, pipelines, cd d &&, here-documents, if/for/case, groups,
// redirections to /dev/null, applied wrappers, sh -c payloads, builtins)
// both through the interpreter that executes analysed commands and through
// dash, with the same stand-in programs, directory and environment, and
// requires the same stdout, stderr and exit status. Deliberate differences
// are listed in docs/policy.md and not generated.
func TestInterpreterMatchesDash(t *testing.T) {
	dash := testdep.Binary(t, "dash")
	// The real binary, as the execution host starts it (and not this test
	// binary, which under -race starts far slower).
	self := exechostBinary(t)
	root := t.TempDir()
	stubs, work := filepath.Join(root, "stubs"), filepath.Join(root, "work")
	for _, d := range []string{stubs, filepath.Join(work, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"out", "err", "fail", "up", "showenv"} {
		writeStub(t, stubs, n)
	}
	for _, f := range []string{"here.txt", "there.txt", "sub/inner.txt"} {
		if err := os.WriteFile(filepath.Join(work, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Stand-ins first; the real env, nice, timeout and nohup follow for
	// dash, which starts those programs where the interpreter applies them.
	path := stubs + ":/usr/bin:/bin"
	env := []string{"PATH=" + path, "HOME=" + work, "LC_ALL=C"}
	aenv := shellcmd.Env{Cwd: work, PATH: path, Home: work}

	compared := 0
	for _, text := range shellcmd.GeneratedCommands(2, 700) {
		a := shellcmd.Analyze(text, aenv)
		if !a.OK {
			continue
		}
		argv, err := shellrun.Argv(shellrun.Plan{Text: a.Canonical, Hash: a.Hash, Enforce: true, Executables: a.Executables(), Files: runner.IDsOf(a.Executables()), EnvAllow: a.Env, PATH: path, Home: work})
		if err != nil {
			t.Fatal(err)
		}
		argv[0] = self
		gotOut, gotErr, gotCode := runFor(t, work, env, argv)
		wantOut, wantErr, wantCode := runFor(t, work, env, []string{dash, "-c", text})
		if gotOut != wantOut || gotErr != wantErr || gotCode != wantCode {
			t.Errorf("%q:\ninterpreter: exit %d stdout %q stderr %q\ndash:        exit %d stdout %q stderr %q",
				text, gotCode, gotOut, gotErr, wantCode, wantOut, wantErr)
		}
		compared++
	}
	t.Logf("%d generated commands compared", compared)
	if compared < 500 {
		t.Errorf("only %d generated commands were analysable; want at least 500", compared)
	}
}

func runFor(t *testing.T, dir string, env, argv []string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%q timed out", argv)
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%q: %v", argv, err)
	}
	return o.String(), e.String(), code
}

var built struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

func TestMain(m *testing.M) {
	if reexec.Init() {
		return
	}
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// exechostBinary builds ./cmd/exechost once for this package's tests.
func exechostBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "shellcmd-exechost-")
		if built.err == nil {
			built.bin, built.err = testproc.Build(built.dir, false)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}
