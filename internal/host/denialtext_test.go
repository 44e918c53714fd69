package host

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
)

// fixedPrompter answers every prompt with a fixed approval, or waits
// until the prompt's deadline when it has none (an approver nobody at).
type fixedPrompter struct{ answer policy.Approval }

func (a fixedPrompter) Prompt(ctx context.Context, _ prompt.Request) (policy.Approval, string, error) {
	if a.answer == "" {
		<-ctx.Done()
		return "", "", ctx.Err()
	}
	return a.answer, "web", nil
}

// TestDenialTexts runs each refusal through a real engine and reads what
// an agent reads: the reason once (never "security=deny (security=deny)"),
// a human's deny without the allowlist's hint nested in it, a miss naming
// the real path to allowlist, and after an approver let the prompt time
// out, a hint about answering in time instead of "start an approver".
func TestDenialTexts(t *testing.T) {
	for _, c := range []struct {
		name      string
		sec       policy.Security
		prompter  Prompter
		want      string // the whole message
		wantHint  string // in Denial.Hint ("" = none set by the host)
		forbidden []string
	}{
		{name: "security deny", sec: policy.SecurityDeny, want: "SYSTEM_RUN_DISABLED: security=deny"},
		{name: "human deny", sec: policy.SecurityAllowlist, prompter: fixedPrompter{policy.Reject},
			want: "SYSTEM_RUN_DENIED: user denied (by web)", forbidden: []string{"not allowlisted", "hint:"}},
		{name: "no approver", sec: policy.SecurityAllowlist,
			want: "SYSTEM_RUN_DENIED: approval required (askFallback=deny: no approver configured); not allowlisted: $BIN/other (hint: `exechost approvals allowlist add --agent 'main' $BIN/other` on the execution host, or ask a human to approve)"},
		{name: "approver timed out", sec: policy.SecurityAllowlist, prompter: fixedPrompter{},
			wantHint: "nobody answered before the prompt timed out", forbidden: []string{"<path>"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, c.sec, policy.AskOnMiss, policy.FallbackDeny, "$BIN/hello")
			f.engine.Prompter = c.prompter
			f.engine.PromptTimeout = 200 * time.Millisecond
			_, err := f.engine.Run(context.Background(), Request{RawCommand: "other", Cwd: f.dir, AgentID: "main"})
			de, ok := errors.AsType[*DenialError](err)
			if !ok {
				t.Fatalf("want a denial, got %v", err)
			}
			msg := strings.ReplaceAll(de.Error(), f.bin, "$BIN")
			if c.want != "" && msg != c.want {
				t.Errorf("message\n got %s\nwant %s", msg, c.want)
			}
			if !strings.Contains(de.Denial.Hint, c.wantHint) || (c.wantHint == "" && de.Denial.Hint != "") {
				t.Errorf("hint %q, want one containing %q", de.Denial.Hint, c.wantHint)
			}
			for _, bad := range c.forbidden {
				if strings.Contains(msg, bad) {
					t.Errorf("message %q contains %q", msg, bad)
				}
			}
			if strings.Count(msg, "security=deny") > 1 {
				t.Errorf("message %q repeats its reason", msg)
			}
		})
	}
}
