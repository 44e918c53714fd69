package cli

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/gateway"
	"github.com/exechost/exechost/internal/state"
)

// TestClientReadsGatewayListen: without --gateway, a client command dials
// where the state directory's exechost.json says the gateway listens, not
// the default port (where anything may squat). The control: the same
// command without that setting dials the default address, and does not
// reach this gateway.
func TestClientReadsGatewayListen(t *testing.T) {
	t.Setenv(EnvGateway, "")
	os.Unsetenv(EnvGateway)
	dir := t.TempDir()
	g, err := gateway.New(gateway.Options{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	cfg := filepath.Join(dir, state.ConfigFile)
	if err := os.WriteFile(cfg, []byte(`{"gateway": {"listen": "`+ln.Addr().String()+`"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"--state-dir", dir, "nodes", "list"}, &out, &errb); code != 0 {
		t.Fatalf("nodes list without --gateway: exit %d\nstderr: %s", code, errb.String())
	}
	if err := os.Remove(cfg); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"--state-dir", dir, "nodes", "list"}, &out, &errb); code == 0 || !strings.Contains(errb.String(), DefaultGateway) {
		t.Fatalf("control: without gateway.listen, exit %d\nstderr: %s", code, errb.String())
	}
	// A configuration that does not parse is an error, not a guess.
	if err := os.WriteFile(cfg, []byte(`{"gateway": {"listen": 7}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if code := run([]string{"--state-dir", dir, "nodes", "list"}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "find the gateway's address") {
		t.Fatalf("a bad exechost.json: exit %d\nstderr: %s", code, errb.String())
	}
}
