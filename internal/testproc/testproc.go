// Package testproc runs real exechost processes for tests and benchmarks:
// it builds the binary once, starts processes with their output captured
// for the test to read, and stops them with SIGTERM then SIGKILL so nothing
// outlives a test. End-to-end tests, the fault suite, the MCP tests and the
// benchmark harness all start gateways and nodes the same way through it.
package testproc

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Buffer is a bytes.Buffer safe for a process writing while a test reads.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Build compiles ./cmd/exechost into dir (with the race detector when race
// is set, so the processes under test report races too) and returns the
// binary's path.
func Build(dir string, race bool, extra ...string) (string, error) {
	bin := filepath.Join(dir, "exechost")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	args = append(append(args, extra...), "github.com/exechost/exechost/cmd/exechost")
	cmd := exec.Command("go", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build exechost: %w\n%s", err, out.String())
	}
	return bin, nil
}

// Proc is one background process with its combined output captured.
type Proc struct {
	// Cmd is the running command.
	Cmd *exec.Cmd
	// Out collects stdout and stderr.
	Out  *Buffer
	done chan struct{}
	err  error
}

// Start runs argv in the background. The child gets this environment
// without EXECHOST_GATEWAY_TOKEN (so a developer's own token never leaks
// into a test) plus env.
func Start(argv []string, env ...string) (*Proc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), "EXECHOST_GATEWAY_TOKEN="), env...)
	return StartCmd(cmd)
}

// StartCmd starts a prepared command (its own Env, Dir, SysProcAttr) with
// its output captured.
func StartCmd(cmd *exec.Cmd) (*Proc, error) {
	p := &Proc{Cmd: cmd, Out: &Buffer{}, done: make(chan struct{})}
	p.Cmd.Stdout, p.Cmd.Stderr = p.Out, p.Out
	if err := p.Cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %v: %w", cmd.Args, err)
	}
	go func() { p.err = p.Cmd.Wait(); close(p.done) }()
	return p, nil
}

// Done is closed when the process has exited and been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the process's exit error; valid once Done is closed.
func (p *Proc) Err() error { return p.err }

// Signal sends sig to the process (ignoring a process already gone).
func (p *Proc) Signal(sig syscall.Signal) { _ = p.Cmd.Process.Signal(sig) }

// Kill SIGKILLs the process and waits for it.
func (p *Proc) Kill() {
	p.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop ends the process: SIGTERM, then SIGKILL after grace, and waits.
func (p *Proc) Stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	p.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
	}
}

// Wait waits up to limit for the process to exit on its own and reports
// whether it did.
func (p *Proc) Wait(limit time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(limit):
		return false
	}
}
