package approvals

import (
	"fmt"
	"path"
	"strings"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/state"
)

// Source names for Resolved.Sources besides "agents.<id>".
const (
	SourceDefaults = "defaults"
	SourceBuiltIn  = "built-in"
)

// Resolved is the policy one agent runs under on this host, with enough
// provenance for `approvals get` to explain it.
type Resolved struct {
	// Local is the effective security, ask and askFallback.
	Local policy.Local `json:"local"`
	// Sources maps "security", "ask" and "askFallback" to the level that
	// supplied the value: "agents.<id>", "agents.*", "defaults" or
	// "built-in".
	Sources map[string]string `json:"sources"`
	// Skipped describes each invalid value passed over on the way, and what
	// was used instead.
	Skipped []string `json:"skipped,omitempty"`
	// Allowlist is the wildcard agent's entries followed by the agent's own.
	Allowlist []ResolvedEntry `json:"allowlist"`
	// EnvAllowlist is the defaults', the wildcard agent's and the agent's
	// environment allowlist entries together (policy.EnvPermitted): the
	// variables a command may give its programs beyond the built-in safe
	// set (policy.SafeEnvNames). Invalid entries are left out, with a
	// warning.
	EnvAllowlist []string `json:"envAllowlist,omitempty"`
	// Confine is what the agent's "confine" members ask for (confine.go);
	// nil when none has one.
	Confine *ResolvedConfine `json:"confine,omitempty"`
	// Warnings are problems that do not stop the file from loading but
	// probably do not do what the user meant: a missing version, patterns
	// that can never match, patterns covering directories other users can
	// write to.
	Warnings []string `json:"warnings,omitempty"`
}

// ResolvedEntry is an allowlist entry and the agent (id or "*") whose list
// holds it, which is where RecordUse and RemovePattern find it.
type ResolvedEntry struct {
	Agent string `json:"agent"`
	Entry Entry  `json:"entry"`
	// Refused says why the entry applies to nothing (argrules.go): an
	// argument rule whose examples do not check. "" when it applies.
	Refused string `json:"refused,omitempty"`
}

// Patterns returns the path-only allowlist patterns in match order:
// argument rules (ArgRules) and refused entries are left out, since their
// path alone allows nothing.
func (r Resolved) Patterns() []string {
	out := make([]string, 0, len(r.Allowlist))
	for _, e := range r.Allowlist {
		if !e.Entry.IsArgRule() && !e.Entry.IsGrant() && e.Refused == "" {
			out = append(out, e.Entry.Pattern)
		}
	}
	return out
}

// Resolve returns agentID's effective policy ("" means the wildcard agent):
// each value comes from the first level that holds a valid one, in the order
// agent → "*" → defaults → built-in, so a typo can only fall back, never
// widen. Its warnings include a check of the directories each pattern
// covers, which stats the filesystem; the per-command hot path should use
// ResolvePolicy.
func (f *File) Resolve(agentID string) Resolved {
	return f.resolve(agentID, state.Home(), true)
}

// ResolvePolicy is Resolve without the filesystem checks: the same policy,
// allowlist and provenance, and only the warnings that need no I/O.
func (f *File) ResolvePolicy(agentID string) Resolved {
	return f.resolve(agentID, "", false)
}

// ResolvePolicyHome is ResolvePolicy with home as the "~" of the confine
// paths (an execution host's own home, which may not be $HOME's).
func (f *File) ResolvePolicyHome(agentID, home string) Resolved {
	return f.resolve(agentID, home, false)
}

// confineHome is the home "~/" expands to in confine.writable: Resolve's,
// or the host user's when ResolvePolicy passes none.
func confineHome(home string) string {
	if home != "" {
		return home
	}
	return state.Home()
}

type level struct {
	name                   string
	security, ask, fallbck string
}

func (f *File) resolve(agentID, home string, statDirs bool) Resolved {
	if agentID == "" {
		agentID = WildcardAgent
	}
	var levels []level
	var cl []confineLevel
	var chain []string // agents whose allowlists apply, in match order
	if w := f.Agents[WildcardAgent]; w != nil {
		chain = append(chain, WildcardAgent)
	}
	if a := f.Agents[agentID]; a != nil && agentID != WildcardAgent {
		levels = append(levels, level{"agents." + agentID, a.Security, a.Ask, a.AskFallback})
		cl = append(cl, confineLevel{"agents." + agentID, a.Confine})
		chain = append(chain, agentID)
	}
	if w := f.Agents[WildcardAgent]; w != nil {
		levels = append(levels, level{"agents." + WildcardAgent, w.Security, w.Ask, w.AskFallback})
		cl = append(cl, confineLevel{"agents." + WildcardAgent, w.Confine})
	}
	levels = append(levels, level{SourceDefaults, f.Defaults.Security, f.Defaults.Ask, f.Defaults.AskFallback})
	cl = append(cl, confineLevel{SourceDefaults, f.Defaults.Confine})

	r := Resolved{Sources: make(map[string]string, 3)}
	r.Local.Security = pick(&r, levels, "security", func(l level) string { return l.security }, policy.ParseSecurity, policy.DefaultSecurity, policy.Securities())
	r.Local.Ask = pick(&r, levels, "ask", func(l level) string { return l.ask }, policy.ParseAsk, policy.DefaultAsk, policy.Asks())
	r.Local.Fallback = pick(&r, levels, "askFallback", func(l level) string { return l.fallbck }, policy.ParseFallback, policy.DefaultFallback, policy.Fallbacks())
	if home == "" && statDirs {
		home = state.Home()
	}
	r.resolveConfine(cl, confineHome(home))

	if f.versionMissing {
		r.Warnings = append(r.Warnings, fmt.Sprintf("version missing; assuming %d (the next write adds it)", Version))
	}
	r.Warnings = append(r.Warnings, f.warnings...)
	envLevels := []struct {
		where string
		list  []string
	}{{SourceDefaults, f.Defaults.EnvAllowlist}}
	for _, id := range chain {
		envLevels = append(envLevels, struct {
			where string
			list  []string
		}{"agents." + id, f.Agents[id].EnvAllowlist})
	}
	for _, l := range envLevels {
		for i, n := range l.list {
			if w := policy.LintEnvPattern(n); w != "" {
				r.Warnings = append(r.Warnings, fmt.Sprintf("%s.envAllowlist[%d]: %s", l.where, i, w))
				continue
			}
			if w := envPrefixWarning(n); w != "" { // selfwarn.go
				r.Warnings = append(r.Warnings, fmt.Sprintf("%s.envAllowlist[%d]: %s", l.where, i, w))
			}
			r.EnvAllowlist = append(r.EnvAllowlist, n)
		}
	}
	memo := map[string]string{}
	dirs := map[string][]string{} // directory listings for near-miss checks
	for _, id := range chain {
		for i, e := range f.Agents[id].Allowlist {
			where := fmt.Sprintf("agents.%s.allowlist[%d]", id, i)
			re := ResolvedEntry{Agent: id, Entry: e, Refused: e.refusal()}
			if re.Refused != "" {
				r.Warnings = append(r.Warnings, where+": refused, applies to nothing: "+re.Refused)
			}
			r.Allowlist = append(r.Allowlist, re)
			if w := policy.LintPattern(e.Pattern); w != "" {
				r.Warnings = append(r.Warnings, where+": "+w)
				continue
			}
			if !statDirs {
				continue
			}
			if w := coverWarning(e.Pattern, home, memo); w != "" {
				r.Warnings = append(r.Warnings, where+": "+w)
			}
			if w := selfWritableWarning(e.Pattern, home, r.Confine); w != "" { // selfwarn.go
				r.Warnings = append(r.Warnings, where+": "+w)
			}
			for _, w := range nearMissWarnings(e.Pattern, home, dirs) {
				r.Warnings = append(r.Warnings, where+": "+w)
			}
		}
	}
	return r
}

// pick walks levels for one field and records its source and every invalid
// value it skipped.
func pick[T ~string](r *Resolved, levels []level, field string, get func(level) string, parse func(string) (T, error), builtin T, valid []T) T {
	var bad []string
	val, src := builtin, SourceBuiltIn
	for _, l := range levels {
		raw := get(l)
		if raw == "" {
			continue
		}
		v, err := parse(raw)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s.%s %q", l.name, field, raw))
			continue
		}
		val, src = v, l.name
		break
	}
	r.Sources[field] = src
	names := make([]string, len(valid))
	for i, v := range valid {
		names[i] = string(v)
	}
	for _, b := range bad {
		r.Skipped = append(r.Skipped, fmt.Sprintf("%s is not valid (accepted: %s); using %s (%q)", b, strings.Join(names, ", "), src, val))
	}
	return val
}

// coverWarning reports when the literal directory a pattern covers (the
// part before its first glob character), or a directory above it, can be
// written by other users: they could place an executable there that the
// pattern then allows.
func coverWarning(pattern, home string, memo map[string]string) string {
	p := policy.ExpandHome(strings.TrimSpace(pattern), home)
	if !strings.HasPrefix(p, "/") {
		return ""
	}
	dir := literalDir(path.Clean(p))
	problem, ok := memo[dir]
	if !ok {
		problem = writableProblem(dir)
		memo[dir] = problem
	}
	if problem == "" {
		return ""
	}
	return fmt.Sprintf("pattern %q covers %s, but %s: other users can place executables there that this pattern allows", pattern, dir, problem)
}

// literalDir returns the directory part of an absolute pattern before any
// glob syntax: "/opt/x/*/bin/rg" → "/opt/x", "/usr/bin/rg" → "/usr/bin".
func literalDir(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if strings.ContainsAny(s, `*?[{\`) {
			if d := strings.Join(segs[:i], "/"); d != "" {
				return d
			}
			return "/"
		}
	}
	return path.Dir(p)
}
