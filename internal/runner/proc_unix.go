//go:build unix

package runner

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"

	"github.com/creack/pty"
)

// ptySupported says Spec.PTY works here.
const ptySupported = true

// ptySize is the terminal size a PTY run sees: the classic default, so
// programs that format for a terminal behave predictably.
var ptySize = pty.Winsize{Rows: 24, Cols: 80}

// shellArgv runs command text the way the spec says: /bin/sh -c TEXT.
func shellArgv(text string) []string { return []string{"/bin/sh", "-c", text} }

// prepareCommand adjusts cmd for the platform; nothing is needed on Unix.
func prepareCommand(*exec.Cmd, Spec) {}

// sysProcAttr puts the child in a process group of its own (a session of
// its own with the terminal as controlling tty in PTY mode), so one kill
// reaches everything it forks, and asks for the parent-death signal where
// the platform has one.
func sysProcAttr(withPTY bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{}
	if withPTY {
		// Setsid also makes the child a process group leader; Setpgid
		// would make setsid fail.
		a.Setsid, a.Setctty, a.Ctty = true, true, 0
	} else {
		a.Setpgid = true
	}
	setPdeathsig(a)
	return a
}

// procTree is a started command's process group, which its descendants
// share unless they leave it.
type procTree struct{ pgid int }

// newProcTree returns the tree led by p (its pid is the group id, see
// sysProcAttr).
func newProcTree(p *os.Process) procTree { return procTree{pgid: p.Pid} }

// kill sends SIGKILL to the whole process group. Processes that moved to a
// group or session of their own (setsid, daemons) are beyond its reach; see
// Result.Stragglers.
func (t procTree) kill() {
	_ = syscall.Kill(-t.pgid, syscall.SIGKILL) // ESRCH: the group is gone already
}

// release does nothing: a process group needs no handle.
func (procTree) release() {}

// exitStatus returns the exit code a shell would report for ps (128+N for
// death by signal N) and, for a signal, text naming it.
func exitStatus(ps *os.ProcessState) (int, string) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		return waitStatus(ws)
	}
	return ps.ExitCode(), ""
}

// waitStatus is exitStatus of a raw wait status.
func waitStatus(ws syscall.WaitStatus) (int, string) {
	if ws.Signaled() {
		sig := ws.Signal()
		return 128 + int(sig), fmt.Sprintf("killed by signal %d (%s)", int(sig), sig)
	}
	return ws.ExitStatus(), ""
}

// isExecFormat reports whether err says the file is not a program the
// kernel can run.
func isExecFormat(err error) bool { return errors.Is(err, syscall.ENOEXEC) }

// openPTY makes a pseudo-terminal the child's stdin, stdout and stderr and
// feeds what it prints to capture's stdout. Nobody types into it: a
// program reading its terminal waits until the timeout.
func (o *outputs) openPTY(cmd *exec.Cmd, capture *Capture) error {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return fmt.Errorf("open pty: %w", err)
	}
	if err := pty.Setsize(ptmx, &ptySize); err != nil {
		ptmx.Close()
		tty.Close()
		return fmt.Errorf("size pty: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	o.read, o.write, o.to = []*os.File{ptmx}, []*os.File{tty}, []io.Writer{capture.Stdout()}
	return nil
}
