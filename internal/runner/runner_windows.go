package runner

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
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

// killGroup terminates the child. Windows has no process-group kill; its
// own children survive unless they exit when their output pipes close (a
// job object would reach them: not implemented yet).
func killGroup(p *os.Process) { _ = p.Kill() }

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
