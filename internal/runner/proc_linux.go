package runner

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
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

// pipeSize is the buffer asked for on output pipes: bigger than the 64 KiB
// default, so a flood costs fewer reads and context switches (about 1.3x
// the throughput here), yet small enough that many concurrent runs stay far
// from the per-user pipe page limit (fs.pipe-user-pages-soft), past which
// the kernel shrinks every new pipe of the user.
const pipeSize = 256 << 10

// tunePipe enlarges the pipe behind r, best effort: the limit
// (/proc/sys/fs/pipe-max-size) may be lower, and the default still works.
// It goes through SyscallConn because File.Fd would switch the descriptor
// to blocking mode, and Close could then no longer interrupt a read.
func tunePipe(r *os.File) {
	if rc, err := r.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			unix.FcntlInt(fd, unix.F_SETPIPE_SZ, pipeSize)
		})
	}
}

// newTableFile returns an anonymous file for the reaper's table.
func newTableFile() (*os.File, error) {
	fd, err := unix.MemfdCreate("exechost-reaper", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "exechost-reaper"), nil
}

// AwaitExit waits until cmd's started process has exited. Here it leaves
// it a zombie (waitid with WNOWAIT): its pid, and so the id of the process
// group it leads, stays taken until the caller reaps it with cmd.Wait, and
// a kill of that group until then reaches no one else. reaped is true when
// it reaped the process after all (waitid failed), with cmd.Wait's error.
func AwaitExit(cmd *exec.Cmd) (reaped bool, err error) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err == nil {
			return false, nil
		}
		if err != unix.EINTR {
			break
		}
	}
	return true, cmd.Wait()
}
