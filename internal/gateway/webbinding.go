package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/exechost/exechost/internal/approver/web"
	"github.com/exechost/exechost/internal/config"
)

// WebBinding returns the gateway's side of the web UI's node binding
// controls. SetExecNode changes tools.exec.node in the running
// configuration only: exechost.json (JSON with comments) is not rewritten,
// so a binding made in the UI lasts until the gateway restarts.
func (g *Gateway) WebBinding() web.GatewayBinding { return webBinding{g} }

type webBinding struct{ g *Gateway }

// Nodes implements web.GatewayBinding.
func (b webBinding) Nodes(context.Context) ([]web.Node, error) {
	var out []web.Node
	for _, n := range b.g.listPaired() {
		out = append(out, web.Node{ID: n.NodeID, DisplayName: n.DisplayName, RemoteIP: n.RemoteIP, Connected: n.Connected})
	}
	return out, nil
}

// Bindings implements web.GatewayBinding.
func (b webBinding) Bindings(context.Context) (map[string]string, error) {
	cfg := b.g.Config()
	out := map[string]string{}
	if cfg.Tools.Exec.Node != "" {
		out[""] = cfg.Tools.Exec.Node
	}
	for _, a := range cfg.Agents.List {
		if a.Tools.Exec.Node != "" {
			out[a.ID] = a.Tools.Exec.Node
		}
	}
	return out, nil
}

// SetExecNode implements web.GatewayBinding. A non-empty node must select
// a paired node, so a typo cannot silently strand an agent.
func (b webBinding) SetExecNode(ctx context.Context, agentID, node string) error {
	node = strings.TrimSpace(node)
	if node != "" {
		if _, err := Select(b.g.candidates(), node); err != nil {
			return fmt.Errorf("bind to node %q: %w", node, err)
		}
	}
	b.g.cfgMu.Lock()
	defer b.g.cfgMu.Unlock()
	c := *b.g.Config()
	c.Agents.List = slices.Clone(c.Agents.List)
	if agentID == "" {
		c.Tools.Exec.Node = node
	} else {
		i := slices.IndexFunc(c.Agents.List, func(a config.Agent) bool { return a.ID == agentID })
		if i < 0 {
			if node == "" {
				return nil
			}
			c.Agents.List = append(c.Agents.List, config.Agent{ID: agentID})
			i = len(c.Agents.List) - 1
		}
		c.Agents.List[i].Tools.Exec.Node = node
	}
	b.g.auditBinding(ctx, agentID, b.g.Config().Binding(agentID), node) // before it takes effect
	b.g.SetConfig(&c)
	b.g.log.Info("node binding changed from the web UI (until restart)", "agent", agentID, "node", node)
	return nil
}
