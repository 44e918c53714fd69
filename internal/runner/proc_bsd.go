//go:build unix && !linux

package runner

import (
	"os"
	"os/exec"
	"syscall"
)

// setPdeathsig does nothing: only Linux has a parent-death signal. If the
// runner dies, a running command lives on until it exits by itself.
func setPdeathsig(*syscall.SysProcAttr) {}

// lockThread does nothing where there is no per-thread parent-death signal.
func lockThread() func() { return func() {} }

// tunePipe does nothing; see the Linux version.
func tunePipe(*os.File) {}

// newTableFile returns an unlinked temporary file for the reaper's table
// (no memfd here).
func newTableFile() (*os.File, error) {
	f, err := os.CreateTemp("", "exechost-reaper-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// AwaitExit waits until cmd's started process has exited, and reaps it:
// there is no waiting without reaping here (waitid's WNOWAIT) in the
// system-call package, so the id of the group it led may be reused from
// then on, and callers send that group no kill after it returns.
func AwaitExit(cmd *exec.Cmd) (reaped bool, err error) { return true, cmd.Wait() }
