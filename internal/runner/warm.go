package runner

import (
	"errors"
	"fmt"
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
// process; no PTY can be applied to one (Run refuses such a Spec, and the
// caller starts it afresh). With Spec.Confine it is handed the launcher's
// argv, as a fresh start would have been. A pinned executable travels with
// the hand-over as a descriptor and becomes the process's ChildFD, as a
// fresh start's; without a launcher in front, a pinned file cannot be
// handed to one (a warm process cannot become another program). The base
// layer of the run's confinement travels the same way and becomes BaseFD
// (a number the process holds from its start with the null device, so
// nothing it opens before can take it).

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
	// Pinned says the message carries the pinned executable's descriptor
	// (SCM_RIGHTS), which the process is to hold as ChildFD, as a fresh
	// start's child does.
	Pinned bool `json:"pinned,omitempty"`
	// Base says it carries (after the pinned executable's) the base
	// layer of the run's confinement, which the process is to hold as
	// BaseFD, as a fresh start's child does.
	Base bool `json:"base,omitempty"`
	// Stdio says it carries, before any other, the run's standard
	// streams, which the process is to hold as its descriptors 0, 1 and
	// 2: a warm process started where the run's streams were not yet
	// known (a jail's, SendJailHandOver).
	Stdio bool `json:"stdio,omitempty"`
}

// apply gives this process the hand-over's working directory and
// environment (replaced whole) and returns its argv.
func (h handOver) apply() ([]string, error) {
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
func checkWarm(spec Spec, polled bool) error {
	switch {
	case !polled:
		return fmt.Errorf("%w: warm processes are not supported here", ErrStart)
	case spec.PTY:
		return fmt.Errorf("%w: a warm process has no terminal (start PTY runs afresh)", ErrStart)
	case spec.Executable != nil && !spec.Confine.Active():
		// A warm process is this binary: it can become the confining
		// launcher, which execs the descriptor, but not another program.
		return fmt.Errorf("%w: a warm process starts a pinned file only through the confining launcher (start it afresh)", ErrStart)
	}
	return nil
}
