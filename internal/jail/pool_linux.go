package jail

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
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
}

// dirStamp is a directory a jail's Landlock layer granted entry by entry,
// as it was: its identity, times and entries (name to inode: the rules
// hold inodes, so a file replaced under its name is a change too).
type dirStamp struct {
	path         string
	ok           bool
	dev, ino     uint64
	mtime, ctime unix.Timespec
	// racy: it changed within racyWindow of the stamp, where a later
	// change in the same clock tick would not move its times, so its
	// entries are compared whatever its times say.
	racy    bool
	entries map[string]uint64
}

// racyWindow is how recent a directory's change may be, when it is
// stamped, for a later change in the same clock tick to go unseen.
const racyWindow = 50 * time.Millisecond

// stampDir stamps the directory at path at time now; ok is false when it
// cannot be read (missing: the jail granted nothing there).
func stampDir(path string, now time.Time) dirStamp {
	s := dirStamp{path: path}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return s
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return s
	}
	entries, err := readEntries(fd)
	if err != nil {
		return s
	}
	return dirStamp{path: path, ok: true, dev: uint64(st.Dev), ino: st.Ino, mtime: st.Mtim, ctime: st.Ctim, // Dev is narrower on some architectures
		racy: now.Sub(time.Unix(st.Ctim.Unix())) < racyWindow, entries: entries}
}

// readEntries lists the directory open as fd: each entry's name and inode
// (getdents64 gives both; os.ReadDir keeps no inode).
func readEntries(fd int) (map[string]uint64, error) {
	out := map[string]uint64{}
	buf := make([]byte, 16<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return out, nil
		}
		for b := buf[:n]; len(b) >= 19; {
			// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
			ino := binary.NativeEndian.Uint64(b[0:8])
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				return nil, fmt.Errorf("getdents: bad record length %d", reclen)
			}
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if nm := string(name); nm != "." && nm != ".." {
				out[nm] = ino
			}
			b = b[reclen:]
		}
	}
}

// stampListed stamps the directories a jail for o lists to grant their
// entries one by one: every directory above a protected or hidden path
// (confine's base layer walks down to each from /). Such a jail's rules
// name the entries as they were, so an entry made or replaced there later
// would be unreadable to its runs; the pool builds a new jail instead
// (fresh). With the view, /tmp and beneath are left out: runs see the
// view's own /tmp, fixed when the jail is built, whatever the host's does.
func stampListed(o *Options, now time.Time) []dirStamp {
	if !slices.Contains(o.Layers, confine.LayerLandlock) {
		return nil
	}
	view := slices.Contains(o.Layers, confine.LayerView)
	seen := map[string]bool{}
	var out []dirStamp
	add := func(p string) {
		for d := filepath.Dir(p); !seen[d]; d = filepath.Dir(d) {
			seen[d] = true
			if !(view && (d == "/tmp" || strings.HasPrefix(d, "/tmp/"))) {
				out = append(out, stampDir(d, now))
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
	return out
}

// fresh reports whether every directory listed still has the entries it
// was stamped with. Unchanged times vouch for that unless the stamp was
// racy; moved ones are checked by listing again (a lock file made and
// removed, as shells do in the home, changes nothing), and a directory
// found the same is stamped anew. Called with the pool's lock held.
func (e *entry) fresh(now time.Time) bool {
	for i := range e.listed {
		s := &e.listed[i]
		var st unix.Stat_t
		if unix.Stat(s.path, &st) != nil {
			if s.ok {
				return false
			}
			continue
		}
		if !s.ok || uint64(st.Dev) != s.dev || st.Ino != s.ino {
			return false
		}
		if !s.racy && st.Mtim == s.mtime && st.Ctim == s.ctime {
			continue
		}
		n := stampDir(s.path, now)
		if !n.ok || n.dev != s.dev || n.ino != s.ino || !maps.Equal(n.entries, s.entries) {
			return false
		}
		*s = n
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
		if ok && e.err == nil && e.j.Alive() && (p.trustListed || e.fresh(time.Now())) {
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
		e = &entry{done: make(chan struct{}), listed: stampListed(&o, time.Now())}
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
