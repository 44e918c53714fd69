package runner

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/windows"
)

// ptySupported says Spec.PTY works here: not on Windows (no ConPTY support
// yet).
const ptySupported = false

// shellArgv runs command text with cmd.exe, the shell every Windows host
// has; prepareCommand passes the text to it verbatim.
func shellArgv(text string) []string {
	comspec := os.Getenv("ComSpec")
	if comspec == "" {
		comspec = filepath.Join(os.Getenv("SystemRoot"), "System32", "cmd.exe")
	}
	return []string{comspec, "/d", "/s", "/c", text}
}

// prepareCommand hands shell text to cmd.exe unescaped: os/exec would quote
// it for the C runtime's rules, which cmd.exe does not follow. With /s,
// cmd.exe strips exactly the outer quotes added here.
func prepareCommand(cmd *exec.Cmd, spec Spec) {
	if len(spec.Argv) == 0 {
		cmd.SysProcAttr.CmdLine = fmt.Sprintf(`%s /d /s /c "%s"`, syscall.EscapeArg(cmd.Path), spec.Command)
	}
}

// sysProcAttr starts the child in a new process group, so console control
// events aimed at the runner do not reach it.
func sysProcAttr(bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}

// procTree is a started command and, when the job object could be set up,
// the job holding it and every process it starts from then on.
type procTree struct {
	p   *os.Process
	job windows.Handle // 0: no job, kill reaches the command only
}

// newProcTree puts p in a new job object, best effort: processes p started
// before joining stay outside it, and without a job kill falls back to
// terminating p alone.
func newProcTree(p *os.Process) procTree {
	t := procTree{p: p}
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return t
	}
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(p.Pid))
	if err != nil {
		windows.CloseHandle(job)
		return t
	}
	defer windows.CloseHandle(h)
	if err := windows.AssignProcessToJobObject(job, h); err != nil {
		windows.CloseHandle(job)
		return t
	}
	t.job = job
	return t
}

// kill terminates every process in the job, or the command alone without
// one.
func (t procTree) kill() {
	if t.job != 0 && windows.TerminateJobObject(t.job, 1) == nil {
		return
	}
	_ = t.p.Kill() // fails harmlessly once the command was waited for
}

// release closes the job handle; processes left in the job keep running,
// as they would on Unix.
func (t procTree) release() {
	if t.job != 0 {
		windows.CloseHandle(t.job)
	}
}

// exitStatus returns the child's exit code; Windows has no signals.
func exitStatus(ps *os.ProcessState) (int, string) { return ps.ExitCode(), "" }

// errBadExeFormat is ERROR_BAD_EXE_FORMAT: the file is not a program.
const errBadExeFormat = syscall.Errno(193)

// isExecFormat reports whether err says the file is not a program Windows
// can run.
func isExecFormat(err error) bool { return errors.Is(err, errBadExeFormat) }

// openPTY is never reached (Run checks ptySupported first).
func (o *outputs) openPTY(*exec.Cmd, *Capture) error { return ErrPTYUnsupported }

// lockThread does nothing: Windows has no parent-death signal.
func lockThread() func() { return func() {} }

// tunePipe does nothing on Windows.
func tunePipe(*os.File) {}

// AwaitExit waits until cmd's started process has exited, and reaps it:
// the job object, not a group id, reaches its descendants here.
func AwaitExit(cmd *exec.Cmd) (reaped bool, err error) { return true, cmd.Wait() }
