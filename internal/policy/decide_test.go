package policy

import (
	"fmt"
	"testing"
)

// TestDenialCode: every way Decide denies maps to its code through the
// sentinel error, whatever detail the reason text carries.
func TestDenialCode(t *testing.T) {
	miss := Input{Effective: Effective{Security: SecurityAllowlist, Ask: AskOff}, AnalysisOK: true}
	for _, tc := range []struct {
		name string
		d    Decision
		want string
	}{
		{"security=deny", Decide(Input{Effective: Effective{Security: SecurityDeny, Ask: AskOff}}), ReasonSecurityDeny},
		{"miss with ask=off", Decide(miss), ReasonAllowlistMiss},
		{"analysis failed", Decide(Input{Effective: Effective{Security: SecurityAllowlist, Ask: AskOff}, AnalysisError: "x"}), ReasonAllowlistMiss},
		{"allowed", Decide(Input{Effective: Effective{Security: SecurityFull, Ask: AskOff}}), ""},
	} {
		if got := DenialCode(tc.d); got != tc.want {
			t.Errorf("%s: DenialCode(%+v) = %q, want %q", tc.name, tc.d, got, tc.want)
		}
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{ErrUserDenied, ReasonUserDenied},
		{ErrApprovalRequired, ReasonApprovalRequired},
	} {
		d := Decision{Outcome: DenyRun, Reason: "anything: at all", Err: fmt.Errorf("%w (detail)", tc.err)}
		if got := DenialCode(d); got != tc.want {
			t.Errorf("%v: got %q, want %q", tc.err, got, tc.want)
		}
	}
}
