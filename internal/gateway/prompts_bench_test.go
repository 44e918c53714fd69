package gateway_test

import (
	"context"
	"encoding/json"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/approvalroute"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/prompt"
)

// BenchmarkRoutedPrompt measures one prompt routed node → gateway →
// operator (event) → exec.approval.resolve → node, over loopback
// WebSockets, with an operator client that answers every request at once.
func BenchmarkRoutedPrompt(b *testing.B) {
	e := newEnv(b, fullConfig)
	n := e.addRoutedNode(b, "bench", policyAsk, approvalroute.Gateway, nil, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var self atomic.Pointer[bridge.Conn]
	op, _, err := bridge.Dial(ctx, e.url, bridge.ConnectParams{Role: bridge.RoleOperator, Auth: bridge.Auth{Token: e.token},
		Client: bridge.ClientInfo{Name: "bench", Platform: runtime.GOOS}}, nil, bridge.Options{
		OnEvent: func(event string, payload json.RawMessage) {
			if event != approvalroute.EventRequested {
				return
			}
			var r approvalroute.Requested
			if json.Unmarshal(payload, &r) != nil {
				return
			}
			go func() {
				cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_ = self.Load().Call(cctx, approvalroute.MethodResolve, approvalroute.ResolveParams{ID: r.ID, Decision: "allow-once"}, nil)
			}()
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	self.Store(op)
	defer op.Close("bench done")
	p := n.prompter
	req := prompt.Request{Command: "true", Choices: []string{"allow-once", "deny"}}
	b.ResetTimer()
	for b.Loop() {
		pctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if _, _, err := p.Prompt(pctx, req); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
}
