package host

import (
	"errors"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/approvals"
)

// UsageFlushDelay is how long matched-pattern usage waits before it is
// written to exec-approvals.json. Stamping lastUsedAt is bookkeeping, not
// policy: doing it with a locked, fsynced rewrite of the file on every exec
// would cost more than the exec itself, so stamps from a burst of execs are
// coalesced into one write.
const UsageFlushDelay = 500 * time.Millisecond

type useKey struct{ agent, pattern string }

type useStamp struct {
	command, path string
	at            time.Time
}

// usageQueue holds stamps not yet written; the newest stamp per entry wins.
type usageQueue struct {
	mu      sync.Mutex
	pending map[useKey]useStamp
	timer   *time.Timer
	writing sync.Mutex // serialises flushes
}

func (q *usageQueue) add(e *Engine, k useKey, s useStamp) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.pending == nil {
		q.pending = map[useKey]useStamp{}
	}
	q.pending[k] = s
	if q.timer == nil {
		q.timer = time.AfterFunc(UsageFlushDelay, func() { _ = e.FlushUsage() })
	}
}

// FlushUsage writes every queued lastUsedAt stamp now. Close calls it; a
// process that exits without it loses at most UsageFlushDelay of
// last-used bookkeeping, never an allowlist entry.
func (e *Engine) FlushUsage() error {
	q := &e.usage
	q.writing.Lock()
	defer q.writing.Unlock()
	q.mu.Lock()
	batch := q.pending
	q.pending = nil
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
	q.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	_, err := e.approvalsStore().Update(func(f *approvals.File) error {
		for k, s := range batch {
			f.RecordUse(k.agent, k.pattern, s.command, s.path, s.at)
		}
		return nil
	})
	return err
}

// Close ends the engine's warm interpreters (runs in flight finish),
// writes pending bookkeeping and, when the engine owns its audit log
// (Options.CloseAudit), closes it. Runs after Close start afresh and go
// unaudited; call it when the process that owns the engine stops.
func (e *Engine) Close() error {
	e.closeWarm()
	e.closeJails()
	e.closeEgress()
	err := e.FlushUsage()
	// The kept rules' descriptors; a run after Close builds them anew.
	err = errors.Join(err, e.confineRules().Close())
	err = errors.Join(err, e.temps.close())
	if e.closeAudit != nil {
		err = errors.Join(err, e.closeAudit())
		e.closeAudit = nil
	}
	return err
}
