package kubernetes

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/sandbox/agent"
)

// pool keeps size pods started and attached for scopes not seen yet, so a
// new session's first command does not wait for scheduling, image and
// container start. One goroutine (fill) refills it, one pod at a time.
type pool struct {
	b    *Backend
	size int
	wake chan struct{}

	mu     sync.Mutex
	ready  []warm
	closed bool
}

// warm is one ready pod of the pool.
type warm struct {
	name string
	conn *agent.Conn
}

func newPool(b *Backend, size int) *pool {
	return &pool{b: b, size: size, wake: make(chan struct{}, 1)}
}

// take returns a ready pod whose agent is alive, or a nil conn when there
// is none; dead ones found on the way are deleted.
func (p *pool) take() (string, *agent.Conn) {
	for {
		p.mu.Lock()
		if len(p.ready) == 0 {
			p.mu.Unlock()
			return "", nil
		}
		w := p.ready[0]
		p.ready = p.ready[1:]
		p.mu.Unlock()
		p.kick()
		if w.conn.Err() == nil {
			return w.name, w.conn
		}
		_ = p.b.deletePod(context.Background(), w.name)
	}
}

// kick wakes fill.
func (p *pool) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// names returns the pool's pods.
func (p *pool) names() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.ready))
	for _, w := range p.ready {
		out = append(out, w.name)
	}
	return out
}

// PoolReady returns how many warm pods are ready now.
func (b *Backend) PoolReady() int {
	b.pool.mu.Lock()
	defer b.pool.mu.Unlock()
	return len(b.pool.ready)
}

// fill keeps the pool at its size until ctx ends. A pod that fails to
// start is retried after a pause that doubles up to a minute, so a broken
// image does not make a pod a second.
func (p *pool) fill(ctx context.Context) {
	if p.size <= 0 {
		return
	}
	pause := time.Second
	for ctx.Err() == nil {
		p.mu.Lock()
		need := len(p.ready) < p.size
		p.mu.Unlock()
		if !need {
			select {
			case <-ctx.Done():
				return
			case <-p.wake:
			}
			continue
		}
		name, conn, err := p.b.startPod(ctx, poolScope, "")
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
			pause = min(2*pause, time.Minute)
			continue
		}
		pause = time.Second
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			conn.Close()
			_ = p.b.deletePod(ctx, name)
			return
		}
		p.ready = append(p.ready, warm{name, conn})
		p.mu.Unlock()
	}
}

// close deletes the pool's pods (after fill has returned).
func (p *pool) close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	var errs []error
	for _, w := range ready {
		w.conn.Close()
		errs = append(errs, p.b.deletePod(ctx, w.name))
	}
	return errors.Join(errs...)
}
