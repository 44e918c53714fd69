package approvals

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

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
	}
	return out
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
