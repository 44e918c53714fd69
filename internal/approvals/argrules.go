package approvals

import (
	"fmt"
	"slices"

	"github.com/exechost/exechost/internal/policy"
)

// An allowlist entry with "args" (or "deny") is an argument rule
// (policy.ArgRule): it allows the program only with matching arguments, or,
// with "deny": true, refuses it with them. Its "examples" and
// "counterExamples" are checked whenever the file is resolved; an entry
// whose check fails is refused — it applies to nothing, `approvals get`
// shows why (ResolvedEntry.Refused and a warning) — and the file is never
// rewritten for it.

// IsArgRule reports whether e constrains arguments rather than allowing its
// path alone. "args": [] counts (and is refused by the check), so an empty
// list can never widen into a path-only entry.
func (e Entry) IsArgRule() bool { return e.Args != nil || e.Deny }

// ArgRule returns e as a policy rule.
func (e Entry) ArgRule() policy.ArgRule {
	return policy.ArgRule{Pattern: e.Pattern, Args: e.Args, Deny: e.Deny}
}

// refusal returns why e applies to nothing, or "": an argument rule whose
// rule or examples do not check, or examples on a path-only entry (they
// would say something the entry does not enforce).
func (e Entry) refusal() string {
	if why := e.grantRefusal(); why != "" {
		return why
	}
	if !e.IsArgRule() {
		if len(e.Examples) > 0 || len(e.CounterExamples) > 0 {
			return "examples without args: add args for the arguments they show, or remove them"
		}
		return ""
	}
	if err := e.ArgRule().Check(e.Examples, e.CounterExamples); err != nil {
		return err.Error()
	}
	return ""
}

// ArgRules returns the argument rules that apply, in match order (refused
// entries are left out).
func (r Resolved) ArgRules() []policy.ArgRule {
	var out []policy.ArgRule
	for _, e := range r.Allowlist {
		if e.Entry.IsArgRule() && !e.Entry.IsGrant() && e.Refused == "" {
			out = append(out, e.Entry.ArgRule())
		}
	}
	return out
}

// argRule decodes the entry members of an argument rule.
func (p *parser) argRule(e *Entry, key, where string, off int) error {
	switch key {
	case "args":
		if p.null(off) {
			return p.skipValue()
		}
		if err := p.strings(&e.Args, where+".args", off); err != nil {
			return err
		}
		if e.Args == nil {
			e.Args = []string{}
		}
		return nil
	case "deny":
		if p.null(off) {
			return p.skipValue()
		}
		if p.data[off] != 't' && p.data[off] != 'f' {
			return p.typeError(off, where+".deny", "a boolean")
		}
		return p.dec.Decode(&e.Deny)
	case "examples":
		return p.strings(&e.Examples, where+".examples", off)
	case "counterExamples":
		return p.strings(&e.CounterExamples, where+".counterExamples", off)
	}
	return fmt.Errorf("%s: %s is not an argument rule member", where, key)
}

// argRule writes an entry's argument-rule members. "args" is written even
// empty, so a rewrite never turns a refused rule into a path-only entry.
func (o *objectWriter) argRule(e Entry) {
	if e.Args != nil {
		o.key("args")
		o.w.buf.WriteByte('[')
		for i, s := range e.Args {
			if i > 0 {
				o.w.buf.WriteByte(',')
			}
			o.w.string(s)
		}
		o.w.buf.WriteByte(']')
	}
	if e.Deny {
		o.key("deny")
		o.w.buf.WriteString("true")
	}
	o.strings("examples", e.Examples)
	o.strings("counterExamples", e.CounterExamples)
}

// argRuleWidenings reports an allow rule next has that cur does not (same
// pattern and args, applied in both).
func argRuleWidenings(own string, cur Resolved, e ResolvedEntry) []Widening {
	if e.Entry.Deny || e.Refused != "" {
		return nil
	}
	if slices.ContainsFunc(cur.Allowlist, func(c ResolvedEntry) bool {
		return c.Refused == "" && !c.Entry.Deny && !c.Entry.IsGrant() && c.Entry.Args != nil && samePattern(c.Entry.Pattern, e.Entry.Pattern) && slices.Equal(c.Entry.Args, e.Entry.Args)
	}) {
		return nil
	}
	return []Widening{{own + ".allowlist", "", e.Entry.ArgRule().String()}}
}

// lostDenies reports the deny rules of agent's in cur that next no longer
// applies.
func lostDenies(own, agent string, cur, next Resolved) []Widening {
	var out []Widening
	for _, c := range cur.Allowlist {
		if c.Agent != agent || !c.Entry.Deny || c.Refused != "" {
			continue
		}
		kept := slices.ContainsFunc(next.Allowlist, func(n ResolvedEntry) bool {
			return n.Agent == agent && n.Entry.Deny && n.Refused == "" && samePattern(n.Entry.Pattern, c.Entry.Pattern) && slices.Equal(n.Entry.Args, c.Entry.Args)
		})
		if !kept {
			out = append(out, Widening{own + ".allowlist", c.Entry.ArgRule().String(), ""})
		}
	}
	return out
}
