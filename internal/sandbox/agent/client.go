package agent

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/runner"
)

// Errors a backend acts on with errors.Is.
var (
	// ErrNotStarted means the agent was gone (or went) before it accepted
	// the command: nothing ran, so the backend may recreate the sandbox
	// and send the command once more.
	ErrNotStarted = errors.New("sandbox agent gone before the command started")
	// ErrDied means the agent died after accepting the command: it may
	// have had effects, so it must not be run again.
	ErrDied = errors.New("sandbox agent died while the command ran")
	// ErrStart means the agent could not start the command (its working
	// directory is missing): nothing ran, and the sandbox is fine.
	ErrStart = errors.New("sandbox agent could not start the command")
	// ErrUnresponsive means the agent did not answer a kill within
	// KillGrace; the connection is closed (the backend kills the sandbox).
	ErrUnresponsive = errors.New("sandbox agent unresponsive")
)

// ReadyTimeout bounds how long Start waits for the agent's ready frame: a
// container or bwrap sandbox that is up but whose agent never answers
// (wrong binary, blocked start) must not hold the first command forever.
const ReadyTimeout = 30 * time.Second

// KillGrace is how long a command's result may take after its timeout or
// a kill request before the agent is declared unresponsive.
const KillGrace = 5 * time.Second

// Request is one command for the agent.
type Request struct {
	// Argv is the program and its arguments; a bare name is looked up in
	// the PATH of the final environment, inside the sandbox.
	Argv []string
	// Env overlays the agent's start-up environment (NAME=value).
	Env []string
	// Cwd is the working directory inside the sandbox.
	Cwd string
	// Timeout kills the command's process group; zero means none.
	Timeout time.Duration
}

// Ready is what the agent reported about itself once it was up, as seen
// from inside the sandbox.
type Ready struct {
	PID        int
	UID        int
	NoDump     bool
	NoNewPrivs bool
	// Egress is where the egress relay listens ("" when none was asked).
	Egress string
}

// Option configures Start and StartDial.
type Option func(*request)

// WithEgressRelay makes the agent relay every TCP connection to listen
// (an address on the sandbox's own loopback) to the unix socket dial
// (the gateway's egress proxy, mounted into the sandbox). An agent that
// cannot listen there does not start.
func WithEgressRelay(listen, dial string) Option {
	return func(r *request) { r.EgressListen, r.EgressDial = listen, dial }
}

// Conn is the gateway's end of one agent's channel. It is safe for
// concurrent use: commands are multiplexed by id.
type Conn struct {
	w     io.Writer
	close func()
	key   []byte
	ready Ready

	wmu sync.Mutex
	seq uint64

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]*call
	dead    error
	done    chan struct{}
}

// call is one command in flight.
type call struct {
	accepted bool
	result   chan reply
}

// Start speaks to an agent whose stdin is w and stdout is r: it sends the
// hello with a fresh key and waits (at most ReadyTimeout, or until ctx
// ends) for the ready frame. closeFn ends the channel (closes w, kills
// the sandbox's process or connection); Start and Close call it once on
// failure or at the end.
func Start(ctx context.Context, r io.Reader, w io.Writer, closeFn func(), opts ...Option) (*Conn, error) {
	c, err := newConn(closeFn)
	if err != nil {
		return nil, err
	}
	if err := c.hello(w, "", opts); err != nil {
		return nil, err
	}
	c.w = w
	return c.waitReady(ctx, r)
}

// StartDial is Start with the channel moved to a unix socket: the hello
// goes to the agent's stdin (helloW) and names dialPath, where the agent
// connects; ln, listening there, accepts exactly that one connection,
// which must open with proof of the key. The caller closes ln's file
// afterwards. The agent's stdin stays open: closing it (in closeFn) still
// ends the agent.
func StartDial(ctx context.Context, helloW io.Writer, ln *net.UnixListener, dialPath string, closeFn func(), opts ...Option) (*Conn, error) {
	c, err := newConn(closeFn)
	if err != nil {
		return nil, err
	}
	if err := c.hello(helloW, dialPath, opts); err != nil {
		return nil, err
	}
	accepted := make(chan struct{})
	defer close(accepted)
	go func() {
		select {
		case <-ctx.Done():
			ln.Close()
		case <-accepted:
		}
	}()
	_ = ln.SetDeadline(time.Now().Add(ReadyTimeout))
	nc, err := ln.AcceptUnix()
	ln.Close()
	if err != nil {
		c.fail(err)
		return nil, fmt.Errorf("sandbox agent did not connect: %w", err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(ReadyTimeout))
	_, body, err := readFrame(nc, 0)
	var proof reply
	if err == nil {
		err = json.Unmarshal(body, &proof)
	}
	if err != nil || proof.Type != typeProof || !hmac.Equal(proof.Proof, frameMAC(c.key, 0, []byte(dialProofLabel))) {
		nc.Close()
		c.fail(fmt.Errorf("%w: the connection did not prove the key (%v)", ErrProtocol, err))
		return nil, fmt.Errorf("sandbox agent connect: %w", c.Err())
	}
	_ = nc.SetReadDeadline(time.Time{})
	c.w = nc
	inner := c.close
	c.close = func() { nc.Close(); inner() }
	return c.waitReady(ctx, nc)
}

// newConn makes a Conn with a fresh key.
func newConn(closeFn func()) (*Conn, error) {
	key := make([]byte, keySize)
	if _, err := rand.Read(key); err != nil {
		closeFn()
		return nil, fmt.Errorf("sandbox agent key: %w", err)
	}
	var once sync.Once
	return &Conn{key: key, pending: map[uint64]*call{}, done: make(chan struct{}),
		close: func() { once.Do(closeFn) }}, nil
}

// hello sends the first frame.
func (c *Conn) hello(w io.Writer, dial string, opts []Option) error {
	req := request{Type: typeHello, Key: c.key, Dial: dial}
	for _, o := range opts {
		o(&req)
	}
	hello := encode(req)
	if err := writeFrame(w, frameMAC(c.key, 0, hello), hello); err != nil {
		c.fail(err)
		return fmt.Errorf("sandbox agent hello: %w", err)
	}
	c.seq = 1
	return nil
}

// waitReady reads the agent's frames from r and waits for the ready one.
func (c *Conn) waitReady(ctx context.Context, r io.Reader) (*Conn, error) {
	readyCh := make(chan reply, 1)
	go c.readLoop(r, readyCh)
	t := time.NewTimer(ReadyTimeout)
	defer t.Stop()
	select {
	case rep := <-readyCh:
		c.ready = Ready{PID: rep.PID, UID: rep.UID, NoDump: rep.NoDump, NoNewPrivs: rep.NoNewPrivs, Egress: rep.Egress}
		return c, nil
	case <-c.done:
		return nil, fmt.Errorf("sandbox agent did not start: %w", c.Err())
	case <-t.C:
		c.fail(fmt.Errorf("no ready frame within %s", ReadyTimeout))
		return nil, hint.Wrap(fmt.Errorf("sandbox agent did not start: %w", c.Err()), "is sandbox.agentBinary an exechost binary that runs in the sandbox?")
	case <-ctx.Done():
		c.fail(ctx.Err())
		return nil, fmt.Errorf("sandbox agent start: %w", ctx.Err())
	}
}

// Ready returns what the agent reported at start.
func (c *Conn) Ready() Ready { return c.ready }

// Done is closed once the channel is dead (agent exited, stream broken,
// Close called).
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err says why the channel died; nil while it is alive.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

// Close ends the channel: the agent sees end of input, kills its commands
// and exits; commands in flight fail with ErrDied.
func (c *Conn) Close() { c.fail(errors.New("closed")) }

// fail marks the channel dead (once), closes it and fails every command
// in flight: ErrNotStarted for those the agent had not accepted.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.dead != nil {
		c.mu.Unlock()
		return
	}
	c.dead = err
	pending := c.pending
	c.pending = nil
	close(c.done)
	c.mu.Unlock()
	c.close()
	for _, cl := range pending {
		close(cl.result)
	}
}

// readLoop dispatches the agent's frames until the stream ends.
func (c *Conn) readLoop(r io.Reader, readyCh chan<- reply) {
	for {
		_, body, err := readFrame(r, 0)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("agent exited (end of its output)")
			}
			c.fail(err)
			return
		}
		var rep reply
		if err := json.Unmarshal(body, &rep); err != nil {
			c.fail(fmt.Errorf("%w: %v", ErrProtocol, err))
			return
		}
		switch rep.Type {
		case typeReady:
			select {
			case readyCh <- rep:
			default:
				c.fail(fmt.Errorf("%w: second ready frame", ErrProtocol))
				return
			}
		case typeAccepted, typeResult:
			c.mu.Lock()
			cl := c.pending[rep.ID]
			if cl != nil {
				if rep.Type == typeAccepted {
					cl.accepted = true
				} else {
					delete(c.pending, rep.ID)
				}
			}
			c.mu.Unlock()
			if cl != nil && rep.Type == typeResult {
				cl.result <- rep
			}
		default:
			c.fail(fmt.Errorf("%w: unknown frame type %q", ErrProtocol, rep.Type))
			return
		}
	}
}

// send writes one authenticated gateway frame.
func (c *Conn) send(req request) error {
	body := encode(req)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	err := writeFrame(c.w, frameMAC(c.key, c.seq, body), body)
	c.seq++
	return err
}

// Exec runs req through the agent and returns its result. The error wraps
// ErrNotStarted (nothing ran; the caller may retry in a new sandbox),
// ErrDied (it may have run), ErrUnresponsive, or the context's error.
func (c *Conn) Exec(ctx context.Context, req Request) (runner.Result, error) {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return runner.Result{}, errors.New("sandbox agent exec: empty argv")
	}
	cl := &call{result: make(chan reply, 1)}
	c.mu.Lock()
	if c.dead != nil {
		err := c.dead
		c.mu.Unlock()
		return runner.Result{}, fmt.Errorf("%w: %v", ErrNotStarted, err)
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = cl
	c.mu.Unlock()

	start := time.Now()
	err := c.send(request{Type: typeExec, ID: id, Argv: req.Argv, Env: req.Env, Cwd: req.Cwd, TimeoutMs: req.Timeout.Milliseconds()})
	if err != nil {
		c.fail(fmt.Errorf("write to agent: %w", err))
		return runner.Result{}, c.lost(cl)
	}
	// The agent enforces the timeout; this backstop only fires when it
	// cannot (it hangs, or its clock stalls), KillGrace later.
	var backstop <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout + KillGrace)
		defer t.Stop()
		backstop = t.C
	}
	var rep reply
	var ok bool
	select {
	case rep, ok = <-cl.result:
	case <-backstop:
		c.fail(fmt.Errorf("%w: no result %s after the command's timeout", ErrUnresponsive, KillGrace))
		return runner.Result{}, hint.Wrap(ErrUnresponsive, "the sandbox was killed; the next command gets a new one")
	case <-ctx.Done():
		_ = c.send(request{Type: typeKill, ID: id})
		t := time.NewTimer(KillGrace)
		defer t.Stop()
		select {
		case <-cl.result:
		case <-t.C:
			c.fail(fmt.Errorf("%w: no result %s after a kill", ErrUnresponsive, KillGrace))
		}
		return runner.Result{}, fmt.Errorf("sandbox agent exec: %w", ctx.Err())
	}
	if !ok {
		return runner.Result{}, c.lost(cl)
	}
	if rep.StartError != "" {
		return runner.Result{}, fmt.Errorf("%w: %s", ErrStart, rep.StartError)
	}
	return resultOf(rep, time.Since(start)), nil
}

// lost reports a command whose channel died: ErrNotStarted when the agent
// never accepted it, ErrDied when it did.
func (c *Conn) lost(cl *call) error {
	c.mu.Lock()
	accepted, why := cl.accepted, c.dead
	c.mu.Unlock()
	if accepted {
		return fmt.Errorf("%w: %v", ErrDied, why)
	}
	return fmt.Errorf("%w: %v", ErrNotStarted, why)
}
