package gateway

import (
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/session"
)

// Retention of finished runs for exec.status and late node events.
const (
	RunRetention = time.Hour
	MaxRuns      = 1000
)

// run is one exec, in flight or recently finished.
type run struct {
	id      string
	key     session.Key
	host    policy.Host
	nodeID  string
	started time.Time

	done     chan struct{}
	finished time.Time // set before done is closed
	result   bridge.ExecResult
	err      error
}

func (g *Gateway) addRun(r *run) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pruneRunsLocked()
	g.runs[r.id] = r
}

func (g *Gateway) finishRun(r *run, res bridge.ExecResult, err error) {
	g.mu.Lock()
	r.result, r.err, r.finished = res, err, time.Now()
	g.mu.Unlock()
	close(r.done)
	g.observeRun(r, res, err)
}

// pruneRunsLocked forgets finished runs past retention, and the oldest
// finished ones beyond MaxRuns.
func (g *Gateway) pruneRunsLocked() {
	if len(g.runs) < MaxRuns {
		return
	}
	cutoff := time.Now().Add(-RunRetention)
	var oldest *run
	for id, r := range g.runs {
		if r.finished.IsZero() {
			continue
		}
		if r.finished.Before(cutoff) {
			delete(g.runs, id)
			continue
		}
		if oldest == nil || r.finished.Before(oldest.finished) {
			oldest = r
		}
	}
	if len(g.runs) >= MaxRuns && oldest != nil {
		delete(g.runs, oldest.id)
	}
}

// runSession returns the session of a run the gateway sent to nodeID.
func (g *Gateway) runSession(runID, nodeID string) (session.Key, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.runs[runID]
	if r == nil || r.nodeID != nodeID || r.host != policy.HostNode {
		return session.Key{}, false
	}
	return r.key, true
}

func (g *Gateway) status(runID string) (bridge.ExecStatusResult, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.runs[runID]
	if r == nil {
		return bridge.ExecStatusResult{}, bridge.Errorf(bridge.CodeNotFound, "unknown run %q (runs are kept for %s after they finish)", runID, RunRetention)
	}
	out := bridge.ExecStatusResult{RunID: r.id, Host: string(r.host), NodeID: r.nodeID, Status: bridge.RunRunning}
	if r.finished.IsZero() {
		return out, nil
	}
	if r.err != nil {
		out.Status, out.Error = bridge.RunFailed, bridge.AsError(r.err)
		return out, nil
	}
	res := r.result
	out.Status, out.Result = bridge.RunCompleted, &res
	return out, nil
}
