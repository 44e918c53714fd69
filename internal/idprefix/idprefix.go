// Package idprefix resolves an id a person typed: the whole id, or a
// prefix of it long enough to be deliberate. It is the one implementation
// of that rule for prompt ids and node ids; callers turn "none" and
// "several" into their own errors (unknown, ambiguous with the
// candidates), which is why it returns the matches rather than an error.
package idprefix

import (
	"slices"
	"strings"
)

// Match returns the ids q selects: exactly q when q is one of ids (an id
// always wins over a longer id it is a prefix of), else every id that
// starts with q, sorted, when q has at least minLen characters (minLen
// below 1 counts as 1; an empty q matches nothing). One match resolves q;
// none means unknown; several mean ambiguous, and the list names them so
// the person can type more.
func Match(ids []string, q string, minLen int) []string {
	if q == "" {
		return nil
	}
	if slices.Contains(ids, q) {
		return []string{q}
	}
	if len(q) < max(minLen, 1) {
		return nil
	}
	var out []string
	for _, id := range ids {
		if strings.HasPrefix(id, q) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
