//go:build exechost_analysis_off

package host

import "strings"

// analysisOff is set only in binaries built with the exechost_analysis_off
// tag, which the test suite builds to prove the run-time guard on its own
// (internal/host/guard_linux_test.go): every parseable text is taken as
// allowed by the analysis and goes straight to the guarded interpreter,
// whose allowed executables are the allowlist's literal paths. No release
// build has it; it is not a flag.
const analysisOff = true

// unanalysedExecutables are the allowlist's literal paths (patterns with
// no glob syntax): what the guard may start when nothing was analysed.
func unanalysedExecutables(patterns []string) []string {
	var out []string
	for _, p := range patterns {
		if strings.HasPrefix(p, "/") && !strings.ContainsAny(p, `*?[{\`) {
			out = append(out, p)
		}
	}
	return out
}
