package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// A warm process is a process started ahead of its run (WarmStarter): in a
// process group of its own with the parent-death signal, exactly as Run
// starts one, stdin the null device and its stdout and stderr pipes held by
// the runner, waiting on a private socket (descriptor WarmFD) for its one
// hand-over. Run with Spec.Warm gives it the run's argv, environment and
// working directory there (what execve and the start's Dir would have
// given a fresh process) and then watches it as it watches any run: the
// same output capture, timeout, process-group kill and reaper. The process
// applies the hand-over itself (AwaitHandOver) before it runs anything, so
// it becomes the process a fresh start of the same Spec would be, minus
// the start. It runs one command and exits; nothing carries over.
//
// Only the polled launcher (Linux with pidfds, WarmSupported) adopts a warm
// process; no PTY, confining launcher or pinned executable can be applied
// to one (Run refuses such a Spec, and the caller starts it afresh).

// WarmFD is the descriptor a warm process receives its hand-over on.
const WarmFD = 3

// ErrWarmGone means the warm process could not take its hand-over (it had
// exited); nothing of the run started, and the caller may start it afresh.
var ErrWarmGone = errors.New("the warm process is gone")

// ErrNoHandOver is what AwaitHandOver returns when the runner closed the
// hand-over socket without handing anything over (the pool closed or
// reaped the process, or the runner died): the process should exit quietly.
var ErrNoHandOver = errors.New("no hand-over: the runner let this process go")

// maxHandOver bounds a hand-over message (argv and environment).
const maxHandOver = 8 << 20

// handOver is the message a warm process receives: what execve and the
// start's working directory give a fresh process.
type handOver struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir,omitempty"`
}

// AwaitHandOver is the warm process's side: it says it is ready, waits for
// its hand-over on WarmFD, closes it, and applies the hand-over's working
// directory and environment to this process (the environment is replaced
// whole), then returns the argv the process is to run as. The caller must
// run nothing before it returns. ErrNoHandOver means exit quietly.
func AwaitHandOver() ([]string, error) {
	f := os.NewFile(WarmFD, "exechost-warm")
	if f == nil {
		return nil, fmt.Errorf("warm process: no hand-over descriptor %d", WarmFD)
	}
	defer f.Close()
	if _, err := f.Write([]byte{'r'}); err != nil {
		return nil, ErrNoHandOver // the runner is gone already
	}
	b, err := io.ReadAll(io.LimitReader(f, maxHandOver+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("warm process: read the hand-over: %w", err)
	case len(b) == 0:
		return nil, ErrNoHandOver
	case len(b) > maxHandOver:
		return nil, fmt.Errorf("warm process: hand-over over %d bytes", maxHandOver)
	}
	var h handOver
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("warm process: bad hand-over: %w", err)
	}
	if len(h.Argv) == 0 {
		return nil, fmt.Errorf("warm process: hand-over without argv")
	}
	if h.Dir != "" {
		if err := os.Chdir(h.Dir); err != nil {
			return nil, fmt.Errorf("warm process: %w", err)
		}
	}
	os.Clearenv()
	for _, kv := range h.Env {
		name, value, ok := cutEnv(kv)
		if !ok {
			continue // execve would pass it; nothing here can read it
		}
		if err := os.Setenv(name, value); err != nil {
			return nil, fmt.Errorf("warm process: env %q: %w", name, err)
		}
	}
	return h.Argv, nil
}

// cutEnv splits NAME=VALUE; an entry starting with "=" keeps its first
// "=" in the name, as os.Getenv sees such entries.
func cutEnv(kv string) (string, string, bool) {
	for i := 1; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return "", "", false
}

// checkWarm refuses what cannot be applied to a process that has already
// started; the caller starts such a run afresh.
func checkWarm(spec Spec) error {
	switch {
	case !WarmSupported():
		return fmt.Errorf("%w: warm processes are not supported here", ErrStart)
	case spec.PTY:
		return fmt.Errorf("%w: a warm process has no terminal (start PTY runs afresh)", ErrStart)
	case spec.Confine.Active(), spec.Executable != nil:
		return fmt.Errorf("%w: a warm process cannot start through a launcher or by a pinned file (start it afresh)", ErrStart)
	}
	return nil
}
