package gateway

import (
	"sync/atomic"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/session"
)

// Retention of finished runs for exec.status and late node events.
const (
	RunRetention = time.Hour
	MaxRuns      = 1000
	// MaxKeptOutput bounds the stdout+stderr bytes the gateway keeps for
	// finished runs whose result was already delivered (returned by exec,
	// or by exec.status once finished). Beyond it the oldest delivered
	// runs keep their exit status but lose their output, so memory does
	// not grow with output: 1,000 kept runs of 200 KB each would be
	// 200 MB. Runs still waiting for exec.status (background runs) keep
	// their output whatever this says, bounded by MaxRuns.
	MaxKeptOutput = 2 << 20
)

// finishedRuns lists finished runs in the order they finished (so by
// finished time, which finishRun sets under Gateway.mu), oldest first, for
// pruneRunsLocked to find the oldest without walking every run: a full
// gateway prunes on every exec, under the lock every exec takes. Entries
// of runs already pruned are skipped as they come up. Guarded by
// Gateway.mu.
type finishedRuns struct {
	order []*run
}

// keptOutput accounts the output of delivered runs against MaxKeptOutput,
// oldest delivery first. Guarded by Gateway.mu.
type keptOutput struct {
	bytes int
	order []*run
}

// run is one exec, in flight or recently finished.
type run struct {
	id      string
	key     session.Key
	host    policy.Host
	nodeID  string
	started time.Time

	// release gives back the run's admission slot (admission.go).
	release func()

	// ended is set once an event reported the run's end (finished,
	// denied, failed), so a failure is not reported twice.
	ended atomic.Bool

	done     chan struct{}
	finished time.Time // set before done is closed
	result   bridge.ExecResult
	err      error

	delivered bool // the result went to the agent (see keptOutput)
	dropped   bool // the output was dropped under MaxKeptOutput
}

// outputExpired replaces the output of a delivered run dropped under
// MaxKeptOutput, so exec.status says what happened instead of showing an
// empty output.
const outputExpired = "the output of this run is no longer kept by the gateway: it was returned with the result"

// deliveredLocked marks r's result as delivered, counts its output against
// MaxKeptOutput and drops the output of the oldest delivered runs beyond
// it.
func (g *Gateway) deliveredLocked(r *run) {
	if r.delivered || r.finished.IsZero() {
		return
	}
	r.delivered = true
	r.result.Wire = nil // it went out; exec.status encodes the text
	g.kept.bytes += len(r.result.Stdout) + len(r.result.Stderr)
	g.kept.order = append(g.kept.order, r)
	for g.kept.bytes > MaxKeptOutput && len(g.kept.order) > 0 {
		old := g.kept.order[0]
		g.kept.order[0] = nil
		g.kept.order = g.kept.order[1:]
		g.dropOutputLocked(old)
	}
	if len(g.kept.order) > 2*MaxRuns { // entries of pruned runs
		live := g.kept.order[:0]
		for _, k := range g.kept.order {
			if !k.dropped {
				live = append(live, k)
			}
		}
		clear(g.kept.order[len(live):])
		g.kept.order = live
	}
}

// dropOutputLocked forgets a delivered run's output.
func (g *Gateway) dropOutputLocked(r *run) {
	if !r.delivered || r.dropped {
		return
	}
	r.dropped = true
	g.kept.bytes -= len(r.result.Stdout) + len(r.result.Stderr)
	r.result.Stdout, r.result.Stderr = "", ""
	r.result.Truncated = true
	r.result.Error = outputExpired
}

// delivered marks r's result as returned to the agent.
func (g *Gateway) delivered(r *run) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.deliveredLocked(r)
}

func (g *Gateway) addRun(r *run) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pruneRunsLocked()
	g.runs[r.id] = r
}

func (g *Gateway) finishRun(r *run, res bridge.ExecResult, err error) {
	// The slot is free before anyone can see the run finished, so a
	// caller told it finished may start the next one.
	if r.release != nil {
		r.release()
	}
	g.mu.Lock()
	r.result, r.err, r.finished = res, err, time.Now()
	g.finished.order = append(g.finished.order, r)
	g.mu.Unlock()
	close(r.done)
	g.observeRun(r, res, err)
}

// pruneRunsLocked makes room for one more run when the gateway holds
// MaxRuns: it forgets the finished runs past retention and, if that is not
// enough, the oldest finished run. Runs in flight are never forgotten. It
// takes the oldest from finishedRuns, so it costs O(1) amortised instead
// of a walk over every run.
func (g *Gateway) pruneRunsLocked() {
	if len(g.runs) < MaxRuns {
		return
	}
	cutoff := time.Now().Add(-RunRetention)
	q := g.finished.order
	for len(q) > 0 {
		r := q[0]
		if g.runs[r.id] == r {
			if len(g.runs) < MaxRuns && !r.finished.Before(cutoff) {
				break
			}
			g.dropOutputLocked(r)
			delete(g.runs, r.id)
		}
		q[0] = nil
		q = q[1:]
	}
	g.finished.order = q
}

// nodeRun returns the run the gateway sent to nodeID under runID, or nil.
func (g *Gateway) nodeRun(runID, nodeID string) *run {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.runs[runID]
	if r == nil || r.nodeID != nodeID || r.host != policy.HostNode {
		return nil
	}
	return r
}

// hostRun returns the run of host h under runID, or nil.
func (g *Gateway) hostRun(runID string, h policy.Host) *run {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r := g.runs[runID]; r != nil && r.host == h {
		return r
	}
	return nil
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
	g.deliveredLocked(r)
	return out, nil
}
