package gateway

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/idprefix"
)

// MinPrefix is the shortest node id prefix that selects a node.
const MinPrefix = 6

// Selection errors, wrapped with the query and the candidates.
var (
	ErrNoNode        = errors.New("no node matches")
	ErrAmbiguousNode = errors.New("ambiguous node")
	ErrNodeRequired  = errors.New("node required")
)

// Candidate is a paired node as node selection sees it.
type Candidate struct {
	ID          string
	DisplayName string
	RemoteIP    string
	Connected   bool
}

// String names the node with its display name, address and state, as
// selection errors list candidates.
func (c Candidate) String() string {
	state := "disconnected"
	if c.Connected {
		state = "connected"
	}
	s := c.ID
	if c.DisplayName != "" {
		s += " (" + c.DisplayName
		if c.RemoteIP != "" {
			s += ", " + c.RemoteIP
		}
		s += ", " + state + ")"
	}
	return s
}

// Normalize is the display-name normal form used for matching: lower case,
// every run of non-alphanumeric characters replaced by one "-", trimmed of
// leading and trailing "-".
func Normalize(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	return b.String()
}

// Select resolves a node query with the design's rules, in order: exact
// node id, normalized display name, remote IP, node id prefix of at least
// MinPrefix characters. The first rule with matches decides; among several
// matches a single connected one wins; otherwise the error names every
// candidate so the caller can be precise next time.
func Select(nodes []Candidate, q string) (Candidate, error) {
	q = strings.TrimSpace(q)
	if q == "" {
		return Candidate{}, fmt.Errorf("%w: empty node name", ErrNoNode)
	}
	nq := Normalize(q)
	ids := make([]string, len(nodes))
	for i, c := range nodes {
		ids[i] = c.ID
	}
	byPrefix := idprefix.Match(ids, q, MinPrefix) // the exact id is the first rule
	rules := []struct {
		name  string
		match func(Candidate) bool
	}{
		{"node id", func(c Candidate) bool { return c.ID == q }},
		{"display name", func(c Candidate) bool { return nq != "" && Normalize(c.DisplayName) == nq }},
		{"remote IP", func(c Candidate) bool { return c.RemoteIP != "" && c.RemoteIP == q }},
		{"node id prefix", func(c Candidate) bool { return slices.Contains(byPrefix, c.ID) }},
	}
	for _, r := range rules {
		var m []Candidate
		for _, c := range nodes {
			if r.match(c) {
				m = append(m, c)
			}
		}
		if len(m) == 0 {
			continue
		}
		if len(m) == 1 {
			return m[0], nil
		}
		var live []Candidate
		for _, c := range m {
			if c.Connected {
				live = append(live, c)
			}
		}
		if len(live) == 1 {
			return live[0], nil
		}
		return Candidate{}, hint.Wrap(fmt.Errorf("%w: %q matches %d nodes by %s: %s", ErrAmbiguousNode, q, len(m), r.name, list(m)), "use the full node id")
	}
	short := ""
	if len(q) < MinPrefix {
		short = fmt.Sprintf("; an id prefix needs at least %d characters", MinPrefix)
	}
	if len(nodes) == 0 {
		return Candidate{}, hint.Wrap(fmt.Errorf("%w %q: no nodes are paired", ErrNoNode, q), "run `exechost node run --gateway URL` on the node, then `exechost nodes approve ID`")
	}
	return Candidate{}, fmt.Errorf("%w %q (paired nodes: %s%s)", ErrNoNode, q, list(nodes), short)
}

func list(cs []Candidate) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = c.String()
	}
	sort.Strings(s)
	return strings.Join(s, ", ")
}
