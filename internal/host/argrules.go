package host

import (
	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/shellcmd"
)

// permitSegments is the analysis's wall for argument rules: each segment is
// held against the path allowlist and the argument rules on the words the
// analysis knows (a word known only at run time never satisfies an allow
// rule and may match any deny rule). It returns, per segment, the entry
// that allows it ("" for a miss), whether all are allowed, and the deny
// rules that refused segments.
func permitSegments(list *policy.Allowlist, rules *policy.ArgRules, segs []shellcmd.Segment) (matched []string, satisfied bool, denied []string) {
	matched = make([]string, len(segs))
	satisfied = true
	for i, s := range segs {
		var args, dyn = []string{}, []bool{}
		if len(s.Argv) > 0 {
			args = s.Argv[1:]
			// A segment without per-word knowledge counts every word as
			// unknown: fail closed.
			dyn = make([]bool, len(args))
			for j := range dyn {
				dyn[j] = j+1 >= len(s.Dynamic) || s.Dynamic[j+1]
			}
		}
		by, deny := policy.Permit(list, rules, s.ResolvedPath, args, dyn)
		if deny != "" {
			denied = append(denied, deny)
		}
		matched[i] = by
		if by == "" {
			satisfied = false
		}
	}
	return matched, satisfied, denied
}

// argOnly returns the executables of exes that the path allowlist does not
// allow by itself: the run-time guard lets them start only with arguments
// an allow rule matches.
func argOnly(list *policy.Allowlist, exes []string) []string {
	var out []string
	for _, x := range exes {
		if list.Match(x) == "" {
			out = append(out, x)
		}
	}
	return out
}

// allowRulePatterns are the patterns of r's allow rules, for the
// analysis-off test build's executables (the guard then checks the
// arguments alone).
func allowRulePatterns(r approvals.Resolved) []string {
	var out []string
	for _, x := range r.ArgRules() {
		if !x.Deny {
			out = append(out, x.Pattern)
		}
	}
	return out
}
