package runner

import "time"

// Outcome is how a command ended, beside its output: what a backend that
// does not go through Run (a sandbox, its resident agent) knows at the end.
type Outcome struct {
	// ExitCode as Result.ExitCode words it (-1 when timed out or
	// canceled, 128+N for signal N).
	ExitCode int
	TimedOut bool
	Canceled bool
	// Error says why there is no ordinary exit status (Result.Error).
	Error    string
	Duration time.Duration
}

// Finish builds the Result of a command whose output c captured: the one
// result builder of the sandbox backends and their agent, so that each
// fills the same fields (DroppedBytes, Tail, Success) the same way.
func (c *Capture) Finish(o Outcome) Result {
	stdout, stderr, truncated := c.Result()
	return Result{
		ExitCode:     o.ExitCode,
		TimedOut:     o.TimedOut,
		Success:      o.ExitCode == 0 && !o.TimedOut && !o.Canceled,
		Stdout:       stdout,
		Stderr:       stderr,
		Truncated:    truncated,
		DroppedBytes: c.Dropped(),
		Error:        o.Error,
		Tail:         c.Tail(),
		Duration:     o.Duration,
	}
}
