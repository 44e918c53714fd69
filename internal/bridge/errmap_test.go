package bridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/policy"
)

// wirer is an error that knows its wire form, as host.DenialError does.
type wirer struct{}

func (wirer) Error() string { return "typed denial" }
func (wirer) Wire() *Error {
	return &Error{Code: CodeDenied, Message: "typed denial", Denial: &Denial{Reason: ReasonAllowlistMiss}}
}

// TestAsError: the one mapping keeps an *Error, asks a Wirer, recognises
// denial sentinels by identity (never text), honours CodedError, and
// answers everything else INTERNAL with the error's text.
func TestAsError(t *testing.T) {
	dangerous := errors.New("dangerous env")
	tests := []struct {
		name   string
		err    error
		code   string
		reason string
	}{
		{"wire error passes", fmt.Errorf("ctx: %w", Errorf(CodeBusy, "busy")), CodeBusy, ""},
		{"wirer", fmt.Errorf("run: %w", wirer{}), CodeDenied, ReasonAllowlistMiss},
		{"sentinel", fmt.Errorf("run: %w", policy.ErrUserDenied), CodeDenied, ReasonUserDenied},
		{"disabled", policy.ErrDisabled, CodeDenied, ReasonDisabled},
		{"invalid request", InvalidRequest(fmt.Errorf("%w: env LD_PRELOAD", dangerous)), CodeInvalidRequest, ""},
		{"unavailable", fmt.Errorf("forward: %w", Unavailable(errors.New("approver down"))), CodeUnavailable, ""},
		// Text that looks like a denial is not one.
		{"denial-looking text", errors.New("SYSTEM_RUN_DENIED: user denied"), CodeInternal, ""},
		{"other", errors.New("spawn failed"), CodeInternal, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AsError(tt.err)
			if got.Code != tt.code {
				t.Errorf("code %s, want %s", got.Code, tt.code)
			}
			reason := ""
			if got.Denial != nil {
				reason = got.Denial.Reason
			}
			if reason != tt.reason {
				t.Errorf("denial reason %q, want %q", reason, tt.reason)
			}
		})
	}
	// A coded error keeps its cause in the chain and its text on the wire.
	err := InvalidRequest(fmt.Errorf("%w: env LD_PRELOAD", dangerous))
	if !errors.Is(err, dangerous) || AsError(err).Message != "dangerous env: env LD_PRELOAD" {
		t.Errorf("InvalidRequest lost its cause or text: %v / %q", err, AsError(err).Message)
	}
}

// TestErrorHint: the hint an error carries (internal/hint) becomes the
// wire error's Hint whichever way it is made, travels as "hint", and is
// never taken from text: a message merely ending in "(hint: …)" has none.
func TestErrorHint(t *testing.T) {
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{"hint.Wrap through AsError", AsError(fmt.Errorf("run: %w", hint.Wrap(errors.New("no such dir"), "pass an existing directory"))), "pass an existing directory"},
		{"CodedError", AsError(InvalidRequest(hint.Wrap(errors.New("bad cwd"), "pass an absolute path"))), "pass an absolute path"},
		{"Errorf wrapping a hinted error", Errorf(CodeUnavailable, "forward: %w", hint.Wrap(errors.New("down"), "start it")), "start it"},
		{"WithHint", Errorf(CodeForbidden, "node %s is not paired", "n1").WithHint("approve it"), "approve it"},
		{"text only", AsError(errors.New("spawn failed (hint: looks like one)")), ""},
		{"Errorf text only", Errorf(CodeBusy, "busy (hint: %s)", "retry"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err.Hint != tt.want {
				t.Errorf("Hint = %q, want %q (message %q)", tt.err.Hint, tt.want, tt.err.Message)
			}
			if tt.want != "" && !strings.HasSuffix(tt.err.Message, " (hint: "+tt.want+")") {
				t.Errorf("message %q does not end with its hint", tt.err.Message)
			}
			b, err := json.Marshal(tt.err)
			if err != nil {
				t.Fatal(err)
			}
			var back Error
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if back.Hint != tt.want || back.Message != tt.err.Message {
				t.Errorf("round trip %s = %+v", b, back)
			}
		})
	}
}
