package mcpserver

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/exechost/exechost/internal/config"
	"github.com/exechost/exechost/internal/gateway"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/trace"
)

// TestMetaTraceparentReachesTheExecSpan: an MCP client's _meta.traceparent
// on an exec call becomes the parent of the gateway's exec span. Control:
// the same call without _meta starts a trace of its own.
func TestMetaTraceparentReachesTheExecSpan(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "exec-approvals.json"), []byte(gatewayPolicy(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	exp := tracetest.NewInMemoryExporter()
	tr, err := trace.New(context.Background(), trace.Options{Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Tools.Exec = config.Exec{Host: "gateway", Security: "full", Ask: "off"}
	eng := host.NewEngine(dir, policy.HostGateway, "gateway")
	gw, err := gateway.New(gateway.Options{StateDir: dir, Config: cfg, Executor: eng, Tracer: tr})
	if err != nil {
		t.Fatal(err)
	}
	eng.OnEvent = gw.HostEvent
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = gw.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	url := "ws://" + ln.Addr().String()
	srv, err := New(Options{GatewayURL: url, AgentID: "tester", Dial: dialer(url, dir)})
	if err != nil {
		t.Fatal(err)
	}
	cs := connectInMemory(t, srv)
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	for _, meta := range []mcp.Meta{{"traceparent": "00-" + traceID + "-b7ad6b7169203331-01"}, nil} {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		res, err := cs.CallTool(cctx, &mcp.CallToolParams{Meta: meta, Name: ToolExec, Arguments: map[string]any{"command": "echo traced"}})
		ccancel()
		if err != nil || res.IsError {
			t.Fatalf("exec: %+v, %v", res, err)
		}
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	if got := spans[0].Parent.TraceID().String(); got != traceID || spans[0].Parent.SpanID().String() != "b7ad6b7169203331" {
		t.Errorf("span with _meta: parent %v, want trace %s", spans[0].Parent, traceID)
	}
	if spans[1].Parent.IsValid() {
		t.Errorf("span without _meta has parent %v", spans[1].Parent)
	}
}
