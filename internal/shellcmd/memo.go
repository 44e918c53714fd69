package shellcmd

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/exechost/exechost/internal/fschange"
)

// Bounds of the analysis memo.
const (
	// maxMemoEntries: past this many analyses the memo starts over.
	maxMemoEntries = 256
	// maxMemoFacts: an analysis that reads more of the file system than
	// this is not remembered (checking it again would cost about as much
	// as redoing it).
	maxMemoFacts = 64
)

// memo remembers whole analyses of short request texts, each with every
// file-system fact it read: the result of each stat, lstat and symlink
// resolution, by path. An analysis is a pure function of its text, its Env
// and those facts (the parse cache and the absent-name cache only decide
// which facts are read, and the latter is validated by the directory
// facts recorded here), so a remembered analysis is reused only after
// every one of its facts has been read again and found identical: the
// same type, mode, device, inode, size, mtime and ctime, or the same
// error, or the same resolved path. A change anywhere the analysis looked
// — a file added, removed, replaced, chmod-ed or re-linked, a directory
// or ancestor renamed or re-linked — changes one of them (a rename or any
// entry change sets the directory's ctime, which userspace cannot set
// back). This is not a timestamp comparison: the facts are the results
// themselves, so no racy window applies.
//
// Only successful analyses of texts the parse cache would hold are
// remembered, and only where the facts can be read exactly (Linux).
//
// Reading every fact again is a system call per fact. Where package
// fschange can cover the facts' paths (local file systems), an entry also
// holds, from its first reuse on (a text seen once costs no watch), a
// watch Set (the Watcher's WatchStat) taken before its facts were last read;
// while the Set reports no change — nothing any lookup of those paths
// reads has been created, removed, renamed or had its attributes changed,
// no directory a path ends at has had an entry created, removed or
// renamed (its mtime and ctime, which a stat fact holds), no file a path
// ends at has been written, and no mount changed — the facts still hold
// without being read (one poll(2) stands for all of them). Once it reports a change the facts are read again,
// and the entry is dropped or, if they hold, watched afresh. An entry
// whose Set goes stale before vouching once (its directories change all
// the time: /tmp) is checked by reading its facts for a while instead.
//
// It is Analyzer.memo.
type analysisMemo struct {
	mu sync.Mutex
	m  map[memoKey]*memoEntry
	// hits counts reuses, for tests that must know the memo was used;
	// watchedHits those whose facts were vouched for by a watch Set.
	hits, watchedHits int
}

type memoKey struct {
	text string
	env  Env // Contained nil: it is in contained
	// contained is Env.Contained.key(): the walls, by value.
	contained string
}

func keyOf(text string, env Env) memoKey {
	c := env.Contained.key()
	env.Contained = nil
	return memoKey{text, env, c}
}

// memoEntry is an analysis and the facts it read. Both are read-only once
// stored; callers get a copy of the analysis. The rest is guarded by the
// memo's lock.
type memoEntry struct {
	out   Analysis
	facts []fact
	// watched vouches for the facts while unchanged (the zero Set never
	// does); vouched says whether it has yet.
	watched fschange.Set
	vouched bool
	// unwatched counts down reuses checked by reading the facts before
	// watching is tried again: after a Set went stale without vouching
	// for a single reuse (something in its directories keeps changing),
	// or when the paths cannot be watched at all.
	unwatched int
}

// Bounds of watching an entry's facts.
const (
	// rewatchAfter: reuses checked by reading the facts before an entry
	// whose Set went stale unused is watched again.
	rewatchAfter = 64
	// unwatchableFor: the same for an entry whose paths Watch refused.
	unwatchableFor = 1024
)

// factOp is a file-system read the analysis makes.
type factOp uint8

const (
	opStat factOp = iota + 1
	opLstat
	opEvalSymlinks
)

type factKey struct {
	op   factOp
	path string
}

type fact struct {
	factKey
	res factResult
}

// factResult is what a read returned, in the terms the analysis could
// depend on. It is comparable: equal results mean the analysis saw the
// same thing.
type factResult struct {
	errno syscall.Errno // 0: success
	stat  statFields    // stat and lstat (memo_linux.go)
	real  string        // EvalSymlinks' result
}

// factLog is what the memo keeps of an analysis's reads (readLog.export):
// each fact once, as first read.
type factLog struct {
	facts []fact
	// exact is false when a read could not be recorded exactly (no stat
	// data, an error without an errno, a relative path, too many facts,
	// a path that read differently twice): such an analysis is not
	// remembered.
	exact bool
}

// readLog is an analysis's file-system reads, the first of each kind
// and path, in order. It is the analysis's own cache of them (a command
// looks up the same few paths again and again: analyzer.remembered) and
// what the memo records of them (export). Most analyses read a dozen
// paths or so; they are kept in the analyzer's own array, found by a
// scan, and indexed once there are more.
type readLog struct {
	list []factRead
	buf  [16]factRead
	idx  map[factKey]int // past len(buf) reads
	// changed says a path read again read differently than at first: the
	// analysis depended on both, and is not remembered.
	changed bool
}

// factRead is one read: what its caller got.
type factRead struct {
	factKey
	fi   os.FileInfo
	real string
	err  error
}

func (l *readLog) find(k factKey) int {
	if l.idx != nil {
		if i, ok := l.idx[k]; ok {
			return i
		}
		return -1
	}
	for i := range l.list {
		if l.list[i].factKey == k {
			return i
		}
	}
	return -1
}

// add records r unless its path was read the same way before.
func (l *readLog) add(r factRead, res factResult, exact bool) {
	if i := l.find(r.factKey); i >= 0 {
		if first, ok := l.list[i].result(); !ok || !exact || first != res {
			l.changed = true
		}
		return
	}
	if l.list == nil {
		l.list = l.buf[:0]
	}
	l.list = append(l.list, r)
	switch {
	case l.idx != nil:
		l.idx[r.factKey] = len(l.list) - 1
	case len(l.list) > len(l.buf):
		l.idx = make(map[factKey]int, 2*len(l.list))
		for i := range l.list {
			l.idx[l.list[i].factKey] = i
		}
	}
}

// export records the reads in out for the memo, or leaves out.exact
// false when they cannot all be recorded exactly.
func (l *readLog) export(out *factLog) {
	if l.changed || len(l.list) > maxMemoFacts {
		return
	}
	facts := make([]fact, 0, len(l.list))
	for i := range l.list {
		r := &l.list[i]
		res, ok := r.result()
		if !ok || !strings.HasPrefix(r.path, "/") {
			return
		}
		facts = append(facts, fact{r.factKey, res})
	}
	out.facts, out.exact = facts, true
}

// result is r in the terms the memo compares; false when it cannot be
// recorded exactly.
func (r *factRead) result() (factResult, bool) {
	return resultOf(r.op, r.fi, r.real, r.err)
}

// resultOf converts a read's outcome (op's os.FileInfo, or resolved
// path, and error) into a factResult; false when it cannot be recorded
// exactly.
func resultOf(op factOp, fi os.FileInfo, real string, err error) (factResult, bool) {
	if op == opEvalSymlinks {
		if err != nil {
			return errFact(err)
		}
		return factResult{real: real}, true
	}
	return statFact(fi, err)
}

// statFact converts a stat or lstat outcome; false when it cannot be
// recorded exactly.
func statFact(fi os.FileInfo, err error) (factResult, bool) {
	if err != nil {
		return errFact(err)
	}
	f, ok := fieldsOf(fi)
	return factResult{stat: f}, ok
}

func errFact(err error) (factResult, bool) {
	var errno syscall.Errno
	if !errors.As(err, &errno) || errno == 0 {
		return factResult{}, false
	}
	return factResult{errno: errno}, true
}

// The analyzer's file-system reads: every stat, lstat and symlink
// resolution it makes goes through these (and the fact cache,
// factcache.go), so that the memo knows them all. These read afresh
// (through the fact cache); analyzer.remembered answers a path read
// before in the same analysis with that read.

func (a *analyzer) osStat(p string) (os.FileInfo, error) {
	v := a.fact(factKey{opStat, p})
	return v.fi, v.err
}

func (a *analyzer) osLstat(p string) (os.FileInfo, error) {
	v := a.fact(factKey{opLstat, p})
	return v.fi, v.err
}

func (a *analyzer) evalSymlinks(p string) (string, error) {
	v := a.fact(factKey{opEvalSymlinks, p})
	return v.real, v.err
}

// remembered is k's read as first made in this analysis, or a read made
// now.
func (a *analyzer) remembered(k factKey) factRead {
	if i := a.reads.find(k); i >= 0 {
		return a.reads.list[i]
	}
	v := a.fact(k)
	return factRead{k, v.fi, v.real, v.err}
}

// read performs the fact's read again.
func (k factKey) read() (factResult, bool) {
	switch k.op {
	case opStat:
		return readStat(k.path, true)
	case opLstat:
		return readStat(k.path, false)
	case opEvalSymlinks:
		r, err := filepath.EvalSymlinks(k.path)
		if err != nil {
			return errFact(err)
		}
		return factResult{real: r}, true
	}
	return factResult{}, false
}

// holds reports whether every fact reads the same again.
func (e *memoEntry) holds() bool {
	for _, f := range e.facts {
		if res, ok := f.read(); !ok || res != f.res {
			return false
		}
	}
	return true
}

// lookup returns a copy of the remembered analysis of text in env, if
// there is one and its facts still hold.
func (m *analysisMemo) lookup(z *Analyzer, text string, env Env) (Analysis, bool) {
	if len(text) > maxCachedTextLen {
		return Analysis{}, false
	}
	k := keyOf(text, env)
	m.mu.Lock()
	e := m.m[k]
	if e == nil {
		m.mu.Unlock()
		return Analysis{}, false
	}
	set, vouched, watch := e.watched, e.vouched, e.unwatched == 0
	if e.unwatched > 0 {
		e.unwatched--
	}
	m.mu.Unlock()
	if z.unchanged(set) {
		m.mu.Lock()
		m.hits++
		m.watchedHits++
		e.vouched = true
		m.mu.Unlock()
		return e.out.clone(), true
	}
	if set.Valid() && !vouched {
		watch = false // stale before it vouched once: read the facts a while
	}
	var ok bool
	if watch {
		// Watched afresh before the facts are read, so that the new
		// Set vouches only for what is read after it.
		set, ok = z.watch(e.paths())
	}
	if !e.holds() {
		return Analysis{}, false
	}
	m.mu.Lock()
	m.hits++
	if m.m[k] == e {
		switch {
		case ok:
			e.watched, e.vouched = set, false
		case watch:
			e.watched, e.unwatched = fschange.Set{}, unwatchableFor
		case set.Valid():
			e.watched, e.unwatched = fschange.Set{}, rewatchAfter
		}
	}
	m.mu.Unlock()
	return e.out.clone(), true
}

// store remembers a successful analysis whose facts were all recorded.
func (m *analysisMemo) store(text string, env Env, out Analysis, log *factLog) {
	if !out.OK || log == nil || !log.exact || len(text) > maxCachedTextLen {
		return
	}
	// Stored unwatched: most texts are never seen again, and watching
	// costs a system call per directory on the way to each path. The first
	// reuse watches the paths and then reads the facts again (lookup), so
	// the Set vouches only for what is read after it.
	e := &memoEntry{out: out.clone(), facts: log.facts}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.m) >= maxMemoEntries {
		clear(m.m)
	}
	m.m[keyOf(text, env)] = e
}

// paths lists the paths e's facts read.
func (e *memoEntry) paths() []string {
	ps := make([]string, 0, len(e.facts))
	for _, f := range e.facts {
		ps = append(ps, f.path)
	}
	return ps
}

// clone copies a's slices, so that a caller changing its copy cannot
// change the memo's.
// The segments' words share one array: a copy costs an allocation per
// kind of thing, not per segment.
func (a Analysis) clone() Analysis {
	a.Segments = slices.Clone(a.Segments)
	n := 0
	for _, s := range a.Segments {
		n += len(s.Argv) + len(s.Via) + len(s.Applied)
	}
	words := make([]string, 0, n)
	// cp copies s into words, nil staying nil; the copy's capacity ends
	// at its length, so that an append to it never reaches the next.
	cp := func(s []string) []string {
		if s == nil {
			return nil
		}
		i := len(words)
		words = append(words, s...)
		return words[i:len(words):len(words)]
	}
	for i := range a.Segments {
		s := &a.Segments[i]
		s.Argv, s.Via, s.Applied = cp(s.Argv), cp(s.Via), cp(s.Applied)
		s.Dynamic = slices.Clip(slices.Clone(s.Dynamic))
	}
	a.Builtins = slices.Clone(a.Builtins)
	a.Env = slices.Clone(a.Env)
	return a
}
