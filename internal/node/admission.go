package node

import (
	"sync"

	"github.com/exechost/exechost/internal/bridge"
)

// DefaultMaxRuns is a node's default limit on system.run invokes in
// flight. A gateway with default limits sends at most config.DefaultExecs
// (256) execs in flight across all its nodes, so the node's own bound is
// a backstop of the same size: it stops a gateway with raised limits, or
// a flood of invokes, from running unbounded processes and goroutines
// here (each run holds a process, its pipes and a goroutine).
const DefaultMaxRuns = 256

// runSlots counts system.run invokes in flight against Options.MaxRuns.
type runSlots struct {
	mu sync.Mutex
	n  int
}

// admitRun takes a slot for one system.run, or answers BUSY naming the
// limit and how to raise it. release gives the slot back (a no-op when
// busy); calling it more than once is harmless.
func (r *Runner) admitRun() (release func(), busy *bridge.Error) {
	limit := r.opts.MaxRuns
	if limit <= 0 {
		limit = DefaultMaxRuns
	}
	nid := r.NodeID()
	s := &r.runs
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n >= limit {
		return func() {}, bridge.Errorf(bridge.CodeBusy,
			"node %s already runs %d commands, its limit; retry when one finishes (hint: raise it with `exechost node run --max-runs N`)", nid, s.n)
	}
	s.n++
	return sync.OnceFunc(func() {
		s.mu.Lock()
		s.n--
		s.mu.Unlock()
	}), nil
}
