package approvals

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/policy"
)

// Confine is the "confine" member of defaults or of an agent: how the
// kernel confines that agent's runs (docs/policy.md, "Confinement").
// Fields hold the text as written; ResolveConfine decides what applies, so
// a typo can only fall back to a stricter value, never widen.
type Confine struct {
	// Writable are roots the run may write beneath besides its cwd and its
	// private temporary directory; "~/" is the host user's home. nil
	// defers to the next level; an empty list sets "nothing more".
	Writable []string
	// Network is none, loopback or all.
	Network string
	// Unsupported is deny or warn: what a kernel that cannot confine does.
	Unsupported string
	Extra       Extra
}

var knownConfine = []string{"writable", "network", "unsupported"}

// ResolvedConfine is the confinement policy one agent's "confine" members
// ask for. Resolved.Confine is nil when no level has one: the built-in
// confinement of the security mode applies (docs/policy.md). Having one
// makes confinement apply even under security=full, and a kernel that
// cannot enforce it refuses the run unless unsupported says warn.
type ResolvedConfine struct {
	// Sources maps "writable", "network" and "unsupported" to the level
	// that supplied the value ("agents.<id>", "agents.*", "defaults" or
	// "built-in").
	Sources map[string]string `json:"sources"`
	// Writable are the extra writable roots, "~" expanded.
	Writable []string `json:"writable,omitempty"`
	// Network and Unsupported are "" when no level sets a valid one.
	Network     confine.Network     `json:"network,omitempty"`
	Unsupported confine.Unsupported `json:"unsupported,omitempty"`
}

func (c *Confine) clone() *Confine {
	if c == nil {
		return nil
	}
	d := *c
	d.Writable = slices.Clone(c.Writable)
	d.Extra = c.Extra.clone()
	return &d
}

// confineLevel is one level's "confine" member, named for provenance.
type confineLevel struct {
	name string
	c    *Confine
}

// resolveConfine fills r.Confine from the levels (agent → "*" → defaults),
// each field from the first level holding a valid value, recording every
// invalid value skipped.
func (r *Resolved) resolveConfine(levels []confineLevel, home string) {
	rc := ResolvedConfine{Sources: map[string]string{"writable": SourceBuiltIn, "network": SourceBuiltIn, "unsupported": SourceBuiltIn}}
	var asked, doneW, doneN, doneU bool
	for _, l := range levels {
		if l.c == nil {
			continue
		}
		asked = true
		if !doneW && l.c.Writable != nil {
			doneW = true
			rc.Sources["writable"] = l.name
			rc.Writable = []string{}
			for _, w := range l.c.Writable {
				p := policy.ExpandHome(strings.TrimSpace(w), home)
				if !filepath.IsAbs(p) {
					r.Skipped = append(r.Skipped, fmt.Sprintf("%s.confine.writable %q is not an absolute path or ~/…; it is ignored", l.name, w))
					continue
				}
				rc.Writable = append(rc.Writable, filepath.Clean(p))
			}
		}
		if !doneN && l.c.Network != "" {
			switch n := confine.Network(l.c.Network); n {
			case confine.NetworkNone, confine.NetworkLoopback, confine.NetworkAll:
				rc.Network, doneN = n, true
				rc.Sources["network"] = l.name
			default:
				r.Skipped = append(r.Skipped, fmt.Sprintf("%s.confine.network %q is not valid (accepted: none, loopback, all); it is ignored", l.name, l.c.Network))
			}
		}
		if !doneU && l.c.Unsupported != "" {
			switch u := confine.Unsupported(l.c.Unsupported); u {
			case confine.UnsupportedDeny, confine.UnsupportedWarn:
				rc.Unsupported, doneU = u, true
				rc.Sources["unsupported"] = l.name
			default:
				r.Skipped = append(r.Skipped, fmt.Sprintf("%s.confine.unsupported %q is not valid (accepted: deny, warn); it is ignored", l.name, l.c.Unsupported))
			}
		}
	}
	if asked {
		r.Confine = &rc
	}
}

// confine decodes a "confine" member.
func (p *parser) confine(dst **Confine, where string, off int) error {
	if p.null(off) {
		return p.skipValue()
	}
	c := &Confine{}
	err := p.object(where, func(key string, off int) error {
		switch key {
		case "writable":
			return p.strings(&c.Writable, where+".writable", off)
		case "network":
			return p.str(&c.Network, where+".network", off)
		case "unsupported":
			return p.str(&c.Unsupported, where+".unsupported", off)
		}
		return p.extra(&c.Extra, where, key, knownConfine)
	})
	if err == nil {
		*dst = c
	}
	return err
}

// strings decodes an array of strings (null: not set).
func (p *parser) strings(dst *[]string, where string, off int) error {
	if p.null(off) {
		return p.skipValue()
	}
	if p.data[off] != '[' {
		return p.typeError(off, where, "an array of strings")
	}
	if _, err := p.dec.Token(); err != nil {
		return p.errAt(off, "%s: %v", where, err)
	}
	out := []string{}
	for i := 0; p.dec.More(); i++ {
		eoff := p.next()
		if p.data[eoff] != '"' {
			return p.typeError(eoff, fmt.Sprintf("%s[%d]", where, i), "a string")
		}
		var s string
		if err := p.dec.Decode(&s); err != nil {
			return p.errAt(eoff, "%s[%d]: %v", where, i, err)
		}
		out = append(out, s)
	}
	*dst = out
	_, err := p.dec.Token() // ']'
	return err
}

// confine writes a "confine" member when c is set.
func (o *objectWriter) confine(c *Confine) {
	if c == nil {
		return
	}
	o.key("confine")
	co := o.w.object()
	if c.Writable != nil {
		co.key("writable")
		o.w.buf.WriteByte('[')
		for i, s := range c.Writable {
			if i > 0 {
				o.w.buf.WriteByte(',')
			}
			o.w.string(s)
		}
		o.w.buf.WriteByte(']')
	}
	co.str("network", c.Network)
	co.str("unsupported", c.Unsupported)
	co.extra(c.Extra, knownConfine)
	co.close()
}
