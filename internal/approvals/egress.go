package approvals

import (
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
