package host

import (
	"strings"

	"github.com/exechost/exechost/internal/policy"
)

// denialDetail adds to a denial what an agent can act on: which
// executables were missing and what would fix it.
func denialDetail(p *Prepared) string {
	var b strings.Builder
	var missing []string
	for i, s := range p.Analysis.Segments {
		if i < len(p.Matched) && p.Matched[i] == "" {
			name := s.ResolvedPath
			if name == "" {
				name = s.Name + " (not found on PATH)"
			}
			missing = append(missing, name)
		}
	}
	if p.Effective.Security == policy.SecurityAllowlist && p.Analysis.OK && len(missing) > 0 {
		b.WriteString("; not allowlisted: " + strings.Join(missing, ", "))
		b.WriteString(" (hint: `exechost approvals allowlist add <path> --agent '" + p.Agent + "'` on the execution host, or ask a human to approve)")
	}
	if !p.Analysis.OK {
		// The analysis error names the construct and its position
		// ("command substitution $(…) at 1:6").
		b.WriteString("; cannot be analysed: " + p.Analysis.Error)
		b.WriteString(" (hint: rewrite the command without that construct, or ask a human to approve it)")
	}
	return b.String()
}
