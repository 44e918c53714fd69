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
type Allowlist struct {
	exact map[string]string // lower-cased cleaned path → original pattern
	globs map[string][]glob // lower-cased literal dir prefix ("/usr/", "/") → globs
	order map[string]int    // original pattern → position, so the first listed pattern wins
	n     int
}

type glob struct {
	lower    string // lower-cased, home-expanded, cleaned glob
	original string
}

// CompileAllowlist compiles patterns (in priority order) for matching on a
// host whose user's home directory is home. Patterns that can never match
// (bare names, relative paths, invalid globs) are dropped; LintPattern says
// why to the user.
func CompileAllowlist(patterns []string, home string) *Allowlist {
	a := &Allowlist{exact: map[string]string{}, globs: map[string][]glob{}, order: map[string]int{}}
	for i, p := range patterns {
		orig := p
		p = ExpandHome(strings.TrimSpace(p), home)
		if !strings.HasPrefix(p, "/") || !doublestar.ValidatePattern(p) {
			continue
		}
		if _, dup := a.order[orig]; !dup {
			a.order[orig] = i
		}
		lower := strings.ToLower(path.Clean(p))
		meta := strings.IndexAny(lower, "*?[{\\")
		if meta < 0 {
			if _, ok := a.exact[lower]; !ok {
				a.exact[lower] = orig
			}
			a.n++
			continue
		}
		dir := lower[:strings.LastIndexByte(lower[:meta], '/')+1]
		a.globs[dir] = append(a.globs[dir], glob{lower: lower, original: orig})
		a.n++
	}
	return a
}

// Len returns how many usable patterns the allowlist holds.
func (a *Allowlist) Len() int { return a.n }

// Match returns the first pattern (in the order given to CompileAllowlist)
// that matches the absolute executable path p, or "".
func (a *Allowlist) Match(p string) string {
	if a == nil || !strings.HasPrefix(p, "/") {
		return ""
	}
	lower := strings.ToLower(path.Clean(p))
	best, bestPos := "", -1
	consider := func(pattern string) {
		pos := a.order[pattern]
		if bestPos < 0 || pos < bestPos {
			best, bestPos = pattern, pos
		}
	}
	if orig, ok := a.exact[lower]; ok {
		consider(orig)
	}
	try := func(dir string) {
		for _, g := range a.globs[dir] {
			if bestPos >= 0 && a.order[g.original] > bestPos {
				continue
			}
			if ok, err := doublestar.Match(g.lower, lower); err == nil && ok {
				consider(g.original)
			}
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
	return best
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
