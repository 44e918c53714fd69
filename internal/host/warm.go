package host

import (
	"context"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/jail"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/shellrun"
)

// Warm, single-use interpreters. A run in the interpreter pays for a start
// of this (large) binary: exec, the Go runtime, every package's
// initialisation. The engine keeps a few interpreter processes started
// ahead of need (shellrun.WarmArgv: past all of that, waiting on a private
// socket), hands the next interpreted run to one (runner.Spec.Warm) and
// starts a replacement once that run is done. Each process runs one plan and
// exits; nothing carries from one run to the next. What depends on the run
// is applied at hand-over, not at start: the working directory, the
// environment (the run's private TMPDIR), then, by the interpreter itself
// before it runs anything, the plan's confinement and bounds — exactly as
// a fresh start does it. A warm process is in a process group of its own
// from its start, with the parent-death signal, tracked by the reaper and
// killed with its group on timeout exactly as a fresh one.
//
// A confined run that starts through the launcher is handed one too: it
// is given the launcher's argv and becomes the command in place. Either
// way the hand-over carries the engine's kept base layer of the run's
// confinement (a ruleset descriptor, runner.BaseFD; see confineRules), so
// the process builds only the run's own layer.
//
// Fresh starts remain for PTY runs (a warm process has no terminal),
// unconfined direct starts and shell text, confined ones started from a
// restricted thread (confine.Confinement.InThread), platforms without the
// polled launcher (runner.WarmSupported) and whenever no warm process is
// ready. Where jails are built, an interpreted run under a policy is
// handed to its jail's own warm interpreter (jailInterpreter) and this
// pool serves only runs that start outside a jail, so it fills on its
// first use instead of at the engine's start.

const (
	// DefaultWarmInterpreters is the pool size daemons use unless told
	// otherwise: enough for a burst of two, small in memory.
	DefaultWarmInterpreters = 2
	// DefaultWarmIdle is how long a warm interpreter waits for a run
	// before it is ended; the pool refills on the next interpreted run.
	DefaultWarmIdle = 5 * time.Minute
	// warmReadyWithin bounds a warm interpreter's start; one slower than
	// this is killed and not used.
	warmReadyWithin = 30 * time.Second
)

// warmPool is an engine's warm interpreters.
type warmPool struct {
	size    int
	idle    time.Duration
	now     func() time.Time
	argv    []string
	env     []string
	starter *runner.WarmStarter

	mu       sync.Mutex
	ready    []warmEntry // oldest first
	starting int         // starts in flight
	out      int         // handed to runs that have not finished
	closed   bool
	released bool // the starter's thread is let go
	timer    *time.Timer
	changed  chan struct{} // closed and replaced on every change (waitReady)
	started  int           // warm processes ever made ready (tests)
	handed   int           // warm processes ever handed to a run (tests)
	lastErr  error         // the last failed start, for the record
	fills    sync.WaitGroup
}

type warmEntry struct {
	w  *runner.Warm
	at time.Time // when it became ready
}

// newWarmPool makes a pool; lazy leaves it empty until a run asks for a
// process (take, waitReady) instead of filling it at once.
func newWarmPool(size int, idle time.Duration, now func() time.Time, argv, env []string, lazy bool) *warmPool {
	if idle <= 0 {
		idle = DefaultWarmIdle
	}
	p := &warmPool{size: size, idle: idle, now: now, argv: argv, env: env,
		starter: runner.NewWarmStarter(), changed: make(chan struct{})}
	if !lazy {
		p.mu.Lock()
		p.fillLocked()
		p.mu.Unlock()
	}
	return p
}

// warm returns the engine's pool, building it (and starting its
// processes) on first use; nil when the pool is off or not supported.
func (e *Engine) warm() *warmPool {
	if e.WarmInterpreters <= 0 || !runner.WarmSupported() {
		return nil
	}
	e.warmMu.Lock()
	defer e.warmMu.Unlock()
	if e.warmPool == nil && !e.warmClosed {
		argv, err := shellrun.WarmArgv()
		if err != nil {
			return nil
		}
		// With jails, interpreted runs under a policy start in their
		// jail's warm interpreter (jailInterpreter), and this pool serves
		// only what starts outside one: it fills on its first use rather
		// than hold idle processes (issue 39: the node's idle PSS).
		lazy := jail.Supported && !e.NoJail && !jailOff
		e.warmPool = newWarmPool(e.WarmInterpreters, e.WarmIdle, e.now, argv, e.baseEnv(), lazy)
	}
	return e.warmPool
}

// closeWarm ends the engine's idle warm interpreters; runs already handed
// one finish.
func (e *Engine) closeWarm() {
	e.warmMu.Lock()
	p := e.warmPool
	e.warmPool, e.warmClosed = nil, true
	e.warmMu.Unlock()
	if p != nil {
		p.close()
	}
}

// take returns a ready warm process for a run, or nil. Its replacement
// starts when the run is done: a start of this binary takes a core for
// milliseconds, and on a small machine one started now would take it from
// the run that was just handed a process to be quick. When there was none
// to hand, the pool starts refilling at once. The caller gives the process
// to runner.Run and calls done after.
func (p *warmPool) take() *runner.Warm {
	p.mu.Lock()
	var w *runner.Warm
	var dead []*runner.Warm
	for len(p.ready) > 0 && w == nil {
		e := p.ready[0]
		p.ready = p.ready[1:]
		if e.w.Alive() {
			w = e.w
		} else {
			dead = append(dead, e.w) // killed by someone: not used
		}
	}
	if w != nil {
		p.out++
		p.handed++
	} else {
		p.fillLocked()
	}
	p.notifyLocked()
	p.mu.Unlock()
	for _, d := range dead {
		d.Close()
	}
	return w
}

// done says a run that took a warm process has finished with it (Run
// waited for it, or it was closed unused).
func (p *warmPool) done() {
	p.mu.Lock()
	p.out--
	p.fillLocked()
	p.releaseLocked()
	p.mu.Unlock()
}

// fillLocked starts processes up to the pool's size, one after another on
// one goroutine (a burst of starts would take the CPU from the runs).
func (p *warmPool) fillLocked() {
	n := p.size - len(p.ready) - p.starting
	if p.closed || n <= 0 {
		return
	}
	p.starting += n
	p.fills.Add(1)
	go p.fill(n)
}

func (p *warmPool) fill(n int) {
	defer p.fills.Done()
	for i := range n {
		p.mu.Lock()
		if p.closed {
			p.starting -= n - i
			p.releaseLocked()
			p.notifyLocked()
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		w, err := p.starter.Start(p.argv, p.env, warmReadyWithin)
		p.mu.Lock()
		p.starting--
		switch {
		case err != nil:
			p.lastErr = err // runs start afresh meanwhile
		case p.closed:
		default:
			p.ready = append(p.ready, warmEntry{w: w, at: p.now()})
			p.started++
			p.armLocked()
			w = nil
		}
		p.releaseLocked()
		p.notifyLocked()
		p.mu.Unlock()
		if w != nil {
			w.Close()
		}
	}
}

// armLocked arms the idle timer for the oldest ready process.
func (p *warmPool) armLocked() {
	if p.timer != nil || len(p.ready) == 0 || p.closed {
		return
	}
	wait := p.idle - p.now().Sub(p.ready[0].at)
	p.timer = time.AfterFunc(max(wait, time.Second), p.reapIdle)
}

// reapIdle ends the processes that have waited the idle period (by the
// pool's clock, which tests inject and call this with). They are not
// replaced until a run takes one.
func (p *warmPool) reapIdle() {
	p.mu.Lock()
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	now := p.now()
	var idle []*runner.Warm
	for len(p.ready) > 0 && now.Sub(p.ready[0].at) >= p.idle {
		idle = append(idle, p.ready[0].w)
		p.ready = p.ready[1:]
	}
	p.armLocked()
	p.notifyLocked()
	p.mu.Unlock()
	for _, w := range idle {
		w.Close()
	}
}

// close ends every ready process and waits for the starts in flight; the
// starter's thread goes once the last run handed a process finishes.
func (p *warmPool) close() {
	p.mu.Lock()
	p.closed = true
	ready := p.ready
	p.ready = nil
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.notifyLocked()
	p.mu.Unlock()
	for _, e := range ready {
		e.w.Close()
	}
	p.fills.Wait()
	p.mu.Lock()
	p.releaseLocked()
	p.mu.Unlock()
}

// releaseLocked lets the starter's thread go once the pool is closed and
// no process it started can still be alive: its end fires their
// parent-death signal.
func (p *warmPool) releaseLocked() {
	if p.closed && p.out == 0 && p.starting == 0 && !p.released {
		p.released = true
		p.starter.Close()
	}
}

func (p *warmPool) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// waitReady waits until n processes are ready (or ctx ends): tests and
// benchmarks measure a warm run, not a start.
func (p *warmPool) waitReady(ctx context.Context, n int) error {
	p.mu.Lock()
	p.fillLocked() // a lazy pool that was never used
	p.mu.Unlock()
	for {
		p.mu.Lock()
		got, ch, err := len(p.ready), p.changed, p.lastErr
		idle := p.starting == 0
		p.mu.Unlock()
		if got >= n {
			return nil
		}
		if idle && err != nil {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
