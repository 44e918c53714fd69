// Package inflight is admission control: it counts work in flight against
// a total limit and a per-key limit (the key is an agent, a peer, or one
// constant for a single limit) and refuses work beyond them at once, so a
// flood of requests becomes clear BUSY answers rather than unbounded
// processes and goroutines.
//
// It decides only whether a slot is free; each caller words its own BUSY
// error (which limit, and the flag or setting that raises it). The limits
// are passed at each Acquire, so a configuration reload that lowers them
// refuses new work until enough finishes and never stops running work.
package inflight

import "sync"

// Limiter counts slots held, in total and per key. The zero value is ready
// to use; a Limiter must not be copied after first use.
type Limiter struct {
	mu    sync.Mutex
	total int
	byKey map[string]int
}

// Refusal says which limit is full.
type Refusal struct {
	// PerKey is true when the key's own limit is full, false when the
	// total is.
	PerKey bool
	// InFlight is how many slots that limit's holders have (the key's, or
	// everyone's).
	InFlight int
}

// Acquire takes one slot for key, unless key already holds perKey slots or
// all keys together hold total (a limit <= 0 is no limit; the per-key limit
// is checked first). release gives the slot back; calling it more than once
// is harmless. On refusal release is nil.
func (l *Limiter) Acquire(key string, total, perKey int) (release func(), refused *Refusal) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case perKey > 0 && l.byKey[key] >= perKey:
		return nil, &Refusal{PerKey: true, InFlight: l.byKey[key]}
	case total > 0 && l.total >= total:
		return nil, &Refusal{InFlight: l.total}
	}
	if l.byKey == nil {
		l.byKey = map[string]int{}
	}
	l.total++
	l.byKey[key]++
	return sync.OnceFunc(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.total--
		if l.byKey[key]--; l.byKey[key] <= 0 {
			delete(l.byKey, key)
		}
	}), nil
}

// InFlight reports the slots held in total and by key.
func (l *Limiter) InFlight(key string) (total, byKey int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, l.byKey[key]
}
