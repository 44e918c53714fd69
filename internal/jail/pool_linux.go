package jail

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/confine"
	"golang.org/x/sys/unix"
)

// Pool keeps built jails ready, one per Options.Key, so a run's start is
// a fork and an exec in a jail that already stands. At most Max are kept
// (least recently used beyond it are closed once no run uses them), and
// one idle longer than Idle is closed by Reap. A confinement that changes
// has another key: its runs get a new jail, never the old one; so does a
// home that gained an entry beside a protected one (stampListed). Jails are
// started from one thread the pool keeps (their parent-death signal
// belongs to it), so a pool must be Closed to let it go.
type Pool struct {
	exe   string
	max   int
	idle  time.Duration
	ready time.Duration
	now   func() time.Time

	// trustListed reuses a jail whose listed directories changed (the
	// tests' control for the check it turns off).
	trustListed bool

	reqs chan func()
	mu   sync.Mutex // guards jails, closed
	// jails by key; an entry whose j is nil is being started (done
	// closes when it is).
	jails  map[string]*entry
	closed bool
}

type entry struct {
	j    *Jail
	err  error
	done chan struct{}
	used time.Time
	runs int // leases not yet released
	// listed are the directories its Landlock layer granted entry by
	// entry, as they were before it was built; stale is set once one
	// changed: the entry left the pool and closes when its last run ends.
	listed []dirStamp
	stale  bool
	// racy: a listed directory changed within racyWindow of its stamp,
	// where a later change in the same clock tick would not move its
	// times; such a jail serves the run it was built for, then no other.
	racy bool
}

// dirStamp is a directory as stat saw it: a new, removed or renamed entry
// moves its times.
type dirStamp struct {
	path         string
	ok           bool
	dev, ino     uint64
	mtime, ctime unix.Timespec
}

// racyWindow is how recent a directory's change may be, when it is
// stamped, for a later change in the same clock tick to go unseen: a jail
// built over such a directory is not reused.
const racyWindow = 50 * time.Millisecond

func stampDir(path string) dirStamp {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return dirStamp{path: path}
	}
	return dirStamp{path: path, ok: true, dev: uint64(st.Dev), ino: st.Ino, mtime: st.Mtim, ctime: st.Ctim} // Dev is narrower on some architectures
}

// stampListed stamps the directories a jail for o lists to grant their
// entries one by one: every directory above a protected or hidden path
// (confine's base layer walks down to each from /). Such a jail's rules
// name the entries as they were, so a directory made beside them later
// would be unreadable to its runs; the pool builds a new jail instead
// (fresh). racy reports a change too recent for a later one to show.
func stampListed(o *Options, now time.Time) (out []dirStamp, racy bool) {
	if !slices.Contains(o.Layers, confine.LayerLandlock) {
		return nil, false
	}
	seen := map[string]bool{}
	add := func(p string) {
		for d := filepath.Dir(p); !seen[d]; d = filepath.Dir(d) {
			seen[d] = true
			s := stampDir(d)
			out = append(out, s)
			if s.ok && now.Sub(time.Unix(s.ctime.Unix())) < racyWindow {
				racy = true
			}
			if d == "/" || d == "." {
				break
			}
		}
	}
	for _, p := range append(slices.Clone(o.Confine.Protected), o.Confine.Hidden...) {
		add(p)
		if r, err := filepath.EvalSymlinks(p); err == nil && r != p {
			add(r)
		}
	}
	return out, racy
}

// fresh reports whether every directory listed is as it was stamped.
func (e *entry) fresh() bool {
	if e.racy {
		return false
	}
	for _, s := range e.listed {
		if stampDir(s.path) != s {
			return false
		}
	}
	return true
}

// PoolOption configures a Pool.
type PoolOption func(*Pool)

// WithExecutable sets the binary started as the jail server
// (os.Executable by default).
func WithExecutable(exe string) PoolOption { return func(p *Pool) { p.exe = exe } }

// WithMax bounds the jails kept (8 by default).
func WithMax(n int) PoolOption { return func(p *Pool) { p.max = n } }

// WithIdle sets how long an unused jail is kept (5 minutes by default).
func WithIdle(d time.Duration) PoolOption { return func(p *Pool) { p.idle = d } }

// WithClock sets the clock idleness is measured with.
func WithClock(now func() time.Time) PoolOption { return func(p *Pool) { p.now = now } }

// NewPool starts a pool's starter thread.
func NewPool(opts ...PoolOption) (*Pool, error) {
	p := &Pool{max: 8, idle: 5 * time.Minute, ready: 10 * time.Second, now: time.Now, reqs: make(chan func()), jails: map[string]*entry{}}
	for _, o := range opts {
		o(p)
	}
	if p.exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("%w: find this executable: %w", ErrJail, err)
		}
		p.exe = exe
	}
	go func() {
		runtime.LockOSThread() // for good: the jails' parent-death signal is this thread's
		for f := range p.reqs {
			f()
		}
	}()
	return p, nil
}

// Get returns the jail for o, started if none stands (or the one that
// stood has died), and the release to call once the run using it has
// ended: a jail is closed (evicted, reaped) only when no run uses it.
func (p *Pool) Get(o Options) (*Jail, func(), error) {
	if o.Layers == nil {
		o.Layers = AllLayers
	}
	key := o.Key()
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, nil, fmt.Errorf("%w: pool closed", ErrGone)
		}
		e, ok := p.jails[key]
		if ok && e.j == nil && e.err == nil {
			done := e.done
			p.mu.Unlock()
			<-done // bounded: start waits at most p.ready
			continue
		}
		if ok && e.err == nil && e.j.Alive() && (p.trustListed || e.fresh()) {
			e.runs++
			e.used = p.now()
			p.mu.Unlock()
			return e.j, p.release(e), nil
		}
		if ok { // failed, dead or stale: start afresh
			delete(p.jails, key)
			e.stale = true
			if e.j != nil && (e.runs == 0 || !e.j.Alive()) {
				go e.j.Close()
			}
		}
		listed, racy := stampListed(&o, time.Now())
		e = &entry{done: make(chan struct{}), listed: listed, racy: racy}
		p.jails[key] = e
		p.mu.Unlock()

		if o.Cgroup == "" && slices.Contains(o.Layers, confine.LayerLimits) {
			o.Cgroup = pidsCgroup(key)
		}
		var j *Jail
		var err error
		reply := make(chan struct{})
		p.reqs <- func() {
			j, err = start(o, p.exe, p.ready)
			close(reply)
		}
		<-reply // bounded: start waits at most p.ready
		p.mu.Lock()
		e.j, e.err = j, err
		close(e.done)
		if e.err != nil {
			delete(p.jails, key)
			p.mu.Unlock()
			return nil, nil, e.err
		}
		e.runs++
		e.used = p.now()
		p.evictLocked()
		p.mu.Unlock()
		return e.j, p.release(e), nil
	}
}

func (p *Pool) release(e *entry) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			e.runs--
			e.used = p.now()
			if e.stale && e.runs == 0 && e.j != nil {
				go e.j.Close() // left the pool while in use
			}
			p.evictLocked()
			p.mu.Unlock()
		})
	}
}

// evictLocked closes the least recently used unused jails beyond max.
func (p *Pool) evictLocked() {
	for len(p.jails) > p.max {
		var oldest string
		var at time.Time
		for k, e := range p.jails {
			if e.j != nil && e.runs == 0 && (oldest == "" || e.used.Before(at)) {
				oldest, at = k, e.used
			}
		}
		if oldest == "" {
			return // every one is in use: over max until runs end
		}
		j := p.jails[oldest].j
		delete(p.jails, oldest)
		go j.Close()
	}
}

// Reap closes the jails no run has used for longer than the pool's idle
// time, and returns how many.
func (p *Pool) Reap() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for k, e := range p.jails {
		if e.j != nil && e.runs == 0 && p.now().Sub(e.used) > p.idle {
			delete(p.jails, k)
			go e.j.Close()
			n++
		}
	}
	return n
}

// Len is how many jails stand (or are being started).
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.jails)
}

// Close closes every jail (killing their runs) and the starter thread.
func (p *Pool) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	var js []*Jail
	for k, e := range p.jails {
		if e.j != nil {
			js = append(js, e.j)
		}
		delete(p.jails, k)
	}
	p.mu.Unlock()
	for _, j := range js {
		j.Close()
	}
	close(p.reqs)
}

// pidsCgroup is the pids cgroup a jail with key is bounded in, when this
// process may make one: in the cgroup v1 pids hierarchy, or beneath the
// cgroup v2 root when it delegates pids; "" when neither (the jail falls
// back to RLIMIT_NPROC). Made and removed by the jail.
func pidsCgroup(key string) string {
	const v1 = "/sys/fs/cgroup/pids"
	if unix.Access(v1+"/cgroup.procs", unix.W_OK) == nil {
		return filepath.Join(v1, "exechost-jail-"+key)
	}
	const v2 = "/sys/fs/cgroup"
	b, err := os.ReadFile(v2 + "/cgroup.subtree_control")
	if err == nil && slices.Contains(strings.Fields(string(b)), "pids") && unix.Access(v2, unix.W_OK) == nil {
		return filepath.Join(v2, "exechost-jail-"+key)
	}
	return ""
}

// Layers builds (or finds) the jail for o and reports the layers it holds
// on this machine and those it misses (Missing); err when no jail can be
// built at all (every layer is then missing).
func (p *Pool) Layers(o Options) (held, missing []confine.Layer, err error) {
	j, release, err := p.Get(o)
	if err != nil {
		return nil, slices.Clone(AllLayers), err
	}
	defer release()
	return j.Held(), Missing(&o.Confine, j.Held()), nil
}

// Handed is how many runs warm processes took in the jails the pool keeps
// now (Jail.Handed): tests see that interpreted runs take the fast path.
func (p *Pool) Handed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, e := range p.jails {
		if e.j != nil {
			n += e.j.Handed()
		}
	}
	return n
}
