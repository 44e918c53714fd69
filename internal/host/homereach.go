package host

import (
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/fschange"
)

// homeReach is the part of a run's jail that the home directory (and
// /etc) decide whatever the run's cwd: the hidden set (Engine.hidden) and
// the real path of each of the home's persistence paths. Every confined
// run needs it, and working it out takes an lstat(2) per entry of the
// default sets (a hundred system calls, a fifth of the CPU of a node's
// Engine.Run: issue 39), so the engine keeps it per home,
// confine.readable and confine.hidden for as long as package fschange
// vouches that nothing it was worked out from has changed (memos).
type homeReach struct {
	// gen tells one worked-out homeReach from any other of its engine
	// (Engine.homeGen): what is worked out from it is kept under it
	// (cwdjail.go).
	gen     uint64
	hidden  []string     // real paths, sorted
	persist []persistent // approvals.Persistence(home), in its order
}

// persistent is one of the home's persistence paths and its real path.
type persistent struct{ name, real string }

// lookups are what a homeReach was worked out from: the watches taken on
// them are what vouches for it.
type lookups struct {
	names []string // paths looked up (each lstat(2), each link read)
	lists []string // directories whose entries were listed
	reads []string // files whose content was read (each also looked up)
	// unwatchable: a lookup the watches would not cover (a pattern with
	// a wildcard above its last name); such a result is never kept.
	unwatchable bool
}

// lookedUp records the path p a lookup read (rec may be nil: nothing is
// recorded).
func (rec *lookups) lookedUp(p string) {
	if rec != nil {
		rec.names = append(rec.names, p)
	}
}

// read records the file p whose content was read (or would have been,
// had it existed).
func (rec *lookups) read(p string) {
	if rec != nil {
		rec.names = append(rec.names, p)
		rec.reads = append(rec.reads, p)
	}
}

// listed records the directory dir whose entries were read.
func (rec *lookups) listed(dir string) {
	if rec != nil {
		rec.lists = append(rec.lists, dir)
	}
}

// globbed records what filepath.Glob(pattern) reads: the directory of its
// last name. A wildcard above it would list directories found on the way,
// which the watches taken here do not follow.
func (rec *lookups) globbed(pattern string) {
	if rec == nil {
		return
	}
	dir := filepath.Dir(pattern)
	if strings.ContainsAny(dir, "*?[") {
		rec.unwatchable = true
		return
	}
	rec.lookedUp(dir)
	rec.listed(dir)
}

// covers reports whether every lookup of other is one of rec's.
func (rec *lookups) covers(other *lookups) bool {
	has := func(ps []string) map[string]bool {
		m := make(map[string]bool, len(ps))
		for _, p := range ps {
			m[p] = true
		}
		return m
	}
	names, lists, reads := has(rec.names), has(rec.lists), has(rec.reads)
	return !other.unwatchable &&
		!slices.ContainsFunc(other.names, func(p string) bool { return !names[p] }) &&
		!slices.ContainsFunc(other.lists, func(p string) bool { return !lists[p] }) &&
		!slices.ContainsFunc(other.reads, func(p string) bool { return !reads[p] })
}

// watch takes the watches that vouch for a result worked out, after it,
// from rec's lookups: the directories each lookup reads and what it ends
// at (fschange.Watch), and the entries of each listed directory
// (WatchStat), and the content of each file read (WatchContent). false:
// some are not watchable (a network file system, too
// many links), and nothing can be kept.
func (rec *lookups) watch(w *fschange.Watcher) ([]fschange.Set, bool) {
	if rec.unwatchable || len(rec.names) == 0 {
		return nil, false
	}
	names, ok := w.Watch(rec.names)
	if !ok {
		return nil, false
	}
	sets := []fschange.Set{names}
	if len(rec.lists) > 0 {
		lists, ok := w.WatchStat(rec.lists)
		if !ok {
			return nil, false
		}
		sets = append(sets, lists)
	}
	if len(rec.reads) > 0 {
		reads, ok := w.WatchContent(rec.reads)
		if !ok {
			return nil, false
		}
		sets = append(sets, reads)
	}
	return sets, true
}

// memos keeps results worked out from the file system (the zero value is
// ready): a home's homeReach (Engine.homes), a run's jail without its
// temporary directory (Engine.cwdJails, cwdjail.go). A kept one is handed
// out while every watch taken before it was worked out is unchanged; a
// change (an entry created, removed or renamed in a directory it looked
// in, a file it read written, a mount) works it out again, under watches
// taken first.
type memos[T any] struct {
	mu sync.Mutex // guards the rest
	m  map[string]*memo[T]
	// worked counts the times a result was worked out (a kept one handed
	// out is not).
	worked int
}

type memo[T any] struct {
	v    T
	rec  lookups        // what v was worked out from
	sets []fschange.Set // the watches that vouch for v; nil: none do
	used bool           // handed out kept at least once
	// cool counts calls left that work it out without watches: its
	// watches changed before vouching for a single reuse (a directory
	// it looks in changes all the time), so taking them again would only
	// add their cost to every run.
	cool int
}

// maxMemos bounds the results one memos keeps: one per distinct
// confine.readable and confine.hidden in the policy for homes, one per
// cwd and confine member for jails. A full one starts again empty.
const maxMemos = 64

// memoCooling is how many calls work a result out without watches after
// its watches changed before it was handed out kept once.
const memoCooling = 64

// get returns the result of key, kept or worked out by work (which
// records its lookups in the lookups it is given).
func (h *memos[T]) get(key string, w *fschange.Watcher, work func(*lookups) T) T {
	view := w.Poll()
	h.mu.Lock()
	m := h.m[key]
	var sets []fschange.Set
	used, cooling := false, false
	if m != nil {
		if cooling = m.cool > 0; cooling {
			m.cool--
		}
		sets, used = m.sets, m.used
	}
	h.mu.Unlock()
	if cooling {
		h.count()
		return work(nil)
	}
	if sets != nil {
		if !slices.ContainsFunc(sets, func(s fschange.Set) bool { return !view.Unchanged(s) }) {
			h.mu.Lock()
			m.used = true
			h.mu.Unlock()
			return m.v
		}
		if !used {
			h.mu.Lock()
			m.cool, m.sets = memoCooling, nil // then watched afresh
			h.mu.Unlock()
			h.count()
			return work(nil)
		}
	}
	// What is kept must be read after the watches that vouch for it are
	// taken (a change in between would otherwise go unseen for ever), so
	// they are taken on what the last result read; the first time, the
	// result is only handed out, and its look-ups are what the next call
	// watches (a key seen once, such as one of many cwds, costs no more
	// than working it out).
	sets, ok := nil, false
	var prev lookups
	if m != nil {
		prev = m.rec
		sets, ok = prev.watch(w)
	}
	var rec lookups
	v := work(&rec)
	h.count()
	if !ok || !prev.covers(&rec) {
		// Not vouched for: handed out this once, and the next call
		// watches what this one read.
		sets = nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil || len(h.m) >= maxMemos {
		h.m = map[string]*memo[T]{}
	}
	h.m[key] = &memo[T]{v: v, rec: rec, sets: sets}
	return v
}

func (h *memos[T]) count() {
	h.mu.Lock()
	h.worked++
	h.mu.Unlock()
}

// homeReachOf is the homeReach of a run confined as asked says (nil: the
// default jail).
func (e *Engine) homeReachOf(asked *approvals.ResolvedConfine) *homeReach {
	var readable, hidden []string
	if asked != nil {
		readable, hidden = asked.Readable, asked.Hidden
	}
	work := func(rec *lookups) *homeReach {
		res := newResolver()
		res.rec = rec
		hr := &homeReach{gen: e.homeGen.Add(1), hidden: e.hidden(res, readable, hidden)}
		for _, p := range approvals.Persistence(e.Home) {
			hr.persist = append(hr.persist, persistent{name: p, real: res.real(p)})
		}
		return hr
	}
	if e.NoCache {
		return work(nil)
	}
	// Paths hold no NUL: the key is unambiguous.
	key := e.Home + "\x00" + strings.Join(readable, "\x01") + "\x00" + strings.Join(hidden, "\x01")
	return e.homes.get(key, e.watcher(), work)
}
