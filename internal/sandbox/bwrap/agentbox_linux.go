package bwrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/agent"
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

// abox is one scope's resident sandbox. conn is guarded by mu (held while
// starting); inflight and lastUsed by Backend.mu.
type abox struct {
	mu       sync.Mutex
	conn     *agent.Conn
	inflight int
	lastUsed time.Time
}

// agentArgv is the command the helper execs to become the agent.
func (b *Backend) agentArgv() []string {
	if b.agentBin == b.helper {
		return []string{helperPath, agent.Flag}
	}
	return []string{agentPath, agent.Flag}
}

// startAgent starts a resident sandbox over workspace ws and connects to
// its agent.
func (b *Backend) startAgent(ctx context.Context, ws string) (*agent.Conn, error) {
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
	cmd, statusR, err := b.start(ws, sandbox.WorkspaceDir, env, helperSpec{Argv: b.agentArgv()}, stdinR, stdoutW, diag)
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
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	pgid := cmd.Process.Pid
	closeFn := func() {
		// End of input makes the agent kill its commands and exit; the
		// kill makes sure, and the pid namespace takes the rest.
		stdinW.Close()
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		go func() { <-exited; stdoutR.Close() }()
	}
	conn, err := agent.Start(ctx, stdoutR, stdinW, closeFn)
	if err != nil {
		<-exited
		return nil, fmt.Errorf("%w: %w: %s (hint: `exechost sandbox doctor` checks bwrap; sandbox.agent=off avoids the agent)", ErrSetup, err, strings.TrimSpace(diag.String()))
	}
	return conn, nil
}

// acquireBox returns key's resident sandbox box, counted as in use.
func (b *Backend) acquireBox(key string) (*abox, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	bx := b.boxes[key]
	if bx == nil {
		bx = &abox{}
		b.boxes[key] = bx
	}
	bx.inflight++
	return bx, nil
}

func (b *Backend) releaseBox(bx *abox) {
	b.mu.Lock()
	defer b.mu.Unlock()
	bx.inflight--
	bx.lastUsed = time.Now()
}

// ensureAgent returns bx's live agent, starting a sandbox first when there
// is none or the last one died.
func (b *Backend) ensureAgent(ctx context.Context, bx *abox, ws string) (*agent.Conn, error) {
	bx.mu.Lock()
	defer bx.mu.Unlock()
	if bx.conn != nil && bx.conn.Err() == nil {
		return bx.conn, nil
	}
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	conn, err := b.startAgent(ctx, ws)
	if err != nil {
		return nil, err
	}
	bx.conn = conn
	return conn, nil
}

// forgetAgent drops bx's agent if it is still conn, and ends its sandbox.
func (b *Backend) forgetAgent(bx *abox, conn *agent.Conn) {
	bx.mu.Lock()
	if bx.conn == conn {
		bx.conn = nil
	}
	bx.mu.Unlock()
	conn.Close()
}

// execAgent runs one command through the scope's resident agent. A dead
// agent found before the command started is replaced once; one that dies
// while the command runs is an error (the command may have had effects
// and is not run again).
func (b *Backend) execAgent(ctx context.Context, req sandbox.Request, ws string, argv []string) (runner.Result, error) {
	env, err := sandbox.EnvList(req.Env)
	if err != nil {
		return runner.Result{}, fmt.Errorf("bwrap sandbox exec: %w", err)
	}
	bx, err := b.acquireBox(sandbox.ScopeKey(b.cfg.Scope, req))
	if err != nil {
		return runner.Result{}, err
	}
	defer b.releaseBox(bx)
	areq := agent.Request{Argv: argv, Env: env, Cwd: sandbox.ContainerCwd(req.Cwd), Timeout: req.Timeout}
	for attempt := 0; ; attempt++ {
		conn, err := b.ensureAgent(ctx, bx, ws)
		if err != nil {
			return runner.Result{}, err
		}
		res, err := conn.Exec(ctx, areq)
		switch {
		case err == nil:
			return res, nil
		case errors.Is(err, agent.ErrStart):
			return runner.Result{}, fmt.Errorf("%w: %w", ErrSetup, err)
		case errors.Is(err, agent.ErrNotStarted) && attempt == 0:
			b.forgetAgent(bx, conn)
			continue
		case errors.Is(err, agent.ErrNotStarted), errors.Is(err, agent.ErrDied), errors.Is(err, agent.ErrUnresponsive):
			b.forgetAgent(bx, conn)
			return runner.Result{}, fmt.Errorf("%w: the sandbox died: %w (hint: the pids limit, sandbox.bwrap.pidsLimit, counts the agent's threads too)", ErrSetup, err)
		default:
			return runner.Result{}, fmt.Errorf("bwrap sandbox exec: %w", err)
		}
	}
}

// reapLoop ends idle resident sandboxes until ctx ends.
func (b *Backend) reapLoop(ctx context.Context, idle time.Duration) {
	defer close(b.reaperDone)
	sandbox.IdleSweep(ctx, idle, func(now time.Time) { b.reapIdle(now, idle) })
}

// reapIdle ends the sandboxes of boxes with nothing in flight that were
// last used more than idle before now, and returns how many.
func (b *Backend) reapIdle(now time.Time, idle time.Duration) int {
	var victims []*abox
	b.mu.Lock()
	for key, bx := range b.boxes {
		if bx.inflight == 0 && now.Sub(bx.lastUsed) > idle {
			delete(b.boxes, key)
			victims = append(victims, bx)
		}
	}
	b.mu.Unlock()
	n := 0
	for _, bx := range victims {
		bx.mu.Lock()
		conn := bx.conn
		bx.conn = nil
		bx.mu.Unlock()
		if conn != nil {
			conn.Close()
			n++
		}
	}
	return n
}

// closeBoxes ends every resident sandbox (Close).
func (b *Backend) closeBoxes() {
	b.mu.Lock()
	boxes := b.boxes
	b.boxes = map[string]*abox{}
	b.mu.Unlock()
	for _, bx := range boxes {
		bx.mu.Lock()
		if bx.conn != nil {
			bx.conn.Close()
			bx.conn = nil
		}
		bx.mu.Unlock()
	}
}
