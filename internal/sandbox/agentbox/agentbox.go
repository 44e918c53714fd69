// Package agentbox is the resident-agent box bookkeeping every sandbox
// backend shares: one box per scope key (session, agent or shared), started
// on first use with the backend's own Start (a container, a bwrap process, a
// pod), commands sent over the box's agent connection (package
// sandbox/agent, which assembles the runner.Result), a dead agent found
// before a command started replaced once, idle boxes reaped, and every box
// ended on Close.
//
// A backend supplies what differs — how a box starts and stops, and how an
// agent failure reads to its users — as Funcs; the handle type H is what it
// keeps per live box (a container id, a pod name, the connection itself).
package agentbox

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/sandbox/agent"
)

// Failure classifies why a command did not run to completion through an
// agent, for Funcs.Fail to word the error.
type Failure int

// Failures passed to Funcs.Fail.
const (
	// FailStart: the agent is alive but could not start the command (no
	// such program, bad cwd); err wraps agent.ErrStart.
	FailStart Failure = iota + 1
	// FailGone: the box died before the command started, twice (the
	// replacement died too); err wraps agent.ErrNotStarted.
	FailGone
	// FailDied: the box died or stopped answering while the command ran;
	// the command may have had effects and is not run again.
	FailDied
	// FailOther: any other error of the agent channel.
	FailOther
)

// ErrNoAgent is returned by Set.Exec for a box started without an agent
// (the backend's per-command mode): the caller runs the command its own way.
var ErrNoAgent = errors.New("box has no resident agent")

// Funcs are what a backend supplies to a Set.
type Funcs[H comparable] struct {
	// Start starts bx's sandbox and returns its handle and its agent's
	// connection (nil when the box runs commands another way). It is
	// called with bx's lock held, never after Close.
	Start func(ctx context.Context, bx *Box[H]) (H, *agent.Conn, error)
	// Stop ends a sandbox Start made (remove the container, delete the
	// pod); the Set has closed its connection already. Errors are
	// reported by Close and otherwise dropped: the box is forgotten
	// either way. Nil means nothing beyond closing the connection.
	Stop func(ctx context.Context, h H) error
	// Fail words an agent failure for the backend's users (its sentinel
	// error, a hint). Nil returns err as it is.
	Fail func(kind Failure, err error) error
}

// Box is one scope's sandbox. Key, Agent and Workspace are fixed when the
// box is made; the rest is guarded by the Set.
type Box[H comparable] struct {
	// Key is the scope key (sandbox.ScopeKey).
	Key string
	// Agent is the agent id of the request that made the box, for labels.
	Agent string
	// Workspace is the host workspace of the request that made the box
	// (empty for backends without host workspaces).
	Workspace string

	mu   sync.Mutex // held while starting; guards live, h, conn
	live bool
	h    H
	conn *agent.Conn

	inflight int       // guarded by Set.mu
	lastUsed time.Time // guarded by Set.mu
}

// Conn returns the box's current agent connection, or nil.
func (bx *Box[H]) Conn() *agent.Conn {
	bx.mu.Lock()
	defer bx.mu.Unlock()
	return bx.conn
}

// Set is a backend's boxes, one per scope key. It is safe for concurrent
// use.
type Set[H comparable] struct {
	f         Funcs[H]
	closedErr error

	mu     sync.Mutex
	boxes  map[string]*Box[H]
	closed bool
}

// New returns an empty Set; closedErr is what Acquire and Ensure return
// after Close (the backend's ErrClosed).
func New[H comparable](f Funcs[H], closedErr error) *Set[H] {
	return &Set[H]{f: f, closedErr: closedErr, boxes: map[string]*Box[H]{}}
}

// Acquire returns key's box, made with agentID and workspace when there is
// none, counted as in use until Release so the idle reaper leaves it alone.
func (s *Set[H]) Acquire(key, agentID, workspace string) (*Box[H], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, s.closedErr
	}
	bx := s.boxes[key]
	if bx == nil {
		bx = &Box[H]{Key: key, Agent: agentID, Workspace: workspace}
		s.boxes[key] = bx
	}
	bx.inflight++
	return bx, nil
}

// Release ends one use of bx that Acquire counted.
func (s *Set[H]) Release(bx *Box[H]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	bx.inflight--
	bx.lastUsed = time.Now()
}

// Lookup returns key's box, or nil (for tests and diagnostics).
func (s *Set[H]) Lookup(key string) *Box[H] {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.boxes[key]
}

// Ensure returns bx's live sandbox, starting one when there is none or its
// agent died (the dead one is stopped first).
func (s *Set[H]) Ensure(ctx context.Context, bx *Box[H]) (H, *agent.Conn, error) {
	bx.mu.Lock()
	defer bx.mu.Unlock()
	if bx.live && (bx.conn == nil || bx.conn.Err() == nil) {
		return bx.h, bx.conn, nil
	}
	var zero H
	if bx.live {
		// The agent died: its sandbox goes with it.
		s.stop(ctx, bx.h, bx.conn)
		bx.live, bx.h, bx.conn = false, zero, nil
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		// Close already ended every box; one started now would be
		// nobody's to end.
		return zero, nil, s.closedErr
	}
	h, conn, err := s.f.Start(ctx, bx)
	if err != nil {
		return zero, nil, err
	}
	bx.live, bx.h, bx.conn = true, h, conn
	return h, conn, nil
}

// Forget drops bx's sandbox if it is still h, and ends h either way, so
// the next Ensure starts a fresh one.
func (s *Set[H]) Forget(ctx context.Context, bx *Box[H], h H) {
	bx.mu.Lock()
	var conn *agent.Conn
	if bx.live && bx.h == h {
		var zero H
		conn = bx.conn
		bx.live, bx.h, bx.conn = false, zero, nil
	}
	bx.mu.Unlock()
	s.stop(ctx, h, conn)
}

func (s *Set[H]) stop(ctx context.Context, h H, conn *agent.Conn) error {
	if conn != nil {
		conn.Close()
	}
	if s.f.Stop == nil {
		return nil
	}
	return s.f.Stop(ctx, h)
}

// Exec runs areq through bx's agent. A dead agent found before the command
// started is replaced (with its sandbox) once; one that dies while the
// command runs is a FailDied error, and the command is not run again. A
// box without an agent returns ErrNoAgent.
func (s *Set[H]) Exec(ctx context.Context, bx *Box[H], areq agent.Request) (runner.Result, error) {
	for attempt := 0; ; attempt++ {
		h, conn, err := s.Ensure(ctx, bx)
		if err != nil {
			return runner.Result{}, err
		}
		if conn == nil {
			return runner.Result{}, ErrNoAgent
		}
		res, err := conn.Exec(ctx, areq)
		switch {
		case err == nil:
			return res, nil
		case errors.Is(err, agent.ErrStart):
			return runner.Result{}, s.fail(FailStart, err)
		case errors.Is(err, agent.ErrNotStarted) && attempt == 0:
			s.Forget(ctx, bx, h)
			continue
		case errors.Is(err, agent.ErrNotStarted):
			s.Forget(ctx, bx, h)
			return runner.Result{}, s.fail(FailGone, err)
		case errors.Is(err, agent.ErrDied), errors.Is(err, agent.ErrUnresponsive):
			s.Forget(ctx, bx, h)
			return runner.Result{}, s.fail(FailDied, err)
		default:
			return runner.Result{}, s.fail(FailOther, err)
		}
	}
}

func (s *Set[H]) fail(kind Failure, err error) error {
	if s.f.Fail == nil {
		return err
	}
	return s.f.Fail(kind, err)
}

// ReapIdle ends the sandboxes of boxes with nothing in flight that were
// last used more than idle before now, and returns how many it ended.
func (s *Set[H]) ReapIdle(ctx context.Context, now time.Time, idle time.Duration) int {
	var victims []*Box[H]
	s.mu.Lock()
	for key, bx := range s.boxes {
		if bx.inflight == 0 && now.Sub(bx.lastUsed) > idle {
			delete(s.boxes, key)
			victims = append(victims, bx)
		}
	}
	s.mu.Unlock()
	n := 0
	for _, bx := range victims {
		if live, h, conn := bx.take(); live && s.stop(ctx, h, conn) == nil {
			n++
		}
	}
	return n
}

// take empties bx and returns what it held.
func (bx *Box[H]) take() (bool, H, *agent.Conn) {
	bx.mu.Lock()
	defer bx.mu.Unlock()
	var zero H
	live, h, conn := bx.live, bx.h, bx.conn
	bx.live, bx.h, bx.conn = false, zero, nil
	return live, h, conn
}

// Handles returns the handles of every live box, for a backend that removes
// what it does not use (orphans of a crashed gateway).
func (s *Set[H]) Handles() []H {
	s.mu.Lock()
	boxes := make([]*Box[H], 0, len(s.boxes))
	for _, bx := range s.boxes {
		boxes = append(boxes, bx)
	}
	s.mu.Unlock()
	var out []H
	for _, bx := range boxes {
		bx.mu.Lock()
		if bx.live {
			out = append(out, bx.h)
		}
		bx.mu.Unlock()
	}
	return out
}

// Close ends every box's sandbox; Acquire and Ensure fail with the closed
// error afterwards. It returns the Stop errors.
func (s *Set[H]) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	boxes := s.boxes
	s.boxes = map[string]*Box[H]{}
	s.mu.Unlock()
	var errs []error
	for _, bx := range boxes {
		if live, h, conn := bx.take(); live {
			errs = append(errs, s.stop(ctx, h, conn))
		}
	}
	return errors.Join(errs...)
}
