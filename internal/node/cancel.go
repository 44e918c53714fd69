package node

import (
	"context"
	"sync"
)

// maxEarlyCancels bounds the remembered cancels whose invoke has not
// started yet; beyond it they are forgotten (that invoke then runs into
// its own timeout, as before cancels existed).
const maxEarlyCancels = 1024

// invokeCancels maps the invokes in flight to their cancel functions, so
// a node.invoke.cancel from the gateway (its caller went away) ends the
// invoke: a prompt it waits on is withdrawn and the command never runs.
// The zero value is ready to use.
type invokeCancels struct {
	mu    sync.Mutex
	live  map[string]context.CancelCauseFunc
	early map[string]bool // cancelled before the invoke started (the frames race)
}

// errInvokeCancelled is the cause of an invoke the gateway cancelled.
type errInvokeCancelled struct{ reason string }

func (e errInvokeCancelled) Error() string {
	return "the gateway cancelled this invoke: " + e.reason
}

// start derives the invoke's context and returns a function that must be
// called when the invoke ends.
func (c *invokeCancels) start(ctx context.Context, id string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	c.mu.Lock()
	if c.live == nil {
		c.live = map[string]context.CancelCauseFunc{}
	}
	if c.early[id] {
		delete(c.early, id)
		cancel(errInvokeCancelled{"before it started"})
	} else {
		c.live[id] = cancel
	}
	c.mu.Unlock()
	return ctx, func() {
		c.mu.Lock()
		delete(c.live, id)
		c.mu.Unlock()
		cancel(nil)
	}
}

// cancel ends invoke id, or remembers it if it has not started yet.
func (c *invokeCancels) cancel(id, reason string) {
	if id == "" || len(id) > 128 {
		return
	}
	c.mu.Lock()
	fn, ok := c.live[id]
	if !ok {
		if c.early == nil || len(c.early) >= maxEarlyCancels {
			c.early = map[string]bool{}
		}
		c.early[id] = true
	}
	c.mu.Unlock()
	if ok {
		fn(errInvokeCancelled{reason})
	}
}
