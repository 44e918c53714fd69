package cli

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/approver"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/node"
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
			c := &approver.ExecClient{SocketPath: ra.client.SocketPath, Token: ra.client.Token}
			res, err := c.Exec(context.Background(), bridge.SystemRunParams{Command: []string{"/bin/echo", "hi"}, AgentID: "main"})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Exec: %v, want an error containing %q", err, tt.wantErr)
				}
				var xe *bridge.Error
				if errors.As(err, &xe) == approver.ExecNotRun(err) {
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

func TestNodeExecutor(t *testing.T) {
	dir := t.TempDir()
	if _, err := approvals.NewStore(dir).Ensure(); err != nil {
		t.Fatal(err)
	}
	eng := host.NewEngine(dir, policy.HostNode, "n")
	tests := []struct {
		execHost, fallback string
		wantForward        bool
		wantFallback       string
		usage              bool
	}{
		{execHost: "", fallback: "", wantForward: false},
		{execHost: "local", fallback: "deny", wantForward: false},
		{execHost: "app", fallback: "", wantForward: true, wantFallback: node.FallbackLocal},
		{execHost: "app", fallback: "deny", wantForward: true, wantFallback: node.FallbackDeny},
		{execHost: "desktop", usage: true},
		{execHost: "app", fallback: "full", usage: true},
	}
	for _, tt := range tests {
		t.Run(tt.execHost+"/"+tt.fallback, func(t *testing.T) {
			exe, fw, err := nodeExecutor(dir, eng, tt.execHost, tt.fallback)
			if tt.usage {
				var ue usageError
				if !errors.As(err, &ue) {
					t.Fatalf("err %v, want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (fw != nil) != tt.wantForward {
				t.Fatalf("forwarder %v, want forwarding %v", fw, tt.wantForward)
			}
			if !tt.wantForward {
				if exe != node.Executor(eng) {
					t.Errorf("executor %T, want the local engine", exe)
				}
				return
			}
			if fw.Fallback != tt.wantFallback || fw.Local != node.Executor(eng) || fw.Client.SocketPath != filepath.Join(dir, "exec-approvals.sock") || len(fw.Client.Token) == 0 {
				t.Errorf("forwarder %+v, client %+v", fw, fw.Client)
			}
		})
	}
}
