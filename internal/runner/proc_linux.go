package runner

import (
	"os"
	"runtime"
	"syscall"
)

// setPdeathsig has the kernel SIGKILL the child when the thread that
// started it dies, so a crashed or killed runner does not leave the command
// running. It covers the direct child only: the kernel clears the setting
// in the child's own children, which the process-group kill handles while
// the runner lives.
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// lockThread pins the calling goroutine to its thread until the returned
// function runs. The parent-death signal belongs to the forking thread, not
// the process, and the Go runtime terminates a thread whose locked
// goroutine exits; pinning from Start until Wait returns means no other
// goroutine can lock this thread and take it down with the child still
// running.
func lockThread() func() {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}

// tunePipe is a hook for sizing an output pipe; the default 64 KiB buffer
// already moves a flood at several hundred MB/s, so it does nothing.
func tunePipe(*os.File) {}
