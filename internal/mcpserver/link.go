package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/client"
	"github.com/exechost/exechost/internal/hint"
)

// Sentinel errors of a tool call that never got the gateway's answer. The
// MCP server turns both into tool results (IsError) and keeps running.
var (
	// ErrUnreachable means no connection to the gateway could be made.
	ErrUnreachable = errors.New("gateway unreachable")
	// ErrConnectionLost means the connection dropped while a call was in
	// flight, so its outcome is unknown.
	ErrConnectionLost = errors.New("lost the connection to the gateway")
)

// Reconnect and call limits. Every gateway call has a deadline, so a tool
// call never hangs on a dead or wedged gateway.
const (
	// DialTimeout bounds one connect attempt (TCP, WebSocket and the
	// connect handshake).
	DialTimeout = 10 * time.Second
	// MinBackoff and MaxBackoff space out reconnect attempts after
	// failures: a call arriving sooner waits for the backoff to end
	// (bounded by MaxBackoff) and then tries again, so the first call
	// after the gateway is back succeeds.
	MinBackoff = 250 * time.Millisecond
	MaxBackoff = 5 * time.Second
	// ShortCall bounds calls that the gateway answers from memory
	// (exec.status, session.events, nodes.list).
	ShortCall = 30 * time.Second
)

// DialFunc opens an authenticated connection to the gateway with role
// (always bridge.RoleAgent: the MCP server never acts as an operator). The
// cli package passes one that dials with client.Dial and its credential.
type DialFunc func(ctx context.Context, role string) (*client.Client, error)

// link is the server's lazily (re)connected agent connection. Its mutex
// guards the state only and is never held across a dial: one caller dials
// (single flight) while the others wait on the dialing channel, so a call
// never waits on the lock for up to DialTimeout.
type link struct {
	url  string
	dial DialFunc
	log  *slog.Logger

	mu       sync.Mutex
	conn     *client.Client
	dialing  chan struct{} // non-nil while a caller dials; closed when it is done
	fails    int
	next     time.Time // earliest next dial after a failure
	lastErr  error
	failedAt time.Time
	// waiting, when set, runs as a caller starts waiting for another's
	// dial (tests).
	waiting func()
}

// get returns the live connection, dialing when there is none. A caller
// that waited while another caller's dial failed gets that failure rather
// than dialing again at once.
func (l *link) get(ctx context.Context) (*client.Client, error) {
	start := time.Now()
	for {
		l.mu.Lock()
		if l.conn != nil {
			select {
			case <-l.conn.Done():
				l.log.Info("gateway connection closed; reconnecting on this call", "err", l.conn.Err())
				l.conn = nil
			default:
				c := l.conn
				l.mu.Unlock()
				return c, nil
			}
		}
		if l.lastErr != nil && l.failedAt.After(start) {
			err := l.lastErr
			l.mu.Unlock()
			return nil, err
		}
		if ch := l.dialing; ch != nil {
			l.mu.Unlock()
			if l.waiting != nil {
				l.waiting()
			}
			select {
			case <-ch:
				continue // connected, failed, or gave up: look again
			case <-ctx.Done():
				return nil, fmt.Errorf("waiting to connect to the gateway at %s: %w", l.url, context.Cause(ctx))
			}
		}
		ch := make(chan struct{})
		l.dialing = ch
		wait := time.Until(l.next)
		l.mu.Unlock()
		c, err := l.connect(ctx, wait)
		l.mu.Lock()
		l.dialing = nil
		close(ch)
		l.mu.Unlock()
		return c, err
	}
}

// connect waits out the backoff and dials, outside the lock; the caller
// holds the dialing turn.
func (l *link) connect(ctx context.Context, wait time.Duration) (*client.Client, error) {
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			// Not a failure of the gateway: the next caller dials.
			return nil, fmt.Errorf("waiting to reconnect to the gateway at %s: %w", l.url, context.Cause(ctx))
		}
	}
	dctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	c, err := l.dial(dctx, bridge.RoleAgent)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.fails++
		l.next = time.Now().Add(backoff(l.fails))
		l.lastErr = l.unreachable(err)
		l.failedAt = time.Now()
		l.log.Warn("gateway connect failed", "url", l.url, "attempt", l.fails, "err", err)
		return nil, l.lastErr
	}
	if l.fails > 0 {
		l.log.Info("gateway connection restored", "url", l.url, "afterFailures", l.fails)
	}
	l.fails, l.lastErr, l.next = 0, nil, time.Time{}
	l.conn = c
	return c, nil
}

// unreachable wraps a connect failure for the model: what failed, why, and
// what to check.
func (l *link) unreachable(err error) error {
	hint := "; is `exechost gateway` running?"
	why := err.Error()
	var we *bridge.Error
	var ne *net.OpError
	switch {
	case errors.As(err, &we) && we.Code == bridge.CodeUnauthorized:
		hint = " (hint: the MCP server needs the gateway's token: run it with the gateway's --state-dir or set EXECHOST_GATEWAY_TOKEN)"
	case errors.As(err, &ne):
		// The socket error says it all; the layers of wrapping above it
		// repeat the URL.
		why = ne.Error()
	case strings.Contains(why, "exechost gateway"):
		hint = "" // the dialer's error already says it
	}
	return fmt.Errorf("%w at %s: %s%s (this MCP server keeps running and reconnects on the next call)", ErrUnreachable, l.url, why, hint)
}

// backoff returns the wait after n consecutive failures.
func backoff(n int) time.Duration {
	d := MinBackoff
	for i := 1; i < n && d < MaxBackoff; i++ {
		d *= 2
	}
	return min(d, MaxBackoff)
}

// do runs call (one typed request, named method in errors) on the agent
// connection with a deadline. A call cut off by a dropped connection
// returns ErrConnectionLost and forgets the connection, so the next call
// reconnects.
func (l *link) do(ctx context.Context, method string, timeout time.Duration, call func(context.Context, *client.Client) error) error {
	c, err := l.get(ctx)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err = call(cctx, c)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, bridge.ErrClosed):
		l.forget(c)
		return fmt.Errorf("%w at %s during %s: %v; the outcome is unknown — check the system events or exec_status before retrying", ErrConnectionLost, l.url, method, err)
	case cctx.Err() != nil && ctx.Err() == nil:
		return hint.Wrap(fmt.Errorf("the gateway at %s did not answer %s within %s", l.url, method, timeout), "retry; a command started with yieldMs keeps running and exec_status reports it")
	}
	return err
}

// forget drops c if it is still the current connection.
func (l *link) forget(c *client.Client) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == c {
		l.conn = nil
	}
	c.Close("connection lost")
}

// close ends the current connection, if any.
func (l *link) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		l.conn.Close("mcp server exiting")
		l.conn = nil
	}
}
