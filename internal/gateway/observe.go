package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/metrics"
	"github.com/exechost/exechost/internal/policy"
)

// DefaultDrainTimeout is how long a stopping gateway lets running execs
// finish before it disconnects everyone.
const DefaultDrainTimeout = 30 * time.Second

// observeRun records a finished run in the metrics (a nil Metrics records
// nothing).
func (g *Gateway) observeRun(r *run, res bridge.ExecResult, err error) {
	m := g.opts.Metrics
	if m == nil {
		return
	}
	decision, outcome := string(policy.Allow), metrics.OutcomeSuccess
	var be *bridge.Error
	switch {
	case err != nil && errors.As(err, &be) && be.Code == bridge.CodeDenied:
		decision, outcome = string(policy.DenyRun), metrics.OutcomeDenied
	case err != nil:
		outcome = metrics.OutcomeFailure
	case res.TimedOut:
		outcome = metrics.OutcomeTimeout
	case !res.Success:
		outcome = metrics.OutcomeFailure
	}
	m.ObserveExec(string(r.host), decision, outcome, time.Since(r.started))
}

// liveChangedLocked publishes the connected node count; g.mu is held.
func (g *Gateway) liveChangedLocked() { g.opts.Metrics.SetConnectedNodes(len(g.live)) }

// watchApprovals keeps the pending-approvals gauge current until ctx ends.
func (g *Gateway) watchApprovals(ctx context.Context) {
	if g.opts.Metrics == nil {
		return
	}
	b := g.appr.broker
	ch, cancel := b.Subscribe()
	defer cancel()
	for {
		g.opts.Metrics.SetPendingApprovals(len(b.List()))
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-time.After(5 * time.Second): // expiries need no change event
		}
	}
}

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
// ones to finish, so a SIGTERM (a service restart) does not cut commands
// off mid-run; whatever is still running then fails with a clear error when
// the gateway disconnects.
func (g *Gateway) drain() {
	g.mu.Lock()
	g.draining = true
	g.mu.Unlock()
	limit := g.opts.DrainTimeout
	if limit == 0 {
		limit = DefaultDrainTimeout
	}
	deadline := time.Now().Add(limit)
	for n := g.inFlight(); n > 0; n = g.inFlight() {
		if time.Now().After(deadline) {
			g.log.Warn("drain timeout: disconnecting with execs still running", "running", n, "timeout", limit)
			return
		}
		g.log.Info("draining: waiting for running execs", "running", n)
		time.Sleep(100 * time.Millisecond)
	}
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
