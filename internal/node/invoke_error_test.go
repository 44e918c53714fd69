package node

import (
	"errors"
	"fmt"
	"testing"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/policy"
)

// TestRunError: denials keep the SYSTEM_RUN_* text under DENIED, an
// unreachable companion app is UNAVAILABLE (the caller may retry or pick
// another host), anything else is a run failure.
func TestRunError(t *testing.T) {
	tests := []struct {
		err  error
		code string
	}{
		{fmt.Errorf("run: %w", policy.ErrUserDenied), bridge.CodeDenied},
		{policy.ErrDisabled, bridge.CodeDenied},
		{fmt.Errorf("forward: %w", ErrCompanionUnavailable), bridge.CodeUnavailable},
		{errors.New("spawn failed"), CodeRunFailed},
	}
	for _, tt := range tests {
		if got := runError(tt.err); got.Code != tt.code || got.Message != tt.err.Error() {
			t.Errorf("runError(%v) = %+v, want code %s and the error's text", tt.err, got, tt.code)
		}
	}
}
