//go:build linux

package shellcmd

import (
	"context"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// FuzzDifferential runs every fuzzed text that the analysis accepts under
// the real /bin/sh, as the unprivileged user nobody, with a per-user
// process limit, a CPU limit and a PATH of logging stand-ins, and fails when
// the shell starts a program the analysis did not report. It needs root (to
// drop to nobody) and skips otherwise: a text that the parser misreads
// could hide anything, so it never runs with privileges.
func FuzzDifferential(f *testing.F) {
	if os.Geteuid() != 0 {
		f.Skip("needs root to run shells as nobody")
	}
	for _, s := range differentialCorpus {
		f.Add(s)
	}
	root, err := os.MkdirTemp("", "shellcmd-diff-")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o777); err != nil {
		f.Fatal(err)
	}
	logBin := filepath.Join(root, "bin")
	work := filepath.Join(root, "work")
	for _, d := range []string{logBin, work, filepath.Join(work, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	tools := []string{"ls", "id", "rm", "cat", "grep", "sort", "uniq", "env", "nice", "timeout", "xargs", "sh", "date", "make", "git"}
	for _, n := range tools {
		script := "#!/bin/sh\necho " + n + " >> \"$DIFF_LOG\"\n"
		if err := os.WriteFile(filepath.Join(logBin, n), []byte(script), 0o755); err != nil {
			f.Fatal(err)
		}
	}
	env := Env{Cwd: work, PATH: logBin, Home: work}
	shells := []string{"/bin/sh"}
	if bash, err := exec.LookPath("bash"); err == nil {
		shells = append(shells, bash+" --posix", bash)
	}
	f.Fuzz(func(t *testing.T, text string) {
		a := Analyze(text, env)
		if !a.OK {
			return
		}
		known := map[string]bool{}
		for _, s := range a.Segments {
			known[path.Base(s.ResolvedPath)] = true
			known[path.Base(s.Name)] = true
			for _, v := range s.Via {
				known[path.Base(v)] = true
			}
		}
		for _, sh := range shells {
			for _, ran := range runLogged(t, root, work, logBin, sh, text) {
				// Wrappers and shells are looked through, never segments; with
				// nothing to run ("nice", sh -c "") they run alone, harmlessly.
				if k := classify(ran); !known[ran] && k != kindWrapper && k != kindPOSIXShell {
					t.Fatalf("%s ran %q for %q, but the analysis reported only %+v", sh, ran, text, a.Segments)
				}
			}
		}
	})
}

// runLogged runs text under shell (a path plus options) as nobody, within
// limits, and returns the names the logging stand-ins recorded.
func runLogged(t *testing.T, root, work, logBin, shell, text string) []string {
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
	// The outer shell only sets limits, then execs the shell under test.
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", `ulimit -u 64 -t 5 -f 1024 2>/dev/null; exec `+shell+` -c "$1"`, "sh", text)
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
