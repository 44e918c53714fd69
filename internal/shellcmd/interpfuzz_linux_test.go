//go:build linux

package shellcmd_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/shellcmd"
	"github.com/exechost/exechost/internal/shellrun"
)

// FuzzInterpreterRunsOnlyAnalysed runs every fuzzed text that the analysis
// accepts through the interpreter that executes analysed commands — as the
// unprivileged user nobody, with a per-user process limit, a CPU limit and
// a PATH of logging stand-ins — and fails when a program starts that the
// analysis did not report as a segment. It needs root (to drop to nobody)
// and skips otherwise: a text the analysis misreads could hide anything, so
// it never runs with privileges.
func FuzzInterpreterRunsOnlyAnalysed(f *testing.F) {
	if os.Geteuid() != 0 {
		f.Skip("needs root to run the interpreter as nobody")
	}
	for _, s := range append(append([]string{}, shellcmd.DifferentialCorpus...), shellcmd.AttackCorpus...) {
		f.Add(s)
	}
	root, err := os.MkdirTemp("", "shellcmd-interp-")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o777); err != nil {
		f.Fatal(err)
	}
	// The interpreter is this test binary; nobody must be able to run it.
	self, err := os.Executable()
	if err != nil {
		f.Fatal(err)
	}
	interp := filepath.Join(root, "interp")
	if err := copyExe(self, interp); err != nil {
		f.Fatal(err)
	}
	logBin := filepath.Join(root, "bin")
	work := filepath.Join(root, "work")
	for _, d := range []string{logBin, work, filepath.Join(work, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	tools := []string{"ls", "id", "rm", "cat", "grep", "sort", "uniq", "env", "nice", "timeout", "time", "nohup", "xargs", "sh", "bash", "date", "make", "git", "jobs"}
	for _, n := range tools {
		script := "#!/bin/sh\necho " + n + " >> \"$DIFF_LOG\"\n"
		if err := os.WriteFile(filepath.Join(logBin, n), []byte(script), 0o755); err != nil {
			f.Fatal(err)
		}
	}
	env := shellcmd.Env{Cwd: work, PATH: logBin, Home: work}
	f.Fuzz(func(t *testing.T, text string) {
		a := shellcmd.Analyze(text, env)
		if !a.OK {
			return
		}
		known := map[string]bool{}
		for _, s := range a.Segments {
			known[path.Base(s.ResolvedPath)] = true
		}
		argv, err := shellrun.Argv(shellrun.Plan{Text: a.Canonical, Hash: a.Hash, Enforce: true, Executables: a.Executables(), Files: runner.IDsOf(a.Executables()), EnvAllow: a.Env, PATH: logBin, Home: work})
		if err != nil {
			return // too large for one argument: refused before anything runs
		}
		argv[0] = interp
		for _, ran := range runLogged(t, root, work, logBin, argv) {
			if !known[ran] {
				t.Fatalf("the interpreter ran %q for %q, but the analysis reported only %+v", ran, text, a.Segments)
			}
		}
	})
}

func copyExe(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// runLogged runs argv as nobody, within limits, and returns the names the
// logging stand-ins recorded.
func runLogged(t *testing.T, root, work, logBin string, argv []string) []string {
	logFile, err := os.CreateTemp(root, "log-")
	if err != nil {
		t.Fatal(err)
	}
	logFile.Close()
	defer os.Remove(logFile.Name())
	if err := os.Chmod(logFile.Name(), 0o666); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The outer shell only sets limits, then execs the interpreter.
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", `ulimit -u 64 -t 5 -f 1024 2>/dev/null; exec "$@"`, "sh"}, argv...)...)
	cmd.Dir = work
	cmd.Env = []string{"PATH=" + logBin, "HOME=" + work, "DIFF_LOG=" + logFile.Name()}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	_ = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	b, _ := os.ReadFile(logFile.Name())
	return strings.Fields(string(b))
}
