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
	// Egress is set instead of Network when "network" is a list of
	// host[:port] patterns (egress.go).
	Egress []string
	// Unsupported is deny or warn: what a kernel that cannot confine does.
	Unsupported string
	// Sockets are named unix sockets (absolute or "~/…") that stay
	// reachable; every other socket directory is out of the run's view.
	// nil defers to the next level.
	Sockets []string
	// Hidden are secrets to hide besides the default hidden set
	// (DefaultHidden). Levels add up: no level can un-hide what another
	// hides.
	Hidden []string
	// Readable are entries of the default hidden set (or paths beneath
	// one) opened deliberately. nil defers to the next level.
	Readable []string
	// WritablePersistence are persistence paths (Persistence) opened for
	// writing deliberately: exact paths, or ".git/hooks" / ".git/config"
	// for the run's repository. nil defers to the next level.
	WritablePersistence []string
	Extra               Extra
}

var knownConfine = []string{"writable", "network", "unsupported", "sockets", "hidden", "readable", "writablePersistence"}

// ResolvedConfine is the confinement policy one agent's "confine" members
// ask for. Resolved.Confine is nil when no level has one: the built-in
// confinement of the security mode applies (docs/policy.md). Having one
// makes confinement apply even under security=full, and a kernel that
// cannot enforce it refuses the run unless unsupported says warn.
type ResolvedConfine struct {
	// Sources maps each word ("writable", "network", "unsupported",
	// "sockets", "hidden", "readable", "writablePersistence") to the level
	// that supplied the value ("agents.<id>", "agents.*", "defaults" or
	// "built-in"); for hidden, which adds up, every level that added to
	// it, joined by " + ".
	Sources map[string]string `json:"sources"`
	// Writable are the extra writable roots, "~" expanded.
	Writable []string `json:"writable,omitempty"`
	// Network and Unsupported are "" when no level sets a valid one.
	Network     confine.Network     `json:"network,omitempty"`
	Unsupported confine.Unsupported `json:"unsupported,omitempty"`
	// Egress is the egress list when the network word is one (Network is
	// then none): the names the egress proxy may reach for the run.
	Egress []string `json:"egress,omitempty"`
	// Sockets are the named sockets that stay reachable, "~" expanded.
	Sockets []string `json:"sockets,omitempty"`
	// Hidden are the secrets hidden besides the default hidden set, from
	// every level, "~" expanded.
	Hidden []string `json:"hidden,omitempty"`
	// Readable are the default hidden entries opened, "~" expanded.
	Readable []string `json:"readable,omitempty"`
	// WritablePersistence are the persistence paths opened for writing:
	// absolute, or RepoHooks / RepoConfig.
	WritablePersistence []string `json:"writablePersistence,omitempty"`
}

// The repository-relative persistence names writablePersistence accepts:
// they stand for the run's repository's hooks directory and config file.
const (
	RepoHooks  = ".git/hooks"
	RepoConfig = ".git/config"
)

func (c *Confine) clone() *Confine {
	if c == nil {
		return nil
	}
	d := *c
	d.Writable = slices.Clone(c.Writable)
	d.Egress = slices.Clone(c.Egress)
	d.Sockets = slices.Clone(c.Sockets)
	d.Hidden = slices.Clone(c.Hidden)
	d.Readable = slices.Clone(c.Readable)
	d.WritablePersistence = slices.Clone(c.WritablePersistence)
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
// invalid value skipped; hidden adds up over every level. An invalid
// entry of a list is skipped and reported: it can only open less (for
// hidden, nothing can be hidden by a name that is not a path).
func (r *Resolved) resolveConfine(levels []confineLevel, home string) {
	rc := ResolvedConfine{Sources: map[string]string{}}
	for _, w := range confineWords {
		rc.Sources[w] = SourceBuiltIn
	}
	var asked, doneN, doneU bool
	done := map[string]bool{}
	// paths takes one level's list of word w when no earlier level set
	// it, keeping the entries accept passes.
	paths := func(l confineLevel, w string, list []string, dst *[]string, accept func(string) (string, string)) {
		if list == nil || done[w] {
			return
		}
		done[w] = true
		rc.Sources[w] = l.name
		*dst = []string{}
		for _, e := range list {
			p, why := accept(e)
			if why != "" {
				r.Skipped = append(r.Skipped, fmt.Sprintf("%s.confine.%s %q %s; it is ignored", l.name, w, e, why))
				continue
			}
			if !slices.Contains(*dst, p) {
				*dst = append(*dst, p)
			}
		}
	}
	abs := func(e string) (string, string) {
		p := policy.ExpandHome(strings.TrimSpace(e), home)
		if !filepath.IsAbs(p) {
			return "", "is not an absolute path or ~/…"
		}
		return filepath.Clean(p), ""
	}
	var hiddenFrom []string
	for _, l := range levels {
		if l.c == nil {
			continue
		}
		asked = true
		paths(l, "writable", l.c.Writable, &rc.Writable, abs)
		paths(l, "sockets", l.c.Sockets, &rc.Sockets, abs)
		paths(l, "readable", l.c.Readable, &rc.Readable, func(e string) (string, string) {
			p, why := abs(e)
			if why == "" && !underAny(p, DefaultHidden(home)) {
				return "", "is not in the default hidden set (nothing to open)"
			}
			return p, why
		})
		paths(l, "writablePersistence", l.c.WritablePersistence, &rc.WritablePersistence, func(e string) (string, string) {
			if t := strings.TrimSuffix(strings.TrimSpace(e), "/"); t == RepoHooks || t == RepoConfig {
				return t, ""
			}
			return abs(e)
		})
		if l.c.Hidden != nil {
			// Hidden adds up: every level's list applies.
			var add []string
			done["hidden"] = false
			paths(l, "hidden", l.c.Hidden, &add, abs)
			for _, p := range add {
				if !slices.Contains(rc.Hidden, p) {
					rc.Hidden = append(rc.Hidden, p)
				}
			}
			hiddenFrom = append(hiddenFrom, l.name)
		}
		if !doneN && rc.resolveEgress(r, l) {
			doneN = true
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
	if len(hiddenFrom) > 0 {
		rc.Sources["hidden"] = strings.Join(hiddenFrom, " + ")
	}
	if asked {
		r.Confine = &rc
	}
}

// confineWords are the words of a "confine" member, in the order
// Sources and `approvals get` show them.
var confineWords = []string{"writable", "network", "unsupported", "sockets", "hidden", "readable", "writablePersistence"}

// underAny reports whether p (clean, absolute) is one of roots or beneath
// one; a root with "*" matches as filepath.Match does.
func underAny(p string, roots []string) bool {
	for _, r := range roots {
		for q := p; ; q = filepath.Dir(q) {
			if ok, _ := filepath.Match(r, q); ok {
				return true
			}
			if q == "/" {
				break
			}
		}
	}
	return false
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
			return p.network(c, where+".network", off)
		case "unsupported":
			return p.str(&c.Unsupported, where+".unsupported", off)
		case "sockets":
			return p.strings(&c.Sockets, where+".sockets", off)
		case "hidden":
			return p.strings(&c.Hidden, where+".hidden", off)
		case "readable":
			return p.strings(&c.Readable, where+".readable", off)
		case "writablePersistence":
			return p.strings(&c.WritablePersistence, where+".writablePersistence", off)
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
	list := func(k string, l []string) {
		if l == nil {
			return
		}
		co.key(k)
		o.w.buf.WriteByte('[')
		for i, s := range l {
			if i > 0 {
				o.w.buf.WriteByte(',')
			}
			o.w.string(s)
		}
		o.w.buf.WriteByte(']')
	}
	list("writable", c.Writable)
	co.network(c)
	co.str("unsupported", c.Unsupported)
	list("sockets", c.Sockets)
	list("hidden", c.Hidden)
	list("readable", c.Readable)
	list("writablePersistence", c.WritablePersistence)
	co.extra(c.Extra, knownConfine)
	co.close()
}
