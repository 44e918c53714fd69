package approvals

import (
	"fmt"
	"slices"
	"strings"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/egress"
)

// Egress by name: "confine.network" may be, instead of none, loopback or
// all, a list of host[:port] patterns (egress.ParsePattern) that a run may
// reach through exechost's egress proxy (docs/policy.md, "Egress by
// name"). The list is checked when the file is read: a bad pattern fails
// the load with its position, because a pattern that silently matched
// nothing would cut the network the user meant to open, and one read
// loosely could open more.

// network decodes "network": a string, or an array of egress patterns.
func (p *parser) network(c *Confine, where string, off int) error {
	if p.null(off) || p.data[off] != '[' {
		return p.str(&c.Network, where, off)
	}
	if err := p.strings(&c.Egress, where, off); err != nil {
		return err
	}
	for i, s := range c.Egress {
		if _, err := egress.ParsePattern(s); err != nil {
			return p.errAt(off, "%s[%d]: %v", where, i, err)
		}
	}
	return nil
}

// network writes "network": the list when there is one, else the word.
func (o *objectWriter) network(c *Confine) {
	if c.Egress != nil {
		o.key("network")
		o.w.buf.WriteByte('[')
		for i, s := range c.Egress {
			if i > 0 {
				o.w.buf.WriteByte(',')
			}
			o.w.string(s)
		}
		o.w.buf.WriteByte(']')
		return
	}
	o.str("network", c.Network)
}

// resolveEgress takes a level's egress list: the run's own network is
// none, and the list is what the egress proxy may reach for it. It
// reports whether the level set the network word. An entry that no longer
// parses (a Confine built by hand) is dropped and reported: it can only
// open less.
func (rc *ResolvedConfine) resolveEgress(r *Resolved, l confineLevel) bool {
	if l.c.Egress == nil {
		return false
	}
	rc.Network = confine.NetworkNone
	rc.Egress = []string{}
	for _, s := range l.c.Egress {
		p, err := egress.ParsePattern(s)
		if err != nil {
			r.Skipped = append(r.Skipped, l.name+".confine.network: "+err.Error()+"; it is ignored")
			continue
		}
		rc.Egress = append(rc.Egress, p.String())
	}
	rc.Sources["network"] = l.name
	return true
}

// EgressPatterns parses the resolved egress list (nil when the network
// word is not a list).
func (rc *ResolvedConfine) EgressPatterns() []egress.Pattern {
	if rc == nil || rc.Egress == nil {
		return nil
	}
	out := make([]egress.Pattern, 0, len(rc.Egress))
	for _, s := range rc.Egress {
		if p, err := egress.ParsePattern(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// NetworkText says what the network word asks for, in the words
// `approvals get` shows.
func (rc *ResolvedConfine) NetworkText() string {
	if rc.Egress != nil {
		if len(rc.Egress) == 0 {
			return "none; egress by name: no names (under ask, each is asked)"
		}
		return "none; egress by name: " + strings.Join(rc.Egress, ", ")
	}
	if rc.Network == "" {
		return "none"
	}
	return string(rc.Network)
}

// egressAdded is every egress pattern next has that cur has not: each
// lets a run reach a name it could not (a pattern that a wildcard of cur
// already covers is reported too; saying more can only ask for a review).
func egressAdded(cur, next ResolvedConfine) []string {
	if cur.Egress == nil && cur.Network == confine.NetworkAll {
		return nil // every name was reachable already
	}
	var out []string
	for _, p := range next.Egress {
		if !slices.Contains(cur.Egress, p) {
			out = append(out, p)
		}
	}
	return out
}

// AddEgress adds pattern (egress.ParsePattern's form) to the egress list
// of level ("defaults", "agents.<id>", as ResolvedConfine.Sources names
// it), for an allow-always answer about a connection. A level without a
// list gets one: the level that set the run's list is the one named, so
// entries already there are kept. It reports whether the file changed.
func AddEgress(f *File, level, pattern string) (bool, error) {
	p, err := egress.ParsePattern(pattern)
	if err != nil {
		return false, err
	}
	var c **Confine
	switch {
	case level == SourceDefaults:
		c = &f.Defaults.Confine
	case strings.HasPrefix(level, "agents."):
		id := strings.TrimPrefix(level, "agents.")
		if f.Agents == nil {
			f.Agents = map[string]*Agent{}
		}
		if f.Agents[id] == nil {
			f.Agents[id] = &Agent{}
		}
		c = &f.Agents[id].Confine
	default:
		return false, fmt.Errorf("egress: no level %q to add %s to (expected %q or \"agents.<id>\")", level, pattern, SourceDefaults)
	}
	if *c == nil {
		*c = &Confine{}
	}
	s := p.String()
	if slices.Contains((*c).Egress, s) {
		return false, nil
	}
	if (*c).Egress == nil {
		(*c).Egress = []string{}
	}
	(*c).Egress = append((*c).Egress, s)
	return true, nil
}
