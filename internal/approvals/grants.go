package approvals

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/exechost/exechost/internal/policy"
)

// A grant is an allowlist entry that ends or applies only in part: an
// allow-always a human limited to this session, N minutes, this working
// directory or these arguments (an argument rule). "expiresAt" is in Unix
// milliseconds; "scope" holds "cwd" (the run's working directory must be
// it or below it) and "session" (the request's session key must be it).
// A grant applies only while all of that holds: it is never part of the
// path allowlist (Resolved.Patterns) or the standing argument rules
// (Resolved.ArgRules), and the execution host asks Grant.Active at every
// decision, with its own clock. An expired grant is a miss again.

// Scope limits where a grant applies. An empty field places no limit.
type Scope struct {
	Cwd     string `json:"cwd,omitempty"`
	Session string `json:"session,omitempty"`
	// Extra holds members this version does not know, kept on rewrite:
	// the entry is refused (it may limit more than this version can see).
	Extra Extra `json:"-"`
}

var knownScope = []string{"cwd", "session"}

// IsGrant reports whether e ends or is scoped.
func (e Entry) IsGrant() bool { return e.ExpiresAt != 0 || e.Scope != nil }

// grantRefusal returns why a grant can apply to nothing, or "".
func (e Entry) grantRefusal() string {
	if e.Scope == nil {
		return ""
	}
	if len(e.Scope.Extra) > 0 {
		return fmt.Sprintf("scope has a member this version does not know (%s): it may limit more than this version can enforce", e.Scope.Extra[0].Key)
	}
	if e.Scope.Cwd != "" && !strings.HasPrefix(e.Scope.Cwd, "/") {
		return fmt.Sprintf("scope.cwd %q is not an absolute directory", e.Scope.Cwd)
	}
	return ""
}

// Grant is a grant as the execution host applies it.
type Grant struct {
	Agent string
	// Rule is what the grant allows: its pattern, and its arguments when
	// it is an argument rule (Args nil: the path alone).
	Rule      policy.ArgRule
	ExpiresAt time.Time // zero: never
	Cwd       string
	Session   string
}

// Grants returns the grants that can apply (refused entries left out), in
// match order.
func (r Resolved) Grants() []Grant {
	var out []Grant
	for _, e := range r.Allowlist {
		if !e.Entry.IsGrant() || e.Refused != "" || e.Entry.Deny {
			continue
		}
		g := Grant{Agent: e.Agent, Rule: e.Entry.ArgRule()}
		if e.Entry.ExpiresAt != 0 {
			g.ExpiresAt = time.UnixMilli(e.Entry.ExpiresAt)
		}
		if s := e.Entry.Scope; s != nil {
			g.Cwd, g.Session = s.Cwd, s.Session
		}
		out = append(out, g)
	}
	return out
}

// Expired reports whether g has ended at now.
func (g Grant) Expired(now time.Time) bool { return !g.ExpiresAt.IsZero() && !now.Before(g.ExpiresAt) }

// Active reports whether g applies to a run at now in cwd for session.
func (g Grant) Active(now time.Time, cwd, session string) bool {
	if g.Expired(now) {
		return false
	}
	if g.Session != "" && g.Session != session {
		return false
	}
	if g.Cwd != "" {
		c, d := path.Clean(cwd), path.Clean(g.Cwd)
		if c != d && !strings.HasPrefix(c, strings.TrimSuffix(d, "/")+"/") {
			return false
		}
	}
	return true
}

// String is how prompts and audit records name a grant.
func (g Grant) String() string {
	s := g.Rule.Pattern
	if g.Rule.Args != nil {
		s = g.Rule.String()
	}
	if !g.ExpiresAt.IsZero() {
		s += " until " + g.ExpiresAt.UTC().Format(time.RFC3339)
	}
	if g.Cwd != "" {
		s += " in " + g.Cwd
	}
	if g.Session != "" {
		s += " for session " + strconv.Quote(g.Session)
	}
	return s
}

// scope decodes an entry's "scope" member.
func (p *parser) scope(dst **Scope, where string, off int) error {
	if p.null(off) {
		return p.skipValue()
	}
	s := &Scope{}
	err := p.object(where, func(key string, off int) error {
		switch key {
		case "cwd":
			return p.str(&s.Cwd, where+".cwd", off)
		case "session":
			return p.str(&s.Session, where+".session", off)
		}
		return p.extra(&s.Extra, where, key, knownScope)
	})
	if err == nil {
		*dst = s
	}
	return err
}

// grant writes an entry's grant members.
func (o *objectWriter) grant(e Entry) {
	if e.ExpiresAt != 0 {
		o.key("expiresAt")
		o.w.buf.WriteString(strconv.FormatInt(e.ExpiresAt, 10))
	}
	if e.Scope != nil {
		o.key("scope")
		so := o.w.object()
		so.str("cwd", e.Scope.Cwd)
		so.str("session", e.Scope.Session)
		so.extra(e.Scope.Extra, knownScope)
		so.close()
	}
}

// Describe returns how `approvals get` shows e: its kind ("allow",
// "deny", "refused") and the entry with its arguments, its end and its
// scope, and why it is refused.
func (e ResolvedEntry) Describe() (kind, text string) {
	kind, text = "allow", e.Entry.Pattern
	if e.Entry.IsArgRule() {
		text = e.Entry.Pattern + " " + strings.Join(e.Entry.Args, " ")
		if e.Entry.Deny {
			kind = "deny"
		}
	}
	if e.Entry.ExpiresAt != 0 {
		text += " until " + time.UnixMilli(e.Entry.ExpiresAt).UTC().Format(time.RFC3339)
	}
	if s := e.Entry.Scope; s != nil {
		if s.Cwd != "" {
			text += " in " + s.Cwd
		}
		if s.Session != "" {
			text += " for session " + strconv.Quote(s.Session)
		}
	}
	if e.Refused != "" {
		kind, text = "refused", text+" ("+e.Refused+")"
	}
	return kind, text
}
