package cli

import (
	"errors"
	"fmt"
	"testing"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/hint"
)

// TestErrorObjectHint: --json's hint is the error's own — a local error's
// (internal/hint), a wire error's Hint, a denial's — and never cut out of
// a message that merely ends in "(hint: …)".
func TestErrorObjectHint(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"local", fmt.Errorf("exec: %w", hint.Wrap(errors.New("no gateway answers"), "start one")), "start one"},
		{"wire", fmt.Errorf("exec: %w", &bridge.Error{Code: bridge.CodeNotFound, Message: "no node x (hint: pair one)", Hint: "pair one"}), "pair one"},
		{"denial", &bridge.Error{Code: bridge.CodeDenied, Message: "SYSTEM_RUN_DENIED: approval required", Denial: &bridge.Denial{Hint: "allowlist it"}}, "allowlist it"},
		{"text only, local", errors.New("broken (hint: not a field)"), ""},
		{"text only, wire", &bridge.Error{Code: bridge.CodeInternal, Message: "broken (hint: from an old peer)"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errorObject(tt.err, ExitFailure).Hint; got != tt.want {
				t.Errorf("hint %q, want %q", got, tt.want)
			}
		})
	}
}
