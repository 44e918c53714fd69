package audit

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Aggregation of repeated refusals. A log rotated by size lets whoever can
// be refused push older records out of it by being refused often (one
// agent refused 94,200 times in 5 s rotated an operator's record out of
// every file). An Aggregator decides which refusals are written in full:
// per kind (the caller decides what a kind is: who was refused, for what,
// why) the first Burst, then one per Interval; and of all kinds together
// at most GlobalRate per second. What it leaves out is counted: the next
// record of the kind carries the count (Allow's same), and Flush returns,
// per kind with refusals left out, the last of them and their count, so a
// flood that stops is still accounted for. The gateway (refusals of
// issued credentials) and every host engine (denied runs, per agent and
// denial code) use one each.

// Defaults of AggregatorOptions.
const (
	DefaultAggregateBurst    = 10
	DefaultAggregateInterval = 6 * time.Second
	DefaultAggregateKinds    = 4096
	DefaultAggregateRate     = 5
	DefaultAggregateBurstAll = 50
)

// AggregatorOptions configure an Aggregator; zero fields take the
// defaults above.
type AggregatorOptions struct {
	// Burst refusals of one kind are recorded in full before aggregation
	// starts; then one per Interval.
	Burst    int
	Interval time.Duration
	// MaxKinds bounds the kinds tracked at once; refusals of a new kind
	// beyond it count against the global limit only.
	MaxKinds int
	// GlobalRate (per second, burst GlobalBurst) bounds the records of all
	// kinds together.
	GlobalRate  float64
	GlobalBurst int
	// Now is the clock (tests inject one); default time.Now.
	Now func() time.Time
}

// Aggregator is safe for concurrent use.
type Aggregator struct {
	opts AggregatorOptions
	off  atomic.Bool

	mu      sync.Mutex
	global  *rate.Limiter
	dropped int // left out by the global limit since the last record
	kinds   map[string]*aggKind
}

type aggKind struct {
	lim        *rate.Limiter
	suppressed int
	last       Record // the last one left out, for Flush
}

// Pending is what Flush returns for one kind: the last refusal left out
// and how many were.
type Pending struct {
	Kind   string
	Count  int
	Record Record
}

// NewAggregator returns an Aggregator with o's bounds.
func NewAggregator(o AggregatorOptions) *Aggregator {
	if o.Burst <= 0 {
		o.Burst = DefaultAggregateBurst
	}
	if o.Interval <= 0 {
		o.Interval = DefaultAggregateInterval
	}
	if o.MaxKinds <= 0 {
		o.MaxKinds = DefaultAggregateKinds
	}
	if o.GlobalRate <= 0 {
		o.GlobalRate = DefaultAggregateRate
	}
	if o.GlobalBurst <= 0 {
		o.GlobalBurst = DefaultAggregateBurstAll
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Aggregator{
		opts:   o,
		global: rate.NewLimiter(rate.Limit(o.GlobalRate), o.GlobalBurst),
		kinds:  make(map[string]*aggKind),
	}
}

// Options returns the bounds in force (defaults filled in), for the texts
// that explain a count.
func (a *Aggregator) Options() AggregatorOptions { return a.opts }

// SetOff turns aggregation off (every refusal is recorded) or back on:
// tests' control, showing what the log looks like without it.
func (a *Aggregator) SetOff(off bool) { a.off.Store(off) }

// Allow reports whether a refusal of kind may be recorded now, how many of
// that kind were left out since its last record, and how many of other
// kinds the global limit left out. rec is kept, when left out, as the
// example Flush returns.
func (a *Aggregator) Allow(kind string, rec Record) (ok bool, same, others int) {
	if a.off.Load() {
		return true, 0, 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.opts.Now()
	k := a.kinds[kind]
	if k == nil {
		if len(a.kinds) >= a.opts.MaxKinds {
			for name, v := range a.kinds {
				if v.suppressed == 0 && v.lim.TokensAt(t) >= float64(a.opts.Burst) {
					delete(a.kinds, name)
				}
			}
		}
		if len(a.kinds) >= a.opts.MaxKinds {
			a.dropped++
			return false, 0, 0
		}
		k = &aggKind{lim: rate.NewLimiter(rate.Every(a.opts.Interval), a.opts.Burst)}
		a.kinds[kind] = k
	}
	if !k.lim.AllowN(t, 1) {
		k.suppressed++
		k.last = rec
		return false, 0, 0
	}
	if !a.global.AllowN(t, 1) {
		a.dropped++
		return false, 0, 0
	}
	same, others = k.suppressed, a.dropped
	k.suppressed, a.dropped = 0, 0
	return true, same, others
}

// Flush returns, for each kind with refusals left out, the last of them
// and their count, and starts counting again. The global limit's count
// stays for the next record Allow lets through.
func (a *Aggregator) Flush() []Pending {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []Pending
	for kind, k := range a.kinds {
		if k.suppressed == 0 {
			continue
		}
		out = append(out, Pending{Kind: kind, Count: k.suppressed, Record: k.last})
		k.suppressed, k.last = 0, Record{}
	}
	return out
}
