// Package runner spawns one command on the local machine: argv or shell
// text, a working directory, an environment overlay, a timeout that kills the
// whole process tree, and output capped by Capture. It makes no policy
// decisions; callers (the host engine) decide first and then call Run.
package runner

import (
	"time"
)

// Spec describes one process to run.
type Spec struct {
	// Argv runs a program directly when set (Argv[0] is resolved via the
	// host PATH unless it contains a slash).
	Argv []string
	// Command is shell text run as /bin/sh -c Command when Argv is empty.
	Command string
	// Cwd is the working directory; empty means the current one.
	Cwd string
	// Env is an overlay on BaseEnv. Names for which policy.DangerousEnv is
	// true are refused with ErrDangerousEnv.
	Env map[string]string
	// BaseEnv is the environment the overlay applies to; nil means the
	// runner's own environment.
	BaseEnv []string
	// Timeout kills the process group when exceeded; 0 means no timeout
	// (the context still applies).
	Timeout time.Duration
	// PTY attaches the process to a pseudo-terminal (local runs only; the
	// spec allows no PTY in the sandbox or for node exec). Output is then
	// one combined stream, reported as stdout.
	PTY bool
	// MaxOutput and TailSize override the spec's caps when positive.
	MaxOutput int
	TailSize  int
}

// Result is the outcome of Run; its JSON shape is the design's system.run
// result payload.
type Result struct {
	ExitCode  int    `json:"exitCode"`
	TimedOut  bool   `json:"timedOut"`
	Success   bool   `json:"success"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	Truncated bool   `json:"truncated"`
	Error     string `json:"error,omitempty"`
	// Tail is the last TailSize bytes of combined output, for events.
	Tail string `json:"-"`
	// Duration is the wall time from start to exit.
	Duration time.Duration `json:"-"`
	// Pid is the process (group) id while it ran, for diagnostics.
	Pid int `json:"-"`
}
