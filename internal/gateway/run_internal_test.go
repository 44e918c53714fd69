package gateway

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/state"
)

// TestRunReload runs the whole daemon and asks it to reload: a good file
// takes effect through the same path as a binding edit (which it keeps),
// and a broken file keeps the running configuration.
func TestRunReload(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, state.ConfigFile)
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(cfgPath, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"tools": {"exec": {"security": "allowlist"}}}`)
	ctx, cancel := context.WithCancel(context.Background())
	reload := make(chan os.Signal)
	started := make(chan *Gateway, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, RunOptions{
			StateDir: dir, Listen: "127.0.0.1:0", Reload: reload,
			OnStart: func(_ string, g *Gateway) { started <- g },
		})
	}()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(waitLimit):
			t.Error("Run did not stop")
		}
	}()
	var g *Gateway
	select {
	case g = <-started:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(waitLimit):
		t.Fatal("gateway did not start")
	}
	if err := g.reg.put(nodeRecord{NodeID: "node-1"}); err != nil {
		t.Fatal(err)
	}
	if err := g.SetExecNode(ctx, "", "node-1"); err != nil {
		t.Fatal(err)
	}

	// reloadAndWait sends one reload and waits for the loop to take the
	// next one, so the first has been handled when it returns.
	reloadAndWait := func() {
		t.Helper()
		for range 2 {
			select {
			case reload <- syscall.SIGHUP:
			case <-time.After(waitLimit):
				t.Fatal("reload loop not listening")
			}
		}
	}
	write(`{"tools": {"exec": {"security": "full"}}}`)
	reloadAndWait()
	if c := g.Config(); c.Tools.Exec.Security != "full" || c.Tools.Exec.Node != "node-1" {
		t.Fatalf("after reload: security %q node %q, want full and the web UI's node-1", c.Tools.Exec.Security, c.Tools.Exec.Node)
	}
	write(`{"tools": {`)
	reloadAndWait()
	if c := g.Config(); c.Tools.Exec.Security != "full" || c.Tools.Exec.Node != "node-1" {
		t.Fatalf("after a broken file: security %q node %q, want the running full and node-1", c.Tools.Exec.Security, c.Tools.Exec.Node)
	}
}
