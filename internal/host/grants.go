package host

import (
	"slices"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/shellcmd"
)

// withGrants returns the path allowlist and argument rules one decision
// applies: ap's standing ones plus the grants (approvals/grants.go) active
// now, in cwd, for session, by the engine's clock. With no grant in the
// file it is ap's own, compiled once.
func (e *Engine) withGrants(ap *agentPolicy, cwd, session string) (*policy.Allowlist, *policy.ArgRules) {
	if len(ap.grants) == 0 {
		return ap.allow, ap.rules
	}
	now := e.now()
	paths := ap.resolved.Patterns()
	rules := slices.Clone(ap.rules.Rules())
	active := 0
	for _, g := range ap.grants {
		if !g.Active(now, cwd, session) {
			continue
		}
		active++
		if g.Rule.Args == nil {
			paths = append(paths, g.Rule.Pattern)
		} else {
			rules = append(rules, g.Rule)
		}
	}
	if active == 0 {
		return ap.allow, ap.rules
	}
	list := policy.CompileAllowlist(paths, e.Home)
	list.SameFile = approvals.SameFile
	return list, policy.CompileArgRules(rules, e.Home)
}

// expiredGrants names the grants that have ended and would have allowed a
// segment that is now a miss: the decision and its audit record say why a
// command that ran before is asked about again.
func (e *Engine) expiredGrants(ap *agentPolicy, segs []shellcmd.Segment, matched []string) []string {
	if len(ap.grants) == 0 {
		return nil
	}
	now := e.now()
	var out []string
	for i, s := range segs {
		if i >= len(matched) || matched[i] != "" || s.ResolvedPath == "" {
			continue
		}
		for _, g := range ap.grants {
			if g.Expired(now) && policy.MatchPattern(g.Rule.Pattern, s.ResolvedPath, e.Home) && !slices.Contains(out, g.String()) {
				out = append(out, g.String())
			}
		}
	}
	return out
}
