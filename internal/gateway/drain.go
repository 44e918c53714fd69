package gateway

import (
	"time"
)

// DefaultDrainTimeout is how long a stopping gateway lets running execs
// finish before it disconnects everyone.
const DefaultDrainTimeout = 30 * time.Second

// drainPoll is how often a draining gateway looks whether its execs are
// done.
const drainPoll = 100 * time.Millisecond

// inFlight counts runs that have not finished.
func (g *Gateway) inFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, r := range g.runs {
		if r.finished.IsZero() {
			n++
		}
	}
	return n
}

// drain refuses new execs and waits, up to the drain timeout, for running
// ones to finish and for the exec requests that wait on them to return,
// so a SIGTERM (a service restart) does not cut commands or their answers
// off; whatever is still running then fails with a clear error when the
// gateway disconnects. It logs once when it starts waiting and once when
// it ends, however long it waits.
//
// It polls rather than waiting on the runs: a finished run's answer is
// written by the connection after the exec handler returns, and nothing
// tells the gateway when that write is done, so waking the moment a run
// finishes would close the connection under the answer. The remaining
// window (between the handler's return and the write, within one poll)
// closes only with a bridge.Conn that waits for its replies on Close.
func (g *Gateway) drain() {
	g.mu.Lock()
	g.draining = true
	g.mu.Unlock()
	limit := g.opts.DrainTimeout
	if limit == 0 {
		limit = DefaultDrainTimeout
	}
	start := time.Now()
	deadline := start.Add(limit)
	busy := func() int { return g.inFlight() + int(g.execCalls.Load()) }
	n := busy()
	if n == 0 {
		return
	}
	g.log.Info("draining: waiting for running execs", "running", n, "timeout", limit)
	for ; n > 0; n = busy() {
		if time.Now().After(deadline) {
			g.log.Warn("drain timeout: disconnecting with execs still running", "running", n, "timeout", limit)
			return
		}
		time.Sleep(drainPoll)
	}
	g.log.Info("drained: every running exec finished", "waited", time.Since(start).Round(time.Millisecond))
}

// isDraining reports whether the gateway is shutting down.
func (g *Gateway) isDraining() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.draining
}

// Running reports how many execs are in flight (for status and tests).
func (g *Gateway) Running() int { return g.inFlight() }

// Draining reports whether the gateway is refusing new execs while it
// stops.
func (g *Gateway) Draining() bool { return g.isDraining() }
