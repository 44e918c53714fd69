package cli

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/asksock"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/policy"
)

// TestApproverExecHostFlag runs `exechost approver --exec-host` and
// forwards commands to it: an ask prompts in the approver's own queue
// (answered by --auto-decide), and without the flag exec frames are
// refused with a hint.
func TestApproverExecHostFlag(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantOut string
		wantErr string
	}{
		{name: "allowed after a prompt", args: []string{"--exec-host", "--auto-decide", "allow-once"}, wantOut: "hi\n"},
		{name: "denied by the prompt", args: []string{"--exec-host", "--auto-decide", "deny"}, wantErr: policy.ErrUserDenied.Error()},
		{name: "not an exec host", args: []string{"--auto-decide", "allow-once"}, wantErr: "--exec-host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ra := startApprover(t, tt.args...)
			dir := filepath.Dir(ra.client.SocketPath)
			_, err := approvals.NewStore(dir).Update(func(f *approvals.File) error {
				f.Defaults.Security, f.Defaults.Ask = string(policy.SecurityAllowlist), string(policy.AskAlways)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			c := &asksock.ExecClient{SocketPath: ra.client.SocketPath, Token: ra.client.Token}
			res, err := c.Exec(context.Background(), bridge.SystemRunParams{Command: []string{"/bin/echo", "hi"}, AgentID: "main"})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Exec: %v, want an error containing %q", err, tt.wantErr)
				}
				var xe *bridge.Error
				if errors.As(err, &xe) == asksock.ExecNotRun(err) {
					t.Errorf("error %v: a signed denial and a refusal must differ", err)
				}
				return
			}
			if err != nil || res.Stdout != tt.wantOut {
				t.Fatalf("Exec: %+v, %v; want stdout %q", res, err, tt.wantOut)
			}
			waitOut(t, ra.stderr, "exec host: forwarded system.run runs in this session")
		})
	}
}

// TestNodeRunFlagsCheck: bad --exec-host, --exec-fallback,
// --approvals-route and --prompt-timeout values are usage errors, caught
// before node.Run touches the state directory.
func TestNodeRunFlagsCheck(t *testing.T) {
	tests := []struct {
		name  string
		f     nodeRunFlags
		usage bool
	}{
		{name: "defaults"},
		{name: "app deny", f: nodeRunFlags{execHost: "app", execFallback: "deny", route: routeFlags{route: "both"}}},
		{name: "bad exec host", f: nodeRunFlags{execHost: "desktop"}, usage: true},
		{name: "bad fallback", f: nodeRunFlags{execHost: "app", execFallback: "full"}, usage: true},
		{name: "bad route", f: nodeRunFlags{route: routeFlags{route: "moon"}}, usage: true},
		{name: "negative timeout", f: nodeRunFlags{route: routeFlags{promptTimeout: -1}}, usage: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.f.check()
			var ue usageError
			if tt.usage != errors.As(err, &ue) || (!tt.usage && err != nil) {
				t.Fatalf("check() = %v, want usage error %v", err, tt.usage)
			}
		})
	}
}
