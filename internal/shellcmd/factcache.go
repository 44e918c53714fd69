package shellcmd

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/exechost/exechost/internal/fschange"
)

// Bounds of the fact cache.
const (
	// maxCachedFacts: past this many paths the fact cache starts over
	// (the watches it took stay with package fschange, which bounds them
	// with fschange.MaxWatches).
	maxCachedFacts = 2048
	// watchFactAfter: a path is watched from its watchFactAfter-th read
	// on. Watching costs a system call or three per directory on the way,
	// several times the read it saves: a path read by one analysis alone
	// (the text's own words) is never watched.
	watchFactAfter = 2
	// readFactFor: reads made afresh, without watching, after a fact's
	// Set went stale before it answered once (its directory changes all
	// the time: /tmp), or after its path could not be watched.
	readFactFor = 64
)

// factCache answers a stat, lstat or symlink resolution that an earlier
// analysis made of the same path with that analysis's result, while a
// watch Set vouches that nothing the read depends on has changed. It is
// the memo's argument (memo.go) applied to one fact at a time, so that a
// text never seen before still reads nothing its predecessors read:
//
//   - the cached fact is the result itself (the os.FileInfo or the error,
//     the resolved path), never a timestamp compared with another;
//   - its Set (the Watcher's WatchStat: every directory the lookup searches,
//     every link on the way, and everything stat(2) reports of the final
//     file or directory, its entries and writes included) is taken before
//     the read whose result is kept, so any change after the read is an
//     event the Set reports;
//   - an analysis polls the watches once, when it first needs a cached
//     fact, and uses a fact only if its Set was unchanged at that poll (or
//     a later one); each fact it uses is then what a read made during the
//     analysis would have returned, as with an uncached analysis, whose
//     reads also happen at different moments while it runs;
//   - a fact whose Set reports a change is read again (watched afresh
//     first), and a path that fschange cannot cover (a relative path, a
//     network or FUSE file system, no inotify) is read every time.
//
// Facts answered from here are recorded in the analysis's reads like
// any other, so the memo still re-reads them itself before it trusts an
// analysis without a watch.
//
// It is Analyzer.facts; a nil cache reads everything.
type factCache struct {
	mu sync.Mutex
	m  map[factKey]*cachedFact
	// hits counts facts answered from the cache, for tests that must know
	// it was used.
	hits int
}

// cachedFact is what the cache knows of one read. value and watched are
// replaced, never changed, once stored: a reader may keep them after
// unlocking. All fields are guarded by the cache's lock.
type cachedFact struct {
	value factValue
	// watched vouches for value while unchanged (the zero Set never
	// does); vouched says whether it has yet.
	watched fschange.Set
	vouched bool
	// reads counts reads before the path is first watched; unwatched
	// counts down reads made afresh before it is watched again.
	reads, unwatched int
}

// factValue is one read's outcome: what the caller gets (fi, real, err)
// and what the memo records of it (res, exact).
type factValue struct {
	fi    os.FileInfo
	real  string
	err   error
	res   factResult
	exact bool
}

// readFact performs k's read.
func readFact(k factKey) factValue {
	var v factValue
	switch k.op {
	case opStat:
		v.fi, v.err = os.Stat(k.path)
	case opLstat:
		v.fi, v.err = os.Lstat(k.path)
	case opEvalSymlinks:
		v.real, v.err = filepath.EvalSymlinks(k.path)
	}
	v.res, v.exact = resultOf(k.op, v.fi, v.real, v.err)
	return v
}

// fact returns k's read, from the cache where a watch vouches for it, and
// records it in the analysis's reads.
func (a *analyzer) fact(k factKey) factValue {
	v := a.z.facts.get(a, k)
	a.reads.add(factRead{k, v.fi, v.real, v.err}, v.res, v.exact)
	return v
}

func (c *factCache) get(a *analyzer, k factKey) factValue {
	// A relative path depends on the cwd, which a watch of the path does
	// not cover: always read.
	if c == nil || !strings.HasPrefix(k.path, "/") {
		return readFact(k)
	}
	c.mu.Lock()
	e := c.m[k]
	if e == nil {
		if len(c.m) >= maxCachedFacts {
			clear(c.m)
		}
		c.m[k] = &cachedFact{reads: 1}
		c.mu.Unlock()
		return readFact(k)
	}
	set, value := e.watched, e.value
	c.mu.Unlock()
	if set.Valid() && a.view().Unchanged(set) {
		c.mu.Lock()
		c.hits++
		e.vouched = true
		c.mu.Unlock()
		return value
	}
	c.mu.Lock()
	watch := false
	switch {
	case e.unwatched > 0:
		e.unwatched--
	case set.Valid() && !e.vouched:
		// Stale before it answered once: something beside it keeps
		// changing, so watching costs more than it saves for a while.
		e.watched, e.unwatched = fschange.Set{}, readFactFor
	case e.reads < watchFactAfter-1:
		e.reads++
	default:
		watch = true
	}
	c.mu.Unlock()
	if !watch {
		return readFact(k)
	}
	// Watched before the read, so that the Set vouches only for what is
	// read after it.
	set, ok := a.z.watch([]string{k.path})
	v := readFact(k)
	c.mu.Lock()
	if c.m[k] == e {
		if ok && keepable(v) {
			e.value, e.watched, e.vouched = v, set, false
		} else {
			e.watched, e.unwatched = fschange.Set{}, readFactFor
		}
	}
	c.mu.Unlock()
	return v
}

// lazyView is one poll of the fact cache's watches, taken when first
// needed: after the analysis (or decision) it serves began, so that no
// fact it vouches for is older than that.
type lazyView struct {
	w      *fschange.Watcher // the Analyzer's (Options.Watcher)
	v      fschange.View
	polled bool
}

func (l *lazyView) get() fschange.View {
	if !l.polled {
		l.polled, l.v = true, l.w.Poll()
	}
	return l.v
}

// view is the analysis's one poll of the watches.
func (a *analyzer) view() fschange.View { return a.look.get() }

// Polled returns an Analyzer sharing z's caches whose analyses, and Stat,
// take v as their one poll of the fact cache's watches instead of polling
// themselves: a caller that also checks Sets of its own for one decision
// (exec-approvals.json's) polls once for all of them. v must have been
// polled after the decision began, and the returned Analyzer serves that
// decision alone.
func (z *Analyzer) Polled(v fschange.View) *Analyzer {
	c := *z
	c.polled = lazyView{w: z.polled.w, v: v, polled: true}
	return &c
}

// Stat is os.Stat of an absolute path through the fact cache: the result
// an earlier Stat or analysis read of it while a watch vouches that
// nothing it depends on has changed, or a read made now.
func (z *Analyzer) Stat(p string) (os.FileInfo, error) {
	a := analyzer{z: z, look: z.polled}
	v := z.facts.get(&a, factKey{opStat, p})
	return v.fi, v.err
}

// unchanged is fschange.Unchanged, against the decision's poll if z has
// one (Polled).
func (z *Analyzer) unchanged(s fschange.Set) bool {
	if z.polled.polled {
		return z.polled.v.Unchanged(s)
	}
	return fschange.Unchanged(s)
}

// keepable reports whether v may answer later analyses: only an exact
// result (as the memo keeps) that is a success or an answer about the path
// itself. A passing failure (EIO, ENOMEM, …) decides one analysis, never
// the ones after it.
func keepable(v factValue) bool {
	if !v.exact {
		return false
	}
	switch v.res.errno {
	case 0, syscall.ENOENT, syscall.ENOTDIR, syscall.EACCES, syscall.ELOOP:
		return true
	}
	return false
}
