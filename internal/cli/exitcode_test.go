package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/bridge"
)

func TestExitCodeOfErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, ExitOK},
		{"plain", errors.New("x"), ExitFailure},
		{"usage", usagef("bad"), ExitUsage},
		{"wrapped usage", fmt.Errorf("ctx: %w", usagef("bad")), ExitUsage},
		{"own status", exitError{3}, 3},
		{"coded", withCode(ExitUnavailable, errors.New("down")), ExitUnavailable},
		{"wire denied", wireError(&bridge.Error{Code: bridge.CodeDenied}), ExitDenied},
		{"wire timeout", wireError(&bridge.Error{Code: bridge.CodeTimeout}), ExitTimeout},
		{"wire unavailable", wireError(&bridge.Error{Code: bridge.CodeUnavailable}), ExitUnavailable},
		{"wire busy", wireError(&bridge.Error{Code: bridge.CodeBusy}), ExitUnavailable},
		{"wire not found", wireError(&bridge.Error{Code: bridge.CodeNotFound}), ExitFailure},
		{"client deadline", wireError(fmt.Errorf("call: %w", context.DeadlineExceeded)), ExitTimeout},
		{"dropped connection", wireError(fmt.Errorf("call: %w", bridge.ErrClosed)), ExitUnavailable},
		{"already coded", wireError(withCode(ExitUnavailable, errors.New("dial"))), ExitUnavailable},
	} {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("%s: ExitCode = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestUsageIsTyped runs the CLI in-process: every usage problem cobra or a
// command finds exits 2, with no gateway anywhere (nothing is dialled), and
// a command group's unknown subcommand is an error, not its help.
func TestUsageIsTyped(t *testing.T) {
	t.Setenv(EnvGatewayToken, "")
	t.Setenv(EnvGateway, "ws://127.0.0.1:1")
	dir := t.TempDir()
	for _, args := range [][]string{
		{"chek"},
		{"approvals", "chek"},
		{"approvals", "allowlist", "ad", "/x"},
		{"nodes", "approve"},
		{"nodes", "list", "extra"},
		{"exec", "--host", "mars", "true"},
		{"exec", "--security", "all", "true"},
		{"exec", "--ask", "maybe", "true"},
		{"exec", "--events", "some", "true"},
		{"exec", "--timeout", "-1", "true"},
		{"exec", "--timeout", "soon", "true"},
		{"run", "--timeout", "-1", "true"},
		{"run"},
		{"exec"},
		{"gateway", "join-key", "--ttl", "0s"},
		{"version", "extra"},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"--state-dir", dir}, args...), &out, &errb)
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want %d\nstderr: %s", args, code, ExitUsage, errb.String())
		}
		if strings.Contains(errb.String(), "127.0.0.1:1") {
			t.Errorf("%v: dialled the gateway for a usage error: %s", args, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"--state-dir", dir, "approvals"}, &out, &errb); code != ExitOK || !strings.Contains(out.String(), "Available Commands") {
		t.Errorf("a bare group: exit %d, want its help and 0; stdout: %s", code, out.String())
	}
}

func TestPrefixedOnce(t *testing.T) {
	for in, want := range map[string]string{
		"denied":                 "exechost: denied",
		"exechost: denied":       "exechost: denied",
		"exechost: exechost: x":  "exechost: x",
		"exechost up is running": "exechost: exechost up is running",
	} {
		if got := prefixed(in); got != want {
			t.Errorf("prefixed(%q) = %q, want %q", in, got, want)
		}
	}
}
