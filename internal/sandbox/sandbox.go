// Package sandbox defines the backend interface for host=sandbox: the
// command runs inside an isolation boundary (a Docker container, or fresh
// Linux namespaces) instead of on the gateway's own machine. The boundary is
// the sandbox itself, so no allowlist applies; what a backend must guarantee
// is that nothing ever falls back to running on the host.
package sandbox

import (
	"context"
	"errors"
	"time"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/runner"
)

// ErrNotConfigured is returned when host=sandbox is requested but no backend
// is available. It is never answered by running on the host instead.
var ErrNotConfigured = hint.Wrap(errors.New("sandbox backend not configured"), "start dockerd, install bubblewrap, or set sandbox.backend in exechost.json; run `exechost sandbox doctor`")

// Request is one command for a sandbox.
type Request struct {
	// SessionKey and AgentID pick the container scope (session, agent or
	// shared) and the agent's workspace.
	SessionKey string
	AgentID    string
	// Argv runs directly when set; otherwise Command runs via sh -c.
	Argv    []string
	Command string
	// Cwd inside the sandbox; empty means the workspace (/workspace).
	Cwd string
	// Env is added to the sandbox's environment.
	Env map[string]string
	// Timeout kills the command's processes (not the container).
	Timeout time.Duration
	// Egress, when set, is the run's lease on the egress proxy: its
	// policy's network is a list of names (egress.go). A backend that
	// cannot hold it refuses the run (CheckEgress).
	Egress *Egress
}

// Backend runs commands in a sandbox. Implementations must be safe for
// concurrent use, must apply the same output caps as runner.Capture, and must
// return a clear error (never a host fallback) when the sandbox cannot run.
type Backend interface {
	// Name identifies the backend ("docker", "bwrap", …) in results and logs.
	Name() string
	// Exec runs one command and returns its aggregated result. A non-nil
	// error means the sandbox itself failed (daemon down, image missing);
	// a command's own failure is a Result with a non-zero ExitCode.
	Exec(ctx context.Context, req Request) (runner.Result, error)
	// Close releases everything the backend created (containers, mounts).
	Close(ctx context.Context) error
}

// IdleSweep calls sweep every quarter of idle (between 100 ms and 30 s)
// until ctx ends: the one loop with which backends remove sandboxes left
// idle longer than idle. With idle <= 0 it only waits for ctx.
func IdleSweep(ctx context.Context, idle time.Duration, sweep func(now time.Time)) {
	if idle <= 0 {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(min(max(idle/4, 100*time.Millisecond), 30*time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			sweep(now)
		}
	}
}
