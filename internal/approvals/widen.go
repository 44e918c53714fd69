package approvals

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/policy"
)

// Widening is one way a proposed approvals file would let more run on this
// host than the current one does. A remote editor (a gateway's
// `approvals set --node`, OpenClaw's system.execApprovals.set) may only
// tighten a host's policy: every Widening needs the host's own consent.
type Widening struct {
	// Where names the setting: "agents.*.security", "agents.build.allowlist",
	// "defaults.autoAllowSkills", … For security, ask and askFallback it is
	// the agent whose effective value loosened ("*" stands for every agent
	// the file does not name).
	Where string `json:"where"`
	// From and To are the values before and after: effective modes, an
	// added pattern (From empty), or an unknown member's JSON ("" when
	// absent).
	From string `json:"from"`
	To   string `json:"to"`
}

// String says the widening in one line: `agents.*.security deny→full`,
// `agents.*.allowlist +"/usr/bin/curl"`.
func (w Widening) String() string {
	switch {
	case strings.HasSuffix(w.Where, ".allowlist"):
		return fmt.Sprintf("%s +%q", w.Where, w.To)
	case w.From == "":
		return fmt.Sprintf("%s (absent)→%s", w.Where, w.To)
	case w.To == "":
		return fmt.Sprintf("%s %s→(absent)", w.Where, w.From)
	}
	return fmt.Sprintf("%s %s→%s", w.Where, w.From, w.To)
}

// WideningsText joins ws for an error message ("; " between items).
func WideningsText(ws []Widening) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = w.String()
	}
	return strings.Join(parts, "; ")
}

// Widenings returns every way next allows more than cur, in a stable
// order (agents as AgentIDs orders them: "*" first); nil means next only
// keeps or tightens what cur allows. It is pure: no I/O, and neither file
// is changed.
//
// Each dimension is compared on its own, per agent, on the effective values
// (agent → "*" → defaults → built-in, invalid values skipped as Resolve
// does): security looser (deny < allowlist < full), askFallback looser
// (deny < allowlist < full), an allowlist pattern the agent did not have
// (compared as matching does: trimmed, case-insensitive), or an ask mode
// that lets something run it did not. Ask is compared by what it lets
// run, which is not a chain: always runs nothing without a human (or the
// fallback), off runs allowlisted commands and denies misses, on-miss runs
// allowlisted commands and puts misses to a human (or the fallback). So
// always → on-miss or off widens (allowlisted commands stop needing a
// human), off → on-miss or always widens (misses can now run), and
// on-miss → off or always only tightens (on-miss → off turns prompts into
// denials: the usual OpenClaw allowlist document is not a widening).
// Under an effective security=deny, ask and askFallback are not compared
// (nothing runs, and leaving deny is reported as security). Comparing each
// dimension on its own, rather than asking what the combination lets run
// today, makes the relation transitive: no sequence of accepted changes
// (ask=off with askFallback=full, then ask=on-miss) adds up to a widening
// that one change would have been refused for.
//
// Members this version does not know (OpenClaw's autoAllowSkills, a newer
// schema's fields) count as a widening when added, changed or removed:
// this host cannot tell what they allow, so it fails closed.
func Widenings(cur, next *File) []Widening {
	var out []Widening
	ids := unionIDs(cur, next)
	wild := map[Widening]bool{} // the wildcard's mode widenings
	for _, id := range ids {
		rc, rn := cur.ResolvePolicy(id), next.ResolvePolicy(id)
		own := "agents." + id
		mode := func(field, from, to string, widens bool) {
			if !widens {
				return
			}
			w := Widening{own + "." + field, from, to}
			if id == WildcardAgent {
				wild[Widening{field, from, to}] = true
			} else if rc.Sources[field] != own && rn.Sources[field] != own && wild[Widening{field, from, to}] {
				// Inherited on both sides, and already reported for "*".
				return
			}
			out = append(out, w)
		}
		mode("security", string(rc.Local.Security), string(rn.Local.Security),
			modeRank(rn.Local.Security) > modeRank(rc.Local.Security))
		// Under security=deny nothing runs whatever ask and askFallback
		// say, and no request can loosen deny; leaving deny again is
		// itself a widening.
		if rn.Local.Security != policy.SecurityDeny {
			mode("ask", string(rc.Local.Ask), string(rn.Local.Ask), askRuns(rn.Local.Ask)&^askRuns(rc.Local.Ask) != 0)
			mode("askFallback", string(rc.Local.Fallback), string(rn.Local.Fallback),
				modeRank(rn.Local.Fallback) > modeRank(rc.Local.Fallback))
		}
		have := rc.Patterns()
		for _, e := range rn.Allowlist {
			if e.Agent != id { // the wildcard's entries are reported under "*"
				continue
			}
			if e.Entry.IsArgRule() {
				out = append(out, argRuleWidenings(own, rc, e)...)
				continue
			}
			if !slices.ContainsFunc(have, func(p string) bool { return samePattern(p, e.Entry.Pattern) }) {
				out = append(out, Widening{own + ".allowlist", "", strings.TrimSpace(e.Entry.Pattern)})
				have = append(have, e.Entry.Pattern) // a duplicate in next is one widening
			}
		}
		out = append(out, lostDenies(own, id, rc, rn)...)
	}
	out = append(out, confineWidenings(cur, next, ids)...)
	out = append(out, extraChanges("", cur.Extra, next.Extra)...)
	out = append(out, extraChanges("defaults.", cur.Defaults.Extra, next.Defaults.Extra)...)
	for _, id := range ids {
		ca, na := cur.Agents[id], next.Agents[id]
		var ce, ne Extra
		if ca != nil {
			ce = ca.Extra
		}
		if na != nil {
			ne = na.Extra
		}
		out = append(out, extraChanges("agents."+id+".", ce, ne)...)
		out = append(out, entryExtraChanges("agents."+id+".allowlist", ca, na)...)
		out = append(out, confineExtraChanges("agents."+id+".confine.", ca, na)...)
	}
	var cd, nd *Confine = cur.Defaults.Confine, next.Defaults.Confine
	out = append(out, extraChanges("defaults.confine.", confineExtra(cd), confineExtra(nd))...)
	return out
}

func confineExtra(c *Confine) Extra {
	if c == nil {
		return nil
	}
	return c.Extra
}

func confineExtraChanges(where string, cur, next *Agent) []Widening {
	var ce, ne Extra
	if cur != nil {
		ce = confineExtra(cur.Confine)
	}
	if next != nil {
		ne = confineExtra(next.Confine)
	}
	return extraChanges(where, ce, ne)
}

// confineWidenings reports, per agent, every way next's confinement lets
// a run reach more than cur's (docs/approvals-file.md, "Remote edits only
// tighten"): a writable root not beneath one it had, a looser network
// (none < loopback < all), unsupported deny → warn, a socket, readable
// entry or writablePersistence path it did not have, a hidden path it no
// longer hides, or the confine member gone under security=full (no jail
// at all). An agent that inherits the same widening from "*" on both
// sides is not reported again.
func confineWidenings(cur, next *File, ids []string) []Widening {
	var out []Widening
	wild := map[Widening]bool{}
	for _, id := range ids {
		rc, rn := cur.ResolvePolicy(id), next.ResolvePolicy(id)
		own := "agents." + id
		ownConfine := func(f *File) bool { a := f.Agents[id]; return a != nil && a.Confine != nil }
		add := func(field, from, to string) {
			w := Widening{own + ".confine." + field, from, to}
			if field == "" {
				w.Where = own + ".confine"
			}
			if id == WildcardAgent {
				wild[Widening{field, from, to}] = true
			} else if !ownConfine(cur) && !ownConfine(next) && wild[Widening{field, from, to}] {
				return
			}
			out = append(out, w)
		}
		c, n := effectiveConfine(rc), effectiveConfine(rn)
		if c.jail && !n.jail {
			// Leaving security=full's unconfined runs is reported as
			// security; under full on both sides, the member's removal.
			if rc.Local.Security == policy.SecurityFull {
				add("", "jail", "")
			}
			continue
		}
		if !c.jail {
			continue // nothing was confined: any jail only tightens
		}
		for _, w := range n.Writable {
			if !underAny(w, c.Writable) {
				add("writable", "", w)
			}
		}
		if netRank(n.Network) > netRank(c.Network) {
			add("network", string(c.Network), string(n.Network))
		}
		for _, p := range egressAdded(c.ResolvedConfine, n.ResolvedConfine) {
			add("network", "", p)
		}
		if c.Unsupported == "deny" && n.Unsupported == "warn" {
			add("unsupported", "deny", "warn")
		}
		for _, l := range []struct {
			field     string
			cur, next []string
		}{{"sockets", c.Sockets, n.Sockets}, {"readable", c.Readable, n.Readable}, {"writablePersistence", c.WritablePersistence, n.WritablePersistence}} {
			for _, p := range l.next {
				if !slices.Contains(l.cur, p) {
					add(l.field, "", p)
				}
			}
		}
		for _, p := range c.Hidden {
			if !slices.Contains(n.Hidden, p) {
				add("hidden", p, "")
			}
		}
	}
	return out
}

// jailView is an agent's confinement as Widenings compares it.
type jailView struct {
	jail bool
	ResolvedConfine
}

// effectiveConfine is what r's confinement policy comes to: the built-in
// one of its security mode without a "confine" member (security=full:
// no jail beyond the protected set; otherwise network none, deny), the
// member's with the built-in values filled in.
func effectiveConfine(r Resolved) jailView {
	if r.Confine == nil {
		if r.Local.Security == policy.SecurityFull {
			return jailView{}
		}
		return jailView{jail: true, ResolvedConfine: ResolvedConfine{Network: "none", Unsupported: "deny"}}
	}
	v := jailView{jail: true, ResolvedConfine: *r.Confine}
	if v.Network == "" {
		v.Network = "none"
	}
	if v.Unsupported == "" {
		v.Unsupported = "deny"
	}
	return v
}

func netRank(n confine.Network) int {
	switch n {
	case confine.NetworkAll:
		return 2
	case confine.NetworkLoopback:
		return 1
	}
	return 0
}

// unionIDs returns "*" and every agent either file names, "*" first.
func unionIDs(a, b *File) []string {
	seen := map[string]bool{WildcardAgent: true}
	ids := []string{WildcardAgent}
	for _, f := range []*File{a, b} {
		for _, id := range f.AgentIDs() {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids[1:])
	return ids
}

// modeRank orders security and askFallback, which share their values:
// deny < allowlist < full, higher letting more run without this host's
// human. Unknown values cannot occur (ResolvePolicy returns valid ones)
// and rank as the strictest.
func modeRank[T policy.Security | policy.Fallback](m T) int {
	switch string(m) {
	case string(policy.SecurityFull):
		return 2
	case string(policy.SecurityAllowlist):
		return 1
	}
	return 0
}

// What an ask mode lets run: allowlisted commands without a human, and
// misses through a human (or askFallback). A change widens when it adds
// either.
const (
	runsAllowlistedFreely = 1 << iota
	runsMissesByPrompt
)

func askRuns(a policy.Ask) int {
	switch a {
	case policy.AskOff:
		return runsAllowlistedFreely
	case policy.AskOnMiss:
		return runsAllowlistedFreely | runsMissesByPrompt
	}
	return runsMissesByPrompt
}

// extraChanges reports every unknown member added, changed or removed.
func extraChanges(where string, cur, next Extra) []Widening {
	var out []Widening
	get := func(e Extra, k string) (string, bool) {
		for _, m := range e {
			if m.Key == k {
				return string(m.Value), true
			}
		}
		return "", false
	}
	for _, m := range next {
		if old, ok := get(cur, m.Key); !ok || !bytes.Equal([]byte(old), m.Value) {
			out = append(out, Widening{where + m.Key, old, string(m.Value)})
		}
	}
	for _, m := range cur {
		if _, ok := get(next, m.Key); !ok {
			out = append(out, Widening{where + m.Key, string(m.Value), ""})
		}
	}
	return out
}

// entryExtraChanges reports changed unknown members of allowlist entries
// kept in both files (an entry's OpenClaw argPattern, say); the members of
// a new entry come with a pattern that is reported anyway.
func entryExtraChanges(where string, cur, next *Agent) []Widening {
	if cur == nil || next == nil {
		return nil
	}
	var out []Widening
	for _, ne := range next.Allowlist {
		i := slices.IndexFunc(cur.Allowlist, func(e Entry) bool { return samePattern(e.Pattern, ne.Pattern) })
		if i < 0 {
			continue
		}
		for _, w := range extraChanges("", cur.Allowlist[i].Extra, ne.Extra) {
			w.Where = fmt.Sprintf("%s[%q].%s", where, strings.TrimSpace(ne.Pattern), w.Where)
			out = append(out, w)
		}
	}
	return out
}

// ErrWidening is wrapped by ReplaceRemote's error when the sent file
// allows more than the current one and the host did not consent.
var ErrWidening = errors.New("a remote change may only tighten this host's policy")

// WideningError is a remote replacement refused because it widens: Widenings
// says how, Err why consent was not given (the host has not opted in, its
// approver denied or could not be asked).
type WideningError struct {
	Widenings []Widening
	Err       error
}

// Error names every widening and why it was refused.
func (e *WideningError) Error() string {
	return fmt.Sprintf("%v: the sent file allows more than this host's (%s): %v", ErrWidening, WideningsText(e.Widenings), e.Err)
}

// Unwrap returns ErrWidening and the consent error.
func (e *WideningError) Unwrap() []error { return []error{ErrWidening, e.Err} }

// ReplaceRemote replaces the file with next as a remote editor asks
// (`approvals set --node` through a gateway, OpenClaw's
// system.execApprovals.set). It writes nothing and fails with ErrStale
// unless the file still hashes to baseHash ("" skips that check), keeps
// this host's socket section (a remote editor must not redirect prompts
// or set the approver's key), and, when next allows more than the current
// file (Widenings), writes only if consent returns nil for exactly those
// widenings; otherwise it fails with a *WideningError. consent runs
// outside the file lock (it may ask a human); the write re-checks that the
// file did not change meanwhile.
func (s *Store) ReplaceRemote(baseHash string, next *File, consent func([]Widening) error) (*File, error) {
	cur, err := s.Load()
	if err != nil {
		return nil, err
	}
	h := cur.Hash()
	if baseHash != "" && h != baseHash {
		return nil, hint.Wrap(fmt.Errorf("update approvals %s: %w", s.Path, ErrStale), "reload it and apply your change again")
	}
	candidate := func(f *File) *File {
		c := next.Clone()
		c.Socket = f.Socket
		c.Normalize(s.stateDir())
		return c
	}
	ws := Widenings(cur, candidate(cur))
	if len(ws) > 0 {
		if err := consent(ws); err != nil {
			return nil, &WideningError{Widenings: ws, Err: err}
		}
	}
	return s.UpdateIf(h, func(f *File) error {
		c := candidate(f)
		if again := Widenings(f, c); !slices.Equal(again, ws) {
			return hint.Wrap(ErrStale, "reload it and apply your change again")
		}
		*f = *c
		return nil
	})
}
