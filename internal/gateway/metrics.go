package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/metrics"
	"github.com/exechost/exechost/internal/policy"
)

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
	b := g.prompts.broker
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
