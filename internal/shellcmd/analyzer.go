package shellcmd

import (
	"time"

	"github.com/exechost/exechost/internal/fschange"
)

// Analyzer is the analysis with its caches: the memo of whole analyses,
// the cache of parsed texts, the cache of names absent from search
// directories and the cache of file-system facts (each documented where
// it is defined). An execution host
// owns one (host.Engine); two Analyzers share nothing, so tests can run in
// parallel and compare a cached analyzer with an uncached one. Every
// cached result is exactly what a fresh analysis returns
// (TestCachesChangeNothing).
type Analyzer struct {
	memo   *analysisMemo // nil: no memo
	parsed *textCache    // nil: no parse cache
	absent *absentCache  // nil: no absent-name cache
	facts  *factCache    // nil: no fact cache
	// watch covers a memo entry's or a cached fact's paths
	// (Options.Watcher's WatchStat).
	watch func(paths []string) (fschange.Set, bool)
	// now is the clock the absent-name cache's racy window is measured
	// against.
	now func() time.Time
	// polled, when polled.polled is set, is every analysis's poll of the
	// fact cache's watches (Polled).
	polled lazyView
}

// Options configure an Analyzer.
type Options struct {
	// NoCache turns every cache off: each analysis reads the text and the
	// file system afresh.
	NoCache bool
	// NoFactCache turns the fact cache off alone: a text not in the memo
	// reads every path afresh.
	NoFactCache bool
	// Watcher takes the watches that vouch for the memo's entries and
	// the fact cache, and the poll each analysis checks them against: the
	// caller's (an engine passes its own, so that one poll serves a whole
	// decision, Polled). Nil: a Watcher of the Analyzer's own.
	Watcher *fschange.Watcher
	// Watch replaces Watcher's WatchStat for the memo's entries and the
	// fact cache; a Watch that always refuses makes the memo read its
	// facts on every reuse, and the fact cache read every path, as where
	// paths cannot be watched.
	Watch func(paths []string) (fschange.Set, bool)
	// Now replaces time.Now for the absent-name cache's racy window.
	Now func() time.Time
}

// New returns an Analyzer with its own caches (none with NoCache).
func New(opts Options) *Analyzer {
	w := opts.Watcher
	if w == nil {
		w = fschange.New()
	}
	z := &Analyzer{watch: opts.Watch, now: opts.Now, polled: lazyView{w: w}}
	if z.watch == nil {
		z.watch = w.WatchStat
	}
	if z.now == nil {
		z.now = time.Now
	}
	if !opts.NoCache {
		z.memo = &analysisMemo{m: map[memoKey]*memoEntry{}}
		z.parsed = &textCache{m: map[string]*parsedText{}}
		z.absent = &absentCache{dirs: map[string]*absentDir{}}
		if !opts.NoFactCache {
			z.facts = &factCache{m: map[factKey]*cachedFact{}}
		}
	}
	return z
}

// Watcher returns the Watcher whose Sets vouch for z's caches and whose
// poll its analyses take (Options.Watcher).
func (z *Analyzer) Watcher() *fschange.Watcher { return z.polled.w }

// uncached serves the package-level Analyze and AnalyzeArgv: it has no
// state, so a caller without an Analyzer of its own shares nothing.
var uncached = New(Options{NoCache: true})

// Analyze parses command text and returns every executable it would run
// when the interpreter runs its canonical form (Canonical). It never runs
// anything; it only stats files to resolve names. It uses no cache; an
// execution host analyses through its own Analyzer.
func Analyze(text string, env Env) Analysis { return uncached.Analyze(text, env) }

// AnalyzeArgv is Analyzer.AnalyzeArgv without caches.
func AnalyzeArgv(argv []string, env Env) Analysis { return uncached.AnalyzeArgv(argv, env) }

// Analyze is the package-level Analyze through z's caches.
func (z *Analyzer) Analyze(text string, env Env) Analysis {
	if z.memo != nil {
		if out, ok := z.memo.lookup(z, text, env); ok {
			return out
		}
	}
	if z.memo == nil {
		return z.analyze(text, env, nil)
	}
	var facts factLog
	out := z.analyze(text, env, &facts)
	z.memo.store(text, env, out, &facts)
	return out
}
