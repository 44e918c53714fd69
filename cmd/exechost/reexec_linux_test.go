package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/jail"
	"github.com/exechost/exechost/internal/reaper"
	"github.com/exechost/exechost/internal/reexec"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/sandbox/agent"
	"github.com/exechost/exechost/internal/shellcmd"
	"github.com/exechost/exechost/internal/shellrun"
)

// entryPoints runs each re-exec entry point of the binary in this test
// binary (whose TestMain calls reexec.Init first, as main does) and checks
// it did that entry point's job. The flag spellings are the ones in
// spawned argv and in the docs; they must not change.
var entryPoints = map[string]func(t *testing.T, self string){
	"--exechost-reaper=v2":         reaperRuns,
	"--exechost-interp=v1":         interpreterRuns,
	"--exechost-confine=v1":        launcherRuns,
	"--exechost-sandbox-helper=v1": helperRuns,
	"--exechost-sandbox-agent=v1":  agentRuns,
	"--exechost-agent-install=v1":  installRuns,
	"--exechost-jail=v1":           jailRuns,
}

// jailRuns: the jail server builds its jail and runs a command in it.
func jailRuns(t *testing.T, self string) {
	p, err := jail.NewPool(jail.WithExecutable(self))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	j, release, err := p.Get(jail.Options{Confine: confine.Confinement{Writable: []string{t.TempDir()}, Network: confine.NetworkNone}})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	res, err := runner.Run(context.Background(), runner.Spec{Argv: []string{"/bin/echo", "jailed"}, Jail: j, Timeout: time.Minute})
	if err != nil || res.Stdout != "jailed\n" || len(res.Layers) == 0 {
		t.Fatalf("run in the jail: %+v, %v", res, err)
	}
}

// TestEntryPoints: every registered entry point has a row above, every row
// is registered, and each is dispatched by a real re-exec of this binary.
func TestEntryPoints(t *testing.T) {
	want := make([]string, 0, len(entryPoints))
	for name := range entryPoints {
		want = append(want, name)
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, reexec.Names()); diff != "" {
		t.Fatalf("registered entry points differ from the tested ones (-tested +registered):\n%s(hint: add a row to entryPoints for a new one)", diff)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range reexec.Names() {
		t.Run(strings.TrimPrefix(name, reexec.Prefix), func(t *testing.T) { entryPoints[name](t, self) })
	}
}

// command is self re-executed with args, bounded by a deadline.
func command(t *testing.T, self string, args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return exec.CommandContext(ctx, self, args...)
}

// reaperRuns: the reaper, its parent gone (stdin at end of file), kills
// the process group its table lists.
func reaperRuns(t *testing.T, self string) {
	victim := exec.Command("sleep", "600")
	victim.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = victim.Process.Kill() })
	table := make([]byte, 8)
	binary.NativeEndian.PutUint32(table, reaper.Marker)
	binary.NativeEndian.PutUint32(table[4:], uint32(victim.Process.Pid))
	path := filepath.Join(t.TempDir(), "table")
	if err := os.WriteFile(path, table, 0o600); err != nil {
		t.Fatal(err)
	}
	tf, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	cmd := command(t, self, reaper.Arg)
	cmd.ExtraFiles = []*os.File{tf} // descriptor 3: reaper.TableFD
	if out, err := cmd.CombinedOutput(); err != nil || len(out) != 0 {
		t.Fatalf("reaper: %v, output %q; want a silent exit 0", err, out)
	}
	err = victim.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the listed group's process ended with %v, want SIGKILL from the reaper", err)
	}
}

// interpreterRuns: the interpreter runs an analysed plan.
func interpreterRuns(t *testing.T, self string) {
	const path = "/usr/bin:/bin"
	a := shellcmd.Analyze("echo interpreted", shellcmd.Env{Cwd: "/", PATH: path, Home: "/"})
	if !a.OK {
		t.Fatalf("analysis: %s", a.Error)
	}
	argv, err := shellrun.Argv(shellrun.Plan{Text: a.Canonical, Hash: a.Hash, Enforce: true, PATH: path, Home: "/"})
	if err != nil {
		t.Fatal(err)
	}
	if argv[0] != self {
		t.Fatalf("the interpreter's argv starts %q, want this binary %q", argv[0], self)
	}
	expectOutput(t, command(t, self, argv[1:]...), "interpreted\n")
}

// launcherRuns: the confining launcher execs the program.
func launcherRuns(t *testing.T, self string) {
	argv, err := confine.Wrap(&confine.Confinement{}, []string{"/bin/echo", "launched"})
	if err != nil {
		t.Fatal(err)
	}
	expectOutput(t, command(t, self, argv[1:]...), "launched\n")
}

// helperRuns: the bwrap helper (here outside bwrap) reports ready on its
// status descriptor and execs the command.
func helperRuns(t *testing.T, self string) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := command(t, self, "--exechost-sandbox-helper=v1", `{"landlock":"off","statusFd":3,"argv":["/bin/echo","helped"]}`)
	cmd.ExtraFiles = []*os.File{w}
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stdout
	err = cmd.Run()
	w.Close()
	status := make([]byte, 16)
	n, _ := r.Read(status)
	if err != nil || stdout.String() != "helped\n" || string(status[:n]) != "ok\n" {
		t.Fatalf("helper: %v, output %q, status %q; want exit 0, \"helped\", \"ok\"", err, stdout.String(), status[:n])
	}
}

// agentRuns: the sandbox agent answers the handshake and runs a command.
func agentRuns(t *testing.T, self string) {
	cmd := command(t, self, agent.Flag)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := agent.Start(ctx, stdout, stdin, func() { stdin.Close() })
	if err != nil {
		t.Fatalf("agent handshake: %v (stderr: %s)", err, stderr.String())
	}
	defer c.Close()
	res, err := c.Exec(ctx, agent.Request{Argv: []string{"/bin/echo", "served"}})
	if err != nil || res.ExitCode != 0 || res.Stdout != "served\n" {
		t.Fatalf("agent exec: %v, %+v; want \"served\"", err, res)
	}
}

// installRuns: the install entry point copies this binary to the path.
func installRuns(t *testing.T, self string) {
	dst := filepath.Join(t.TempDir(), "agent")
	expectOutput(t, command(t, self, agent.InstallFlag, dst), "")
	want, err := os.Stat(self)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.Stat(dst)
	if err != nil || got.Size() != want.Size() || got.Mode().Perm() != 0o555 {
		t.Fatalf("installed copy: %v, %v; want %d bytes, mode 0555", got, err, want.Size())
	}
}

// expectOutput runs cmd and wants exit 0 and exactly out (stdout and
// stderr together).
func expectOutput(t *testing.T, cmd *exec.Cmd, out string) {
	t.Helper()
	got, err := cmd.CombinedOutput()
	if err != nil || string(got) != out {
		t.Fatalf("%s: %v, output %q; want exit 0 and %q", strings.Join(cmd.Args[:2], " "), err, got, out)
	}
}
