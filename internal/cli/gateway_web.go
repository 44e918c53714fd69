package cli

import (
	"context"
	"fmt"

	"github.com/exechost/exechost/internal/approverui/web"
	"github.com/exechost/exechost/internal/gateway"
)

// gatewayWebStarter returns the gateway.RunOptions.OnStart hook that serves
// the approver web UI for the gateway's operators (`exechost gateway --web
// ADDR`) once the gateway runs, or nil when addr is empty. The address is
// bound now, so a bad or busy one fails the command before the gateway
// starts. The UI shows the prompts of every execution host routed to the
// gateway and its node binding controls.
func (g *globals) gatewayWebStarter(ctx context.Context, addr string) (func(string, *gateway.Gateway), error) {
	if addr == "" {
		return nil, nil
	}
	dir, err := g.dir()
	if err != nil {
		return nil, err
	}
	if err := web.CheckAddr(addr); err != nil {
		return nil, usageError{fmt.Errorf("--web: %w", err)}
	}
	ln, err := web.Listen(ctx, addr)
	if err != nil {
		return nil, err
	}
	return func(_ string, gw *gateway.Gateway) {
		u, err := web.Serve(ctx, ln, web.Options{
			Broker: gw.Approvals(), StateDir: dir, Gateway: webBinding{gw}, DecidedBy: "operator web UI", OnEdit: gw.RecordWebEdit,
			Logf: func(format string, args ...any) { fmt.Fprintf(g.stderr, "exechost: "+format+"\n", args...) },
		})
		if err != nil {
			fmt.Fprintf(g.stderr, "exechost: gateway web UI not started: %v\n", err)
			return
		}
		fmt.Fprintf(g.stdout, "gateway web UI: %s\n", u)
	}, nil
}

// webBinding adapts a gateway to the web UI's node binding controls. It
// lives here, in the composition root, so the gateway does not import the
// UI package.
type webBinding struct{ gw *gateway.Gateway }

// Nodes implements web.GatewayBinding.
func (b webBinding) Nodes(context.Context) ([]web.Node, error) {
	var out []web.Node
	for _, n := range b.gw.PairedNodes() {
		out = append(out, web.Node{ID: n.NodeID, DisplayName: n.DisplayName, RemoteIP: n.RemoteIP, Connected: n.Connected})
	}
	return out, nil
}

// Bindings implements web.GatewayBinding.
func (b webBinding) Bindings(context.Context) (map[string]string, error) {
	return b.gw.ExecBindings(), nil
}

// SetExecNode implements web.GatewayBinding.
func (b webBinding) SetExecNode(ctx context.Context, agentID, node string) error {
	return b.gw.SetExecNode(ctx, agentID, node)
}
