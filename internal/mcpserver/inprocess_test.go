package mcpserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/client"
	"github.com/exechost/exechost/internal/config"
	"github.com/exechost/exechost/internal/gateway"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/testproc"
)

// These tests run a real gateway (host=gateway, with the real host engine)
// in this process on loopback, and the MCP server over the SDK's in-memory
// transports, so that the server's own code runs under the race detector.

// liveGateway is an in-process gateway that can be stopped and restarted
// on the same address with the same state.
type liveGateway struct {
	t    *testing.T
	dir  string
	addr string
	stop context.CancelFunc
	done chan struct{}
}

func startLiveGateway(t *testing.T, dir, addr string) *liveGateway {
	t.Helper()
	cfg := config.Default()
	cfg.Tools.Exec = config.Exec{Host: "gateway", Security: "full", Ask: "off"}
	eng := host.NewEngine(dir, policy.HostGateway, "gateway")
	gw, err := gateway.New(gateway.Options{StateDir: dir, Config: cfg, Executor: eng})
	if err != nil {
		t.Fatal(err)
	}
	eng.OnEvent = gw.HostEvent
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &liveGateway{t: t, dir: dir, addr: ln.Addr().String(), stop: cancel, done: make(chan struct{})}
	go func() { defer close(g.done); _ = gw.Serve(ctx, ln) }()
	t.Cleanup(g.shutdown)
	return g
}

func (g *liveGateway) shutdown() {
	g.stop()
	<-g.done
}

func (g *liveGateway) url() string { return "ws://" + g.addr }

// dialer returns a DialFunc presenting the gateway's token from dir and
// pinning its key, as the CLI does.
func dialer(url, dir string) DialFunc {
	return func(ctx context.Context, role string) (*client.Client, error) {
		auth, err := client.StateDirAuth(dir)
		if err != nil {
			return nil, err
		}
		return client.Dial(ctx, url, client.Options{Role: role, Auth: auth,
			Client: bridge.ClientInfo{Name: "mcpserver-test", Version: "test", Platform: runtime.GOOS}})
	}
}

func gatewayPolicy(t *testing.T) string {
	t.Helper()
	echo, err := exec.LookPath("echo")
	if err != nil {
		t.Fatal(err)
	}
	pats := []string{fmt.Sprintf("%q", echo), `"/bin/echo"`, `"/usr/bin/echo"`}
	if real, err := filepath.EvalSymlinks(echo); err == nil {
		pats = append(pats, fmt.Sprintf("%q", real))
	}
	var list []string
	for _, p := range pats {
		list = append(list, `{"pattern":`+p+`}`)
	}
	return `{"version":1,"defaults":{"security":"allowlist","ask":"off","askFallback":"deny"},
		"agents":{"*":{"allowlist":[` + strings.Join(list, ",") + `]}}}`
}

// connectInMemory runs srv on an in-memory transport and returns the
// client's session.
func connectInMemory(t *testing.T, srv *Server) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, st) }()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	cs, err := client.Connect(cctx, ct, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		if err := testproc.Recv(t, done, "the server's Run after cancel"); err != nil {
			t.Errorf("server Run: %v", err)
		}
	})
	return cs
}

func callText(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (string, bool) {
	t.Helper()
	text, isErr, err := callTextErr(cs, tool, args)
	if err != nil {
		t.Fatal(err)
	}
	return text, isErr
}

func callTextErr(cs *mcp.ClientSession, tool string, args map[string]any) (string, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", false, fmt.Errorf("call %s: protocol error %w", tool, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError, nil
}

func TestInProcessGateway(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "exec-approvals.json"), []byte(gatewayPolicy(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startLiveGateway(t, dir, "127.0.0.1:0")
	var dials atomic.Int32
	dial := dialer(gw.url(), dir)
	srv, err := New(Options{GatewayURL: gw.url(), AgentID: "tester", Dial: func(ctx context.Context, role string) (*client.Client, error) {
		dials.Add(1)
		return dial(ctx, role)
	}})
	if err != nil {
		t.Fatal(err)
	}
	cs := connectInMemory(t, srv)

	t.Run("concurrent calls share one connection", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := range 8 {
			wg.Add(2)
			go func() {
				defer wg.Done()
				text, isErr, err := callTextErr(cs, ToolExec, map[string]any{"command": fmt.Sprintf("echo concurrent-%d", i)})
				switch {
				case err != nil:
					errs <- err
				case isErr || !strings.Contains(text, fmt.Sprintf("concurrent-%d\n", i)):
					errs <- fmt.Errorf("exec %d: isError=%v\n%s", i, isErr, text)
				}
			}()
			go func() {
				defer wg.Done()
				if text, isErr, err := callTextErr(cs, ToolExecStatus, map[string]any{"runId": "run-nope"}); err != nil || !isErr || !strings.Contains(text, "unknown run") {
					errs <- fmt.Errorf("exec_status: err=%v isError=%v\n%s", err, isErr, text)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if n := dials.Load(); n != 1 {
			t.Errorf("16 concurrent calls dialed the gateway %d times, want 1", n)
		}
	})

	t.Run("denial on the gateway host", func(t *testing.T) {
		text, isErr := callText(t, cs, ToolExec, map[string]any{"command": "id"})
		if !isErr {
			t.Fatalf("exec id: want an error result, got:\n%s", text)
		}
		for _, want := range []string{"Denied: SYSTEM_RUN_DENIED: allowlist miss", "--agent 'tester'", "What to do:"} {
			if !strings.Contains(text, want) {
				t.Errorf("exec id: missing %q in:\n%s", want, text)
			}
		}
		// exec_status drains the session's events too.
		text, _ = callText(t, cs, ToolExecStatus, map[string]any{"runId": "run-nope"})
		if text2, _ := callText(t, cs, ToolNodes, map[string]any{}); !strings.Contains(text+text2, "Exec denied (node=gateway") {
			t.Errorf("the denial's event never reached a later result:\n%s\n%s", text, text2)
		}
	})

	t.Run("restart", func(t *testing.T) {
		addr := gw.addr
		gw.shutdown()
		text, isErr := callText(t, cs, ToolExec, map[string]any{"command": "echo down"})
		if !isErr || !(strings.Contains(text, "gateway unreachable at "+gw.url()) || strings.Contains(text, "lost the connection")) {
			t.Fatalf("exec with the gateway stopped: isError=%v\n%s", isErr, text)
		}
		text, isErr = callText(t, cs, ToolNodes, map[string]any{})
		if !isErr || !strings.Contains(text, "gateway unreachable at "+gw.url()) {
			t.Fatalf("nodes with the gateway stopped: isError=%v\n%s", isErr, text)
		}
		startLiveGateway(t, dir, addr)
		text, isErr = callText(t, cs, ToolExec, map[string]any{"command": "echo up again"})
		if isErr || !strings.Contains(text, "up again\n") {
			t.Fatalf("first exec after the restart: isError=%v\n%s", isErr, text)
		}
	})
}

func TestNewNeedsDialer(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Fatal("New without Dial succeeded")
	}
}
