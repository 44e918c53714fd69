package prompt

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/idprefix"
	"github.com/exechost/exechost/internal/policy"
)

// Pending is one prompt waiting for a human.
type Pending struct {
	// ID identifies the prompt; UIs accept any unique prefix of it.
	ID string
	// Request is what the execution host asks about.
	Request Request
	// Peer describes the connection it came from ("uid 1000 pid 4242").
	Peer string
	// ReceivedAt is when the approver got it; ExpiresAt is when the
	// execution host stops waiting and applies askFallback.
	ReceivedAt, ExpiresAt time.Time
}

// Kinds of Change.
const (
	ChangeAdded    = "added"
	ChangeResolved = "resolved"
	ChangeExpired  = "expired"
)

// Change tells a subscriber that the queue changed.
type Change struct {
	// Kind is ChangeAdded, ChangeResolved or ChangeExpired.
	Kind string
	// Pending is the prompt concerned.
	Pending Pending
	// Decision and By are set for ChangeResolved.
	Decision policy.Approval
	By       string
}

// subBuffer is how many changes a subscriber may lag behind before further
// changes are dropped for it.
const subBuffer = 256

// recentKeep is how many answered or expired ids the broker remembers, so a
// late answer gets "expired"/"already answered" instead of "unknown".
const recentKeep = 512

// Broker is the queue of prompts shared by every approver UI (the socket
// server submits, the line mode, TUI and web UI list and resolve). Each
// prompt waits on its own, so one slow human never blocks another prompt.
// The zero value is not usable; call NewBroker.
type Broker struct {
	mu      sync.Mutex
	pending map[string]*entry
	recent  map[string]string // id → "answered" | "expired"
	order   []string          // recent ids, oldest first, for eviction
	subs    map[int]chan Change
	nextSub int
	now     func() time.Time
}

type entry struct {
	p    Pending
	done chan answer // buffered 1; written once, under mu
}

type answer struct {
	a  policy.Approval
	by string
}

// NewBroker returns an empty queue.
func NewBroker() *Broker {
	return &Broker{
		pending: make(map[string]*entry),
		recent:  make(map[string]string),
		subs:    make(map[int]chan Change),
		now:     time.Now,
	}
}

// Submit queues p and blocks until a UI resolves it or ctx is done; in the
// latter case the prompt is removed as expired and the error wraps
// ErrExpired and ctx's error. ReceivedAt defaults to now.
func (b *Broker) Submit(ctx context.Context, p Pending) (policy.Approval, string, error) {
	if p.ID == "" {
		return "", "", fmt.Errorf("submit prompt: empty id")
	}
	if p.ReceivedAt.IsZero() {
		p.ReceivedAt = b.now()
	}
	e := &entry{p: p, done: make(chan answer, 1)}
	b.mu.Lock()
	if _, dup := b.pending[p.ID]; dup {
		b.mu.Unlock()
		return "", "", fmt.Errorf("submit prompt %s: %w", p.ID, ErrDuplicateID)
	}
	if _, seen := b.recent[p.ID]; seen {
		b.mu.Unlock()
		return "", "", fmt.Errorf("submit prompt %s: %w (id reused)", p.ID, ErrDuplicateID)
	}
	b.pending[p.ID] = e
	b.publishLocked(Change{Kind: ChangeAdded, Pending: p})
	b.mu.Unlock()

	select {
	case ans := <-e.done:
		return ans.a, ans.by, nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	if cur, ok := b.pending[p.ID]; ok && cur == e {
		delete(b.pending, p.ID)
		b.rememberLocked(p.ID, "expired")
		b.publishLocked(Change{Kind: ChangeExpired, Pending: p})
		b.mu.Unlock()
		return "", "", fmt.Errorf("prompt %s: %w: %w", p.ID, ErrExpired, context.Cause(ctx))
	}
	b.mu.Unlock()
	ans := <-e.done // resolved concurrently; the answer is already buffered
	return ans.a, ans.by, nil
}

// List returns the pending prompts, oldest first. Prompts past their
// ExpiresAt are left out: the execution host has stopped waiting for them.
func (b *Broker) List() []Pending {
	b.mu.Lock()
	out := b.listLocked()
	b.mu.Unlock()
	sortPending(out)
	return out
}

// Watch is List and Subscribe in one step: the prompts pending now, and
// the changes after them. A prompt added while a caller called Subscribe
// and then List would be in both, shown or answered twice; here each
// prompt is either in the list or announced on the channel, never both.
func (b *Broker) Watch() ([]Pending, <-chan Change, func()) {
	b.mu.Lock()
	list := b.listLocked()
	ch, stop := b.subscribeLocked()
	b.mu.Unlock()
	sortPending(list)
	return list, ch, stop
}

// listLocked returns the unexpired pending prompts, unsorted.
func (b *Broker) listLocked() []Pending {
	now := b.now()
	out := make([]Pending, 0, len(b.pending))
	for _, e := range b.pending {
		if !e.p.ExpiresAt.IsZero() && !now.Before(e.p.ExpiresAt) {
			continue
		}
		out = append(out, e.p)
	}
	return out
}

// sortPending orders prompts oldest first (ties by id), as List returns
// them.
func sortPending(ps []Pending) {
	slices.SortFunc(ps, func(x, y Pending) int {
		if c := x.ReceivedAt.Compare(y.ReceivedAt); c != 0 {
			return c
		}
		return strings.Compare(x.ID, y.ID)
	})
}

// Resolve answers the pending prompt whose id is idOrPrefix or starts with
// it (the prefix must be unique). by names who answered ("approver tui") and
// travels back to the execution host for its audit log. Unknown, ambiguous,
// expired and already answered ids, and decisions the prompt does not offer,
// are errors that say so.
func (b *Broker) Resolve(idOrPrefix string, a policy.Approval, by string) error {
	if !a.Valid() {
		return fmt.Errorf("resolve %s: %w", idOrPrefix, policy.ErrInvalidValue)
	}
	idOrPrefix = strings.TrimSpace(idOrPrefix)
	if idOrPrefix == "" {
		return fmt.Errorf("resolve: %w: empty id", ErrUnknownID)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.lookupLocked(idOrPrefix)
	if err != nil {
		return err
	}
	if !e.p.ExpiresAt.IsZero() && !b.now().Before(e.p.ExpiresAt) {
		return fmt.Errorf("resolve %s: %w at %s (askFallback applied)", e.p.ID, ErrExpired, e.p.ExpiresAt.Format(time.TimeOnly))
	}
	if !Offered(e.p.Request, a) {
		return fmt.Errorf("resolve %s: %w: %s (offered: %s)", e.p.ID, ErrNotOffered, a, strings.Join(Choices(e.p.Request), ", "))
	}
	delete(b.pending, e.p.ID)
	b.rememberLocked(e.p.ID, "answered")
	e.done <- answer{a: a, by: by}
	b.publishLocked(Change{Kind: ChangeResolved, Pending: e.p, Decision: a, By: by})
	return nil
}

func (b *Broker) lookupLocked(q string) (*entry, error) {
	matches := idprefix.Match(slices.Collect(maps.Keys(b.pending)), q, 1)
	switch len(matches) {
	case 1:
		return b.pending[matches[0]], nil
	case 0:
		if recent := idprefix.Match(slices.Collect(maps.Keys(b.recent)), q, 1); len(recent) > 0 {
			id := recent[0]
			if b.recent[id] == "answered" {
				return nil, fmt.Errorf("resolve %s: %w", id, ErrAnswered)
			}
			return nil, fmt.Errorf("resolve %s: %w (the execution host stopped waiting and applied askFallback)", id, ErrExpired)
		}
		return nil, hint.Wrap(fmt.Errorf("resolve %s: %w", q, ErrUnknownID), "it may have been answered or expired; list the pending prompts again")
	default:
		return nil, hint.Wrap(fmt.Errorf("resolve %s: %w: matches %s", q, ErrAmbiguousID, strings.Join(matches, ", ")), "type more of the id")
	}
}

func (b *Broker) rememberLocked(id, status string) {
	b.recent[id] = status
	b.order = append(b.order, id)
	if len(b.order) > recentKeep {
		delete(b.recent, b.order[0])
		b.order = b.order[1:]
	}
}

// Subscribe returns a channel of queue changes and a function that ends the
// subscription (and closes the channel). The channel is buffered; a
// subscriber that falls more than a buffer behind misses changes rather than
// blocking Submit or Resolve, so treat a Change as a hint and List for the
// truth.
func (b *Broker) Subscribe() (<-chan Change, func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.subscribeLocked()
}

// subscribeLocked registers a subscriber; the returned stop takes b.mu
// itself.
func (b *Broker) subscribeLocked() (<-chan Change, func()) {
	ch := make(chan Change, subBuffer)
	id := b.nextSub
	b.nextSub++
	b.subs[id] = ch
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			b.mu.Lock()
			delete(b.subs, id)
			b.mu.Unlock()
			close(ch)
		})
	}
}

func (b *Broker) publishLocked(c Change) {
	for _, ch := range b.subs {
		select {
		case ch <- c:
		default: // slow subscriber: drop rather than block the queue
		}
	}
}

// Choices returns the decisions a prompt offers: its Choices, or all three
// when the execution host did not say. Unknown names are ignored.
func Choices(r Request) []string {
	if len(r.Choices) == 0 {
		return []string{string(policy.AllowOnce), string(policy.AllowAlways), string(policy.Reject)}
	}
	var out []string
	for _, c := range r.Choices {
		if policy.Approval(c).Valid() && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// Offered reports whether a prompt offers decision a. Deny is always
// offered: refusing is never taken away from a human.
func Offered(r Request, a policy.Approval) bool {
	if a == policy.Reject {
		return true
	}
	return slices.Contains(Choices(r), string(a))
}
