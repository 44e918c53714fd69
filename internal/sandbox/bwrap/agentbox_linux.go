package bwrap

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/agent"
	"github.com/exechost/exechost/internal/sandbox/agentbox"
)

// agentPath is where sandbox.agentBinary appears inside the sandbox when
// it is not the helper binary itself.
const agentPath = "/.exechost/agent"

// With sandbox.agent=auto, each scope keeps one bwrap sandbox alive whose
// helper, after applying every restriction (limits, no_new_privs, the drop
// to uid 65534, Landlock), execs the agent instead of a command: the agent
// process and everything it forks carry the same restrictions, and a
// command costs a fork and an exec instead of a whole sandbox. The
// channel is the bwrap process's stdin and stdout, which only the gateway
// holds (see package sandbox/agent).

// agentArgv is the command the helper execs to become the agent.
func (b *Backend) agentArgv() []string {
	if b.agentBin == b.helper {
		return []string{helperPath, agent.Flag}
	}
	return []string{agentPath, agent.Flag}
}

// startAgent starts a resident sandbox over workspace ws and connects to
// its agent.
func (b *Backend) startAgent(ctx context.Context, ws string, eg *egressBox) (*agent.Conn, error) {
	env, err := sandboxEnv(nil)
	if err != nil {
		return nil, err
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: agent pipe: %v", ErrSetup, err)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, fmt.Errorf("%w: agent pipe: %v", ErrSetup, err)
	}
	diag := &sandbox.HeadWriter{N: 4096}
	spec := helperSpec{Argv: b.agentArgv()}
	var opts []agent.Option
	if eg != nil {
		spec.Egress, spec.egressDir = sandbox.EgressMount+"/"+sandbox.EgressSocket, eg.dir
		opts = append(opts, agent.WithEgressRelay(sandbox.EgressAddr, spec.Egress))
	}
	cmd, statusR, err := b.start(ws, sandbox.WorkspaceDir, env, spec, stdinR, stdoutW, diag)
	stdinR.Close()
	stdoutW.Close()
	if err != nil {
		stdinW.Close()
		stdoutR.Close()
		return nil, err
	}
	// The status pipe closes when the helper execs the agent; the ready
	// frame is what says the agent is up.
	go func() { _, _ = io.Copy(io.Discard, statusR); statusR.Close() }()
	// bwrap stays unreaped (AwaitExit) until after the kill in closeFn,
	// however long before that it exited: a kill of its group id after the
	// reap could reach an unrelated group that took the id.
	exited := make(chan struct{})
	reaped := false
	go func() { reaped, _ = runner.AwaitExit(cmd); close(exited) }()
	var reap sync.Once
	reapAfterExit := func() {
		<-exited
		reap.Do(func() {
			if !reaped {
				b.reaping(cmd.Process.Pid)
				_ = cmd.Wait()
			}
		})
	}
	pgid := cmd.Process.Pid
	closeFn := func() {
		// End of input makes the agent kill its commands and exit; the
		// kill makes sure, and the pid namespace takes the rest.
		stdinW.Close()
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		go func() { reapAfterExit(); stdoutR.Close() }()
	}
	conn, err := agent.Start(ctx, stdoutR, stdinW, closeFn, opts...)
	if err != nil {
		reapAfterExit()
		return nil, hint.Wrap(fmt.Errorf("%w: %w: %s", ErrSetup, err, strings.TrimSpace(diag.String())), "`exechost sandbox doctor` checks bwrap; sandbox.agent=off avoids the agent")
	}
	if eg != nil && conn.Ready().Egress != sandbox.EgressAddr {
		conn.Close()
		reapAfterExit()
		return nil, fmt.Errorf("%w: the sandbox agent runs no egress relay on %s (it reported %q): is sandbox.agentBinary this exechost's version?", ErrSetup, sandbox.EgressAddr, conn.Ready().Egress)
	}
	return conn, nil
}

// startBox starts bx's resident sandbox (agentbox.Funcs.Start); its
// connection is its handle too.
func (b *Backend) startBox(ctx context.Context, bx *agentbox.Box[*agent.Conn]) (*agent.Conn, *agent.Conn, error) {
	var eg *egressBox
	if lease := b.egr.leases.Of(bx.Key); lease != nil {
		var err error
		if eg, err = b.listenEgress(lease); err != nil {
			return nil, nil, err
		}
	}
	conn, err := b.startAgent(ctx, bx.Workspace, eg)
	if eg != nil {
		if err != nil {
			sandbox.RemoveEgressDir(eg.ln)
		} else {
			// The socket is served as long as the sandbox lives.
			go func() { <-conn.Done(); sandbox.RemoveEgressDir(eg.ln) }()
		}
	}
	if err != nil {
		return nil, nil, err
	}
	return conn, conn, nil
}

// agentFailure words an agent failure (agentbox.Funcs.Fail).
func agentFailure(kind agentbox.Failure, err error) error {
	switch kind {
	case agentbox.FailStart:
		return fmt.Errorf("%w: %w", ErrSetup, err)
	case agentbox.FailGone, agentbox.FailDied:
		return hint.Wrap(fmt.Errorf("%w: the sandbox died: %w", ErrSetup, err), "the pids limit, sandbox.bwrap.pidsLimit, counts the agent's threads too")
	default:
		return fmt.Errorf("bwrap sandbox exec: %w", err)
	}
}

// execAgent runs one command through the scope's resident agent (see
// agentbox.Set.Exec).
func (b *Backend) execAgent(ctx context.Context, req sandbox.Request, ws string, argv []string) (runner.Result, error) {
	env, err := sandbox.EnvList(sandbox.RunEnv(req))
	if err != nil {
		return runner.Result{}, fmt.Errorf("bwrap sandbox exec: %w", err)
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
	return b.boxes.Exec(ctx, bx, agent.Request{Argv: argv, Env: env, Cwd: sandbox.ContainerCwd(req.Cwd), Timeout: req.Timeout})
}

// reapLoop ends idle resident sandboxes until ctx ends.
func (b *Backend) reapLoop(ctx context.Context, idle time.Duration) {
	defer close(b.reaperDone)
	sandbox.IdleSweep(ctx, idle, func(now time.Time) { b.reapIdle(now, idle) })
}

// reapIdle ends the sandboxes of boxes with nothing in flight that were
// last used more than idle before now, and returns how many.
func (b *Backend) reapIdle(now time.Time, idle time.Duration) int {
	return b.boxes.ReapIdle(context.Background(), now, idle)
}
