package policy

import (
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// Allowlist is a compiled set of allowlist patterns. Matching a path costs a
// few map lookups however many patterns there are: literal patterns live in
// a map keyed by their lower-cased path, and glob patterns are bucketed by
// the literal directory in front of their first wildcard, so only globs
// whose directory is an ancestor of the path are ever tried.
//
// Matching ignores case, but a match that holds only because case was
// ignored ("/x/head" against "/x/HEAD") is accepted only when SameFile
// says the pattern's own spelling and the path are the same file — true
// on a case-insensitive filesystem, false on Linux's usual ones, where
// they are two different programs. With SameFile nil such matches fail
// closed. The package stays pure: the caller supplies the file check.
type Allowlist struct {
	// SameFile reports whether two absolute paths name the same file (same
	// device and inode). The execution host sets it to a stat-based check
	// (approvals.SameFile); nil refuses every fold-only match.
	SameFile func(spelling, path string) bool

	exact map[string][]glob // lower-cased cleaned path → patterns, in order
	globs map[string][]glob // lower-cased literal dir prefix ("/usr/", "/") → globs
	order map[string]int    // original pattern → position, so the first listed pattern wins
	n     int
}

type glob struct {
	lower    string // lower-cased, home-expanded, cleaned glob
	clean    string // home-expanded, cleaned glob with its own case
	original string
	pos      int // order[original]: where the pattern is first listed
}

// CompileAllowlist compiles patterns (in priority order) for matching on a
// host whose user's home directory is home. Patterns that can never match
// (bare names, relative paths, invalid globs) are dropped; LintPattern says
// why to the user. Set SameFile on the result to accept fold-only matches
// that are the same file.
func CompileAllowlist(patterns []string, home string) *Allowlist {
	a := &Allowlist{exact: map[string][]glob{}, globs: map[string][]glob{}, order: map[string]int{}}
	for i, p := range patterns {
		orig := p
		p = ExpandHome(strings.TrimSpace(p), home)
		if !strings.HasPrefix(p, "/") || !doublestar.ValidatePattern(p) {
			continue
		}
		if _, dup := a.order[orig]; !dup {
			a.order[orig] = i
		}
		clean := path.Clean(p)
		g := glob{lower: strings.ToLower(clean), clean: clean, original: orig, pos: a.order[orig]}
		meta := strings.IndexAny(g.lower, "*?[{\\")
		if meta < 0 {
			a.exact[g.lower] = append(a.exact[g.lower], g)
			a.n++
			continue
		}
		dir := g.lower[:strings.LastIndexByte(g.lower[:meta], '/')+1]
		a.globs[dir] = append(a.globs[dir], g)
		a.n++
	}
	return a
}

// Len returns how many usable patterns the allowlist holds.
func (a *Allowlist) Len() int { return a.n }

// Result is the allowlist's full verdict on one path.
type Result struct {
	// Pattern is the first pattern (in the order given to CompileAllowlist)
	// that allows the path, or "".
	Pattern string
	// FoldOnly: Pattern matched only case-insensitively and was accepted
	// because SameFile said it is the same file.
	FoldOnly bool
	// Refused lists patterns listed before Pattern (all of them when there
	// is no Pattern) that matched only case-insensitively and were refused
	// as a different (or unprovable) file: near-misses worth telling the
	// user about.
	Refused []string
}

// Match returns the first pattern (in the order given to CompileAllowlist)
// that allows the absolute executable path p, or "".
func (a *Allowlist) Match(p string) string { return a.Explain(p).Pattern }

// Explain is Match with the reasons: whether the winning match was
// fold-only, and which earlier fold-only matches were refused.
func (a *Allowlist) Explain(p string) Result {
	if a == nil || !strings.HasPrefix(p, "/") {
		return Result{}
	}
	cpath := path.Clean(p)
	lower := strings.ToLower(cpath)
	type cand struct {
		g    glob
		fold Fold
	}
	var buf [4]cand // most paths match at most a few patterns
	cands := buf[:0]
	consider := func(g glob) {
		if ok, err := doublestar.Match(g.lower, lower); err != nil || !ok {
			return
		}
		cands = append(cands, cand{g: g, fold: caseVerdict(g.clean, cpath)})
	}
	for _, g := range a.exact[lower] {
		if g.clean == cpath {
			// A literal pattern spelled as the path: what both
			// doublestar matches in consider would find, without them.
			cands = append(cands, cand{g: g, fold: Fold{Matched: true}})
			continue
		}
		consider(g)
	}
	try := func(dir string) {
		for _, g := range a.globs[dir] {
			consider(g)
		}
	}
	// Walk every ancestor directory of the path, "/" included, and the
	// path itself as a directory: "/a/b/**" matches "/a/b" ("**" can be
	// zero segments).
	for i := 0; i < len(lower); i++ {
		if lower[i] == '/' {
			try(lower[:i+1])
		}
	}
	if lower != "/" {
		try(lower + "/")
	}
	// Earliest listed first; each candidate is accepted or refused in order.
	for i := 1; i < len(cands); i++ {
		for j := i; j > 0 && cands[j].g.pos < cands[j-1].g.pos; j-- {
			cands[j], cands[j-1] = cands[j-1], cands[j]
		}
	}
	var r Result
	for _, c := range cands {
		if !c.fold.FoldOnly {
			r.Pattern = c.g.original
			return r
		}
		if c.fold.Spelling != "" && a.SameFile != nil && a.SameFile(c.fold.Spelling, p) {
			r.Pattern, r.FoldOnly = c.g.original, true
			return r
		}
		r.Refused = append(r.Refused, c.g.original)
	}
	return r
}

// MatchAll matches every resolved executable path of a command. It returns
// the matching pattern per path ("" for a miss) and whether all matched. A
// command that starts no executable (only builtins the interpreter runs
// itself, such as `true` or `test -f x`) is satisfied: there is nothing to
// vouch for. Callers pass paths only from a successful analysis.
func (a *Allowlist) MatchAll(paths []string) (matched []string, satisfied bool) {
	matched = make([]string, len(paths))
	satisfied = true
	for i, p := range paths {
		matched[i] = a.Match(p)
		if matched[i] == "" {
			satisfied = false
		}
	}
	return matched, satisfied
}
