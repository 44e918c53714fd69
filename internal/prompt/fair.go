package prompt

import (
	"context"
	"fmt"
	"sync"

	"github.com/exechost/exechost/internal/policy"
)

// Fair-share bounds of one process's prompts (Fair). The approver admits
// asksock.DefaultMaxConnsPerPeer (16) connections from one process
// (asksock tests that DefaultFairTotal stays below it); staying below it,
// and giving each agent at most a few at a time, means one agent's flood
// of misses waits its turn instead of taking every connection so that
// other agents' prompts fall back at once.
const (
	DefaultFairTotal    = 12
	DefaultFairPerAgent = 4
)

// Fair admits prompts to Next fairly per agent: at most PerAgent of one
// agent's and Total in all run at once; the others wait (until their
// context ends), and a freed slot goes to the agent that waited longest
// for its turn, round robin, so a flooding agent queues behind itself.
type Fair struct {
	Next     Prompter
	PerAgent int // DefaultFairPerAgent when 0
	Total    int // DefaultFairTotal when 0

	mu      sync.Mutex
	active  map[string]int
	total   int
	waiters map[string][]chan struct{}
	order   []string // agents with waiters, in turn order
}

// Prompter asks a human about a request. It has host.Prompter's method
// set (host declares the engine's side; this package cannot import host,
// which sits above it), so every host.Prompter is one and Fair is a
// host.Prompter.
type Prompter interface {
	Prompt(ctx context.Context, req Request) (policy.Approval, string, error)
}

// NewFair wraps next with the default bounds.
func NewFair(next Prompter) *Fair { return &Fair{Next: next} }

var _ Prompter = (*Fair)(nil)

// Prompt implements Prompter.
func (f *Fair) Prompt(ctx context.Context, req Request) (policy.Approval, string, error) {
	agent := req.AgentID
	if err := f.acquire(ctx, agent); err != nil {
		return "", "", err
	}
	defer f.release(agent)
	return f.Next.Prompt(ctx, req)
}

func (f *Fair) limits() (perAgent, total int) {
	perAgent, total = f.PerAgent, f.Total
	if perAgent <= 0 {
		perAgent = DefaultFairPerAgent
	}
	if total <= 0 {
		total = DefaultFairTotal
	}
	return perAgent, total
}

// acquire takes a slot for agent, waiting for its turn.
func (f *Fair) acquire(ctx context.Context, agent string) error {
	per, total := f.limits()
	f.mu.Lock()
	if f.active == nil {
		f.active, f.waiters = map[string]int{}, map[string][]chan struct{}{}
	}
	if len(f.waiters[agent]) == 0 && f.active[agent] < per && f.total < total {
		f.active[agent]++
		f.total++
		f.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	if len(f.waiters[agent]) == 0 {
		f.order = append(f.order, agent)
	}
	f.waiters[agent] = append(f.waiters[agent], ch)
	f.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-ch: // granted meanwhile: hand it on
		f.releaseLocked(agent)
	default:
		f.dropWaiterLocked(agent, ch)
	}
	return fmt.Errorf("%w: waiting for a prompt slot of agent %q: %w", ErrUnreachable, agent, context.Cause(ctx))
}

func (f *Fair) release(agent string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releaseLocked(agent)
}

// releaseLocked frees agent's slot and grants free slots to waiting
// agents in turn.
func (f *Fair) releaseLocked(agent string) {
	per, total := f.limits()
	if f.active[agent]--; f.active[agent] <= 0 {
		delete(f.active, agent)
	}
	f.total--
	for i := 0; i < len(f.order) && f.total < total; {
		a := f.order[i]
		if f.active[a] >= per {
			i++
			continue
		}
		ch := f.waiters[a][0]
		f.waiters[a] = f.waiters[a][1:]
		f.active[a]++
		f.total++
		close(ch)
		f.order = append(f.order[:i], f.order[i+1:]...)
		if len(f.waiters[a]) > 0 {
			f.order = append(f.order, a) // its next waiter queues behind the others
		} else {
			delete(f.waiters, a)
		}
		i = 0
	}
}

func (f *Fair) dropWaiterLocked(agent string, ch chan struct{}) {
	ws := f.waiters[agent]
	for i, w := range ws {
		if w == ch {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) > 0 {
		f.waiters[agent] = ws
		return
	}
	delete(f.waiters, agent)
	for i, a := range f.order {
		if a == agent {
			f.order = append(f.order[:i], f.order[i+1:]...)
			break
		}
	}
}
