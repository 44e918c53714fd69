package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/exechost/exechost/internal/client"
)

// guardLimit bounds each exchange of TestOversizedRequest. A deadline,
// not a timing assertion.
const guardLimit = 30 * time.Second

// TestOversizedRequest sends a real MCP session a 50 MB tools/call line,
// streamed (never held whole), between an initialize and a tools/list:
// over GuardedStdio the big request gets a JSON-RPC error with its id and
// the session answers the next request; the control, the SDK's own
// transport, ends the session at that line and tools/list goes unanswered.
func TestOversizedRequest(t *testing.T) {
	for _, guarded := range []bool{true, false} {
		t.Run(map[bool]string{true: "guarded", false: "control"}[guarded], func(t *testing.T) {
			srv, err := New(Options{GatewayURL: "ws://127.0.0.1:1", Dial: func(context.Context, string) (*client.Client, error) {
				return nil, errors.New("no gateway in this test")
			}})
			if err != nil {
				t.Fatal(err)
			}
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			var tr mcp.Transport = &mcp.IOTransport{Reader: inR, Writer: outW}
			if guarded {
				tr = GuardedStdio(inR, outW, MaxRequestLine)
			}
			ctx, cancel := context.WithTimeout(context.Background(), guardLimit)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- srv.Run(ctx, tr); outW.Close() }()
			resps := make(chan map[string]any, 8)
			go func() {
				sc := bufio.NewScanner(outR)
				sc.Buffer(nil, 1<<20)
				for sc.Scan() {
					var m map[string]any
					if json.Unmarshal(sc.Bytes(), &m) == nil {
						resps <- m
					}
				}
				close(resps)
			}()
			next := func() map[string]any {
				select {
				case m, ok := <-resps:
					if !ok {
						return nil
					}
					return m
				case <-ctx.Done():
					t.Fatal("no answer before the deadline")
					return nil
				}
			}
			send := func(s string) error { _, err := io.WriteString(inW, s+"\n"); return err }
			if err := send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`); err != nil {
				t.Fatal(err)
			}
			if m := next(); m == nil || m["id"] != float64(1) || m["result"] == nil {
				t.Fatalf("initialize: %v", m)
			}
			_ = send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			// 50 MB of command text, written in 1 MB pieces.
			go func() {
				if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"exec","arguments":{"command":"`); err != nil {
					return
				}
				piece := strings.Repeat("A", 1<<20)
				for range 50 {
					if _, err := io.WriteString(inW, piece); err != nil {
						return
					}
				}
				if _, err := io.WriteString(inW, "\"}}}\n"); err != nil {
					return
				}
				_ = send(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
			}()
			m := next()
			if !guarded {
				if m != nil {
					t.Logf("control answered %v", m)
				}
				if m2 := next(); m2 != nil && m2["id"] == float64(3) {
					t.Fatalf("control: the SDK transport survived the 50 MB line; the guard proves nothing")
				}
				inR.CloseWithError(io.ErrClosedPipe) // unblock the writer
				return
			}
			e, _ := m["error"].(map[string]any)
			if m == nil || m["id"] != float64(2) || e == nil || e["code"] != float64(codeInvalidRequest) || !strings.Contains(e["message"].(string), "refused") {
				t.Fatalf("the 50 MB request: want a JSON-RPC error for id 2, got %v", m)
			}
			m = next()
			if m == nil || m["id"] != float64(3) || m["result"] == nil || !strings.Contains(mustJSONString(m), `"exec"`) {
				t.Fatalf("tools/list after the big request: %v", m)
			}
			inW.Close()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-ctx.Done():
				t.Fatal("the server did not stop at end of input")
			}
		})
	}
}

func mustJSONString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestRequestID reads an id only from a complete member before the cut.
func TestRequestID(t *testing.T) {
	for in, want := range map[string]string{
		`{"jsonrpc":"2.0","id":7,"method":"x","params":{"a":"bbbb`: `7`,
		`{"id":"abc","params":`:                             `"abc"`,
		`{"jsonrpc":"2.0","method":"x","params":{"a":"bbbb`: `null`,
		`{"id":{"x":1}}`:                                    `null`,
		`not json`:                                          `null`,
	} {
		if got := string(requestID([]byte(in))); got != want {
			t.Errorf("requestID(%s) = %s, want %s", in, got, want)
		}
	}
}
