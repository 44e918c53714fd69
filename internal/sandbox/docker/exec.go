package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/sandbox"
)

// How a timed-out command is killed without killing the container:
//
// Docker has no "kill exec" endpoint, and killing the container would take
// every other command of the scope with it. But runc starts every exec'd
// process as a session and process-group leader, and children inherit its
// group. So each command runs with a per-exec marker in its environment
// (execMarker=NONCE), which its children inherit; nothing is written into
// the container (an image's /tmp may not be writable by the sandbox user,
// or full). On timeout the backend starts a second exec, as the same user,
// that finds the processes carrying the marker in /proc and kills each
// one's process group (the command's leader's group is the command): the
// command and every child that did not start a new session die; the
// container and other commands keep running. A process that calls
// setsid() and drops the marker escapes; the exec's stream is closed
// anyway, so the caller is never held up, the result says the command
// could not be killed when the exec still runs, and the container's idle
// removal ends it. (Job control, `set -m`, is not an option: busybox sh
// refuses it without a terminal.)
const execMarker = "EXECHOST_SANDBOX_EXEC"

// wrapperScript runs the command under /bin/sh, which leads its group (the
// status is kept in r so the shell does not exec the command in its place).
const wrapperScript = `"$@"; r=$?; exit $r`

// killScript kills every process group whose processes carry the marker
// "$1" in their environment; it exits 3 when it found none (not started
// yet, or already gone), so the caller retries while the exec runs. It
// only reads /proc (environ is NUL-separated, which busybox grep does not
// search across, hence tr).
const killScript = `n=0; for d in /proc/[0-9]*; do tr '\0' '\n' <"$d/environ" 2>/dev/null | grep -qxF "$1" || continue; p=${d#/proc/}; kill -KILL -"$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null; n=1; done; [ $n = 1 ] || exit 3`

// killGrace is how long after the kill the output stream may take to end
// before it is closed from this side.
const killGrace = 5 * time.Second

// errGone means the container is missing or stopped; Exec recreates it once.
var errGone = errors.New("container gone")

// Exec runs req in its scope's container and returns the result. A command
// that fails is a Result with its exit code; an error means the sandbox
// could not run it (daemon down, image missing, container died twice).
func (b *Backend) Exec(ctx context.Context, req sandbox.Request) (runner.Result, error) {
	if len(req.Argv) == 0 && req.Command == "" {
		return runner.Result{}, errors.New("docker sandbox exec: empty command")
	}
	if err := sandbox.CheckEgress(b, req); err != nil {
		return runner.Result{}, err
	}
	env, err := sandbox.EnvList(sandbox.RunEnv(req))
	if err != nil {
		return runner.Result{}, fmt.Errorf("docker sandbox exec: %w", err)
	}
	ws, err := sandbox.EnsureWorkspace(b.cfg, b.stateDir, req, sandbox.WorkspaceOwner{User: ConfigOf(b.cfg).User, Mapped: os.Geteuid() != 0})
	if err != nil {
		return runner.Result{}, fmt.Errorf("docker sandbox exec: %w", err)
	}
	key := sandbox.ScopeKey(b.cfg.Scope, req)
	if req.Egress != nil {
		b.egr.leases.Note(key, req.Egress)
	}
	bx, err := b.boxes.Acquire(key, req.AgentID, ws)
	if err != nil {
		return runner.Result{}, err
	}
	defer b.boxes.Release(bx)
	if b.AgentErr() == nil {
		return b.execAgent(ctx, bx, req, env)
	}
	return b.execRetry(ctx, bx, req, env)
}

// execRetry runs req with runc exec in bx's container, recreating the
// container once when it is gone before the command started.
func (b *Backend) execRetry(ctx context.Context, bx *box, req sandbox.Request, env []string) (runner.Result, error) {
	for attempt := 0; ; attempt++ {
		id, _, err := b.boxes.Ensure(ctx, bx)
		if err != nil {
			return runner.Result{}, err
		}
		res, err := b.execIn(ctx, id, req, env)
		if errors.Is(err, ErrContainerDied) {
			// Died mid-command: the command may have had effects, so it
			// is not run again; the next request gets a new container.
			b.boxes.Forget(ctx, bx, id)
			return res, err
		}
		if !errors.Is(err, errGone) {
			return res, err
		}
		// Gone before the command started: recreate once and retry.
		b.boxes.Forget(ctx, bx, id)
		if attempt == 1 {
			return runner.Result{}, hint.Wrap(fmt.Errorf("%w: %w", ErrContainerDied, err), "check `docker logs` of the image's /bin/sh, memory limits, and that sandbox.docker.image runs `sleep`")
		}
	}
}

// execIn runs one command in container id.
func (b *Backend) execIn(ctx context.Context, id string, req sandbox.Request, env []string) (runner.Result, error) {
	marker := execMarker + "=" + nonce()
	argv := req.Argv
	if len(argv) == 0 {
		argv = []string{"/bin/sh", "-c", req.Command}
	}
	// Under a shell, as a command typed there runs: a missing program is
	// the shell's 127 "not found", a signal its "Killed".
	cmd := append([]string{"/bin/sh", "-c", wrapperScript, "sh"}, argv...)
	start := time.Now()
	execID, err := b.cli.ExecCreate(ctx, id, execConfig{
		User:         ConfigOf(b.cfg).User,
		AttachStdout: true,
		AttachStderr: true,
		Env:          append(slices.Clip(env), marker),
		WorkingDir:   sandbox.ContainerCwd(req.Cwd),
		Cmd:          cmd,
	})
	if err != nil {
		return runner.Result{}, execError("create exec", err)
	}
	att, err := b.cli.ExecAttach(ctx, execID)
	if err != nil {
		return runner.Result{}, execError("start exec", err)
	}
	defer att.Close()

	capture := runner.NewCapture(runner.MaxOutput, runner.TailSize)
	copied := make(chan error, 1)
	go func() {
		// StdCopy demultiplexes the stream frame by frame into the capture,
		// which keeps at most the cap: nothing is buffered whole.
		_, err := stdcopy.StdCopy(capture.Stdout(), capture.Stderr(), att.Reader)
		copied <- err
	}()

	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	timedOut := false
	var ctxErr error
	select {
	case <-copied:
	case <-timeout:
		timedOut = true
	case <-ctx.Done():
		ctxErr = ctx.Err()
	}
	if timedOut || ctxErr != nil {
		b.killExec(context.WithoutCancel(ctx), id, marker, execID)
		select {
		case <-copied:
		case <-time.After(killGrace):
			att.Close()
			<-copied
		}
	}
	if ctxErr != nil {
		return runner.Result{}, fmt.Errorf("docker sandbox exec: %w", ctxErr)
	}

	code, running, err := b.exitCode(context.WithoutCancel(ctx), execID)
	if err != nil {
		return runner.Result{}, err
	}
	if !timedOut && (running || code >= 128) && b.containerDied(context.WithoutCancel(ctx), id) {
		// Killed by a signal, or the stream ended while the exec still
		// ran: if the container itself is gone, that is the cause.
		return runner.Result{}, hint.Wrap(fmt.Errorf("%w while the command ran", ErrContainerDied), "check the memory and pids limits in sandbox.docker")
	}
	notKilled := ""
	if running {
		code = -1
		if timedOut {
			// Never report a kill that did not happen.
			notKilled = "timed out, but the command could not be killed: it keeps running in the sandbox container until it exits or the container is removed (hint: a process that started its own session or cleared its environment escapes the kill)"
		}
	}
	return capture.Finish(runner.Outcome{ExitCode: code, TimedOut: timedOut, Error: notKilled, Duration: time.Since(start)}), nil
}

// containerDied reports whether container id stopped. It is asked only
// after a command died by a signal; the daemon records the container's
// death a moment after the exec's, so it looks for up to a second.
func (b *Backend) containerDied(ctx context.Context, id string) bool {
	for range 20 {
		ins, err := b.cli.ContainerInspect(ctx, id)
		if err != nil || ins.State == nil || !ins.State.Running {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// exitCode waits (briefly: the daemon records it just after the stream
// ends) for the exec to be marked finished and returns its exit code.
func (b *Backend) exitCode(ctx context.Context, execID string) (code int, running bool, err error) {
	for i := 0; ; i++ {
		ins, err := b.cli.ExecInspect(ctx, execID)
		if err != nil {
			return 0, false, execError("inspect exec", err)
		}
		if !ins.Running || i >= 100 {
			code := 0 // not reported yet (still running), as the moby client read it
			if ins.ExitCode != nil {
				code = *ins.ExitCode
			}
			return code, ins.Running, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killExec kills the process groups of a timed-out command (see
// execMarker), retrying while none of its processes is found yet.
func (b *Backend) killExec(ctx context.Context, containerID, marker, execID string) {
	ctx, cancel := context.WithTimeout(ctx, killGrace)
	defer cancel()
	for ctx.Err() == nil {
		killID, err := b.cli.ExecCreate(ctx, containerID, execConfig{
			User: ConfigOf(b.cfg).User,
			Cmd:  []string{"/bin/sh", "-c", killScript, "sh", marker},
		})
		if err != nil {
			return
		}
		if err := b.cli.ExecStartDetached(ctx, killID); err != nil {
			return
		}
		code, _, err := b.exitCode(ctx, killID)
		if err != nil || code != 3 {
			return
		}
		// None found yet; if the command already ended, there is
		// nothing to kill.
		if ins, err := b.cli.ExecInspect(ctx, execID); err != nil || !ins.Running {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// execError classifies an exec endpoint failure: a missing or stopped
// container is errGone (recreate and retry), a dead daemon is
// ErrDaemonUnreachable.
func execError(op string, err error) error {
	if isNotFound(err) || isConflict(err) {
		return fmt.Errorf("%s: %w: %v", op, errGone, err)
	}
	return fmt.Errorf("docker sandbox %s: %w", op, daemonError(err))
}

func nonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
