package node

import (
	"path/filepath"
	"testing"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
)

// TestExecutor: ExecHostLocal runs on the node's own engine; ExecHostApp
// forwards to this state directory's approver socket with its token and
// the chosen fallback.
func TestExecutor(t *testing.T) {
	dir := t.TempDir()
	if _, err := approvals.NewStore(dir).Ensure(); err != nil {
		t.Fatal(err)
	}
	eng := host.NewEngine(dir, policy.HostNode, "n")
	tests := []struct {
		mode, fallback string
		wantForward    bool
	}{
		{mode: ExecHostLocal, fallback: FallbackDeny},
		{mode: ExecHostApp, fallback: FallbackLocal, wantForward: true},
		{mode: ExecHostApp, fallback: FallbackDeny, wantForward: true},
	}
	for _, tt := range tests {
		t.Run(tt.mode+"/"+tt.fallback, func(t *testing.T) {
			exe, err := executor(dir, eng, tt.mode, tt.fallback)
			if err != nil {
				t.Fatal(err)
			}
			fw, forwards := exe.(*Forwarder)
			if forwards != tt.wantForward {
				t.Fatalf("executor %T, want forwarding %v", exe, tt.wantForward)
			}
			if !forwards {
				if exe != Executor(eng) {
					t.Errorf("executor %T, want the local engine", exe)
				}
				return
			}
			if fw.Fallback != tt.fallback || fw.Local != Executor(eng) || fw.Client.SocketPath != filepath.Join(dir, "exec-approvals.sock") || len(fw.Client.Token) == 0 {
				t.Errorf("forwarder %+v, client %+v", fw, fw.Client)
			}
		})
	}
}
