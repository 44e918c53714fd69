package config

import (
	"errors"
	"strings"
	"testing"
)

// TestApprovalsRoute: approvals.route is validated and canonicalised like
// the other enums, with its key path in the error.
func TestApprovalsRoute(t *testing.T) {
	tests := []struct {
		text, want, wantErr string
	}{
		{`{}`, "", ""},
		{`{"approvals": {"route": "gateway"}}`, "gateway", ""},
		{`{"approvals": {"route": " Both "}}`, "both", ""},
		{`{"approvals": {"route": "mars"}}`, "", "approvals.route: invalid value"},
		{`{"approvals": {"rout": "both"}}`, "", "approvals.rout: unknown key"},
	}
	for _, tt := range tests {
		c, err := Parse("exechost.json", []byte(tt.text))
		if tt.wantErr != "" {
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Parse(%s) = %v, want %q", tt.text, err, tt.wantErr)
			}
			continue
		}
		if err != nil || c.Approvals.Route != tt.want {
			t.Errorf("Parse(%s) = %+v, %v; want route %q", tt.text, c, err, tt.want)
		}
	}
}
