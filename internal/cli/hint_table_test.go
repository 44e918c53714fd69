package cli

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/state"
)

// closedURL is a loopback gateway URL nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "ws://" + addr
}

// TestHintForSituation: for the common first-week failures, each set up
// for real, the one-line error's hint is the fix for that situation, and
// not the fix for a neighbouring one (what it must not say).
func TestHintForSituation(t *testing.T) {
	for _, c := range []struct {
		name    string
		setup   func(t *testing.T, dir string) []string // the command line after --state-dir
		code    int
		want    []string
		notWant []string
	}{
		{name: "gateway down", code: ExitUnavailable,
			setup: func(t *testing.T, dir string) []string {
				t.Setenv(EnvGatewayToken, "tok")
				return []string{"nodes", "list", "--gateway", closedURL(t)}
			},
			want: []string{"exechost up"}, notWant: []string{"--state-dir", "chmod"}},
		{name: "wrong state dir", code: ExitFailure,
			setup: func(t *testing.T, dir string) []string {
				return []string{"nodes", "list", "--gateway", closedURL(t)}
			},
			want: []string{"gateway.json does not exist", "the gateway's --state-dir", "exechost up"}},
		{name: "token unreadable", code: ExitFailure,
			setup: func(t *testing.T, dir string) []string {
				if err := os.WriteFile(state.TokenPath(dir), []byte(`{"token":"x"}`), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(state.TokenPath(dir), 0o644); err != nil {
					t.Fatal(err)
				}
				return []string{"nodes", "list", "--gateway", closedURL(t)}
			},
			want: []string{"(hint: chmod 600 " + "DIR/gateway.json)"}, notWant: []string{"the gateway's --state-dir"}},
		{name: "approver absent", code: ExitDenied,
			setup: func(t *testing.T, dir string) []string {
				if err := os.WriteFile(filepath.Join(dir, state.ApprovalsFile), []byte(`{"version":1,"defaults":{"security":"allowlist","ask":"on-miss","askFallback":"deny"}}`), 0o600); err != nil {
					t.Fatal(err)
				}
				return []string{"run", "/usr/bin/id"}
			},
			want: []string{"hint: no approver answered", "exechost approver", "fix: exechost approvals allowlist add --agent main /usr/bin/id"}, notWant: []string{"timed out"}},
		{name: "removed secret flag", code: ExitUsage,
			setup: func(t *testing.T, dir string) []string {
				return []string{"node", "run", "--join-key", "k"}
			},
			want: []string{"--join-key-file FILE", "$EXECHOST_JOIN_KEY"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(EnvGatewayToken, "")
			t.Setenv(state.EnvDir, "")
			dir := t.TempDir()
			args := c.setup(t, dir)
			var out, errb bytes.Buffer
			code := run(append([]string{"--state-dir", dir}, args...), &out, &errb)
			got := strings.ReplaceAll(errb.String(), dir, "DIR")
			if code != c.code {
				t.Errorf("exit %d, want %d\n%s", code, c.code, got)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("stderr lacks %q:\n%s", w, got)
				}
			}
			for _, w := range c.notWant {
				if strings.Contains(got, w) {
					t.Errorf("stderr says %q, the fix for another situation:\n%s", w, got)
				}
			}
		})
	}
}
