package shellcmd

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
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
// themselves, so no racy window applies. What the memo saves is the walk,
// the resolution logic and their allocations; the system calls remain.
//
// Only successful analyses of texts the parse cache would hold are
// remembered, and only where the facts can be read exactly (Linux).
var memo = &analysisMemo{m: map[memoKey]*memoEntry{}}

type analysisMemo struct {
	mu sync.Mutex
	m  map[memoKey]*memoEntry
	// hits counts reuses, for tests that must know the memo was used.
	hits int
}

type memoKey struct {
	text string
	env  Env
}

// memoEntry is an analysis and the facts it read. Both are read-only once
// stored; callers get a copy of the analysis.
type memoEntry struct {
	out   Analysis
	facts []fact
}

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

// factLog records an analysis's facts, each once (the analyzer's own
// per-analysis caches make most reads happen once anyway).
type factLog struct {
	seen  map[factKey]bool
	facts []fact
	// exact is false once a read could not be recorded exactly (no stat
	// data, an error without an errno, a relative path, too many facts):
	// such an analysis is not remembered.
	exact bool
}

func newFactLog() *factLog { return &factLog{seen: map[factKey]bool{}, exact: true} }

func (l *factLog) add(k factKey, res factResult, ok bool) {
	if l == nil || !l.exact {
		return
	}
	if !ok || !strings.HasPrefix(k.path, "/") || len(l.facts) >= maxMemoFacts {
		l.exact = false
		return
	}
	if !l.seen[k] {
		l.seen[k] = true
		l.facts = append(l.facts, fact{k, res})
	}
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
// resolution it makes goes through these, so that the memo knows them all.

func (a *analyzer) osStat(p string) (os.FileInfo, error) {
	fi, err := os.Stat(p)
	res, ok := statFact(fi, err)
	a.facts.add(factKey{opStat, p}, res, ok)
	return fi, err
}

func (a *analyzer) osLstat(p string) (os.FileInfo, error) {
	fi, err := os.Lstat(p)
	res, ok := statFact(fi, err)
	a.facts.add(factKey{opLstat, p}, res, ok)
	return fi, err
}

func (a *analyzer) evalSymlinks(p string) (string, error) {
	r, err := filepath.EvalSymlinks(p)
	res, ok := factResult{real: r}, true
	if err != nil {
		res, ok = errFact(err)
	}
	a.facts.add(factKey{opEvalSymlinks, p}, res, ok)
	return r, err
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
func (m *analysisMemo) lookup(text string, env Env) (Analysis, bool) {
	if len(text) > maxCachedTextLen {
		return Analysis{}, false
	}
	k := memoKey{text, env}
	m.mu.Lock()
	e := m.m[k]
	m.mu.Unlock()
	if e == nil || !e.holds() {
		return Analysis{}, false
	}
	m.mu.Lock()
	m.hits++
	m.mu.Unlock()
	return e.out.clone(), true
}

// store remembers a successful analysis whose facts were all recorded.
func (m *analysisMemo) store(text string, env Env, out Analysis, log *factLog) {
	if !out.OK || log == nil || !log.exact || len(text) > maxCachedTextLen {
		return
	}
	e := &memoEntry{out: out.clone(), facts: log.facts}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.m) >= maxMemoEntries {
		clear(m.m)
	}
	m.m[memoKey{text, env}] = e
}

// clone copies a's slices, so that a caller changing its copy cannot
// change the memo's.
func (a Analysis) clone() Analysis {
	a.Segments = slices.Clone(a.Segments)
	for i := range a.Segments {
		s := &a.Segments[i]
		s.Argv, s.Via, s.Applied = slices.Clone(s.Argv), slices.Clone(s.Via), slices.Clone(s.Applied)
	}
	a.Builtins = slices.Clone(a.Builtins)
	return a
}
