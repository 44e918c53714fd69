package gateway_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/config"
	"github.com/exechost/exechost/internal/gateway"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/node"
	"github.com/exechost/exechost/internal/policy"
)

// Policies written into state directories.
const (
	policyFull = `{"version":1,"defaults":{"security":"full","ask":"off","askFallback":"deny"}}`
	policyDeny = `{"version":1,"defaults":{"security":"deny","ask":"off","askFallback":"deny"}}`
)

// env is an in-process gateway on a loopback port with real node runners
// and real host engines, so the race detector sees every goroutine.
type env struct {
	g     *gateway.Gateway
	url   string
	token string
	ctx   context.Context
	stop  context.CancelFunc // stops Serve (a SIGTERM)
	done  <-chan struct{}    // closed when Serve returned
}

func writePolicy(tb testing.TB, dir, p string) {
	tb.Helper()
	if err := os.WriteFile(filepath.Join(dir, "exec-approvals.json"), []byte(p), 0o600); err != nil {
		tb.Fatal(err)
	}
}

func newEnv(tb testing.TB, cfgText string, with ...func(*gateway.Options)) *env {
	tb.Helper()
	dir := tb.TempDir()
	writePolicy(tb, dir, policyFull)
	cfg, err := config.Parse("test", []byte(cfgText))
	if err != nil {
		tb.Fatal(err)
	}
	eng := host.NewEngine(dir, policy.HostGateway, "gateway")
	opts := gateway.Options{StateDir: dir, Config: cfg, Executor: eng}
	for _, f := range with {
		f(&opts)
	}
	g, err := gateway.New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	eng.OnEvent = g.HostEvent
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Serve(ctx, ln) }()
	tb.Cleanup(func() { cancel(); <-done })
	return &env{g: g, url: "ws://" + ln.Addr().String(), token: g.Token(), ctx: ctx, stop: cancel, done: done}
}

// client connects with role using the gateway token.
func (e *env) client(tb testing.TB, role string) *bridge.Conn {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := bridge.Dial(ctx, e.url, bridge.ConnectParams{Role: role, Auth: bridge.Auth{Token: e.token},
		Client: bridge.ClientInfo{Name: "test", Platform: runtime.GOOS}}, nil, bridge.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close("test done") })
	return c
}

// addNode starts a node runner with its own state directory and policy
// and pairs it through Approve; with adjusts its options.
func (e *env) addNode(tb testing.TB, name, pol string, with ...func(*node.Options)) string {
	tb.Helper()
	dir := tb.TempDir()
	writePolicy(tb, dir, pol)
	paired := make(chan string, 1)
	eng := host.NewEngine(dir, policy.HostNode, "")
	opts := node.Options{
		StateDir: dir, GatewayURL: e.url, DisplayName: name, Executor: eng,
		OnPending: func(id string) {
			// The node learns it is pending as the gateway files it;
			// retry briefly until the gateway lists it.
			var err error
			for range 100 {
				if _, err = e.g.Approve(e.ctx, id); err == nil {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			tb.Errorf("approve %s: %v", id, err)
		},
		OnPaired: func(id string) {
			select {
			case paired <- id:
			default:
			}
		},
	}
	for _, f := range with {
		f(&opts)
	}
	r, err := node.New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	eng.NodeID, eng.OnEvent = r.NodeID(), r.HostEvent
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	tb.Cleanup(func() { cancel(); <-done })
	select {
	case id := <-paired:
		return id
	case <-time.After(30 * time.Second):
		tb.Fatalf("node %s did not pair", name)
		return ""
	}
}

func call[T any](tb testing.TB, c *bridge.Conn, method string, params any) (T, error) {
	tb.Helper()
	var out T
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := c.Call(ctx, method, params, &out)
	return out, err
}
