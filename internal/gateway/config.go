package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/config"
)

// The configuration in effect is the loaded file (base) with the web UI's
// node binding edits (execNodes) applied on top. Both change only under
// cfgMu, and every change recomputes the result from both, so a SIGHUP
// reload racing a binding edit loses neither: the edit survives the reload
// (it lasts until restart, as the UI promises) and the reload's other
// settings survive the edit.

// execNode is one web UI binding edit: tools.exec.node of AgentID ("" for
// the global default) set to Node.
type execNode struct {
	AgentID, Node string
}

// Config returns the configuration in effect.
func (g *Gateway) Config() *config.Config { return g.cfg.Load() }

// SetConfig replaces the loaded configuration for every later request
// (a reload); open connections stay, and node bindings made in the web UI
// stay applied on top. Listen address and TLS changes need a restart.
func (g *Gateway) SetConfig(c *config.Config) {
	g.cfgMu.Lock()
	defer g.cfgMu.Unlock()
	old := g.base
	g.base = c
	g.cfg.Store(withExecNodes(c, g.execNodes))
	if old != nil && (old.Gateway.Listen != c.Gateway.Listen || old.Gateway.TLS != c.Gateway.TLS) {
		g.log.Warn("gateway.listen and gateway.tls changes take effect after a restart")
	}
}

// withExecNodes returns base with the binding edits applied, in order;
// base itself is never modified (readers hold it without a lock).
func withExecNodes(base *config.Config, edits []execNode) *config.Config {
	if len(edits) == 0 {
		return base
	}
	c := *base
	c.Agents.List = slices.Clone(c.Agents.List)
	for _, e := range edits {
		if e.AgentID == "" {
			c.Tools.Exec.Node = e.Node
			continue
		}
		i := slices.IndexFunc(c.Agents.List, func(a config.Agent) bool { return a.ID == e.AgentID })
		if i < 0 {
			if e.Node == "" {
				continue
			}
			c.Agents.List = append(c.Agents.List, config.Agent{ID: e.AgentID})
			i = len(c.Agents.List) - 1
		}
		c.Agents.List[i].Tools.Exec.Node = e.Node
	}
	return &c
}

// PairedNodes lists the paired nodes, connected or not (for the web UI's
// binding controls).
func (g *Gateway) PairedNodes() []bridge.NodeView { return g.listPaired() }

// ExecBindings returns the explicit tools.exec.node settings in effect:
// agent id → node, "" for the global default.
func (g *Gateway) ExecBindings() map[string]string {
	cfg := g.Config()
	out := map[string]string{}
	if cfg.Tools.Exec.Node != "" {
		out[""] = cfg.Tools.Exec.Node
	}
	for _, a := range cfg.Agents.List {
		if a.Tools.Exec.Node != "" {
			out[a.ID] = a.Tools.Exec.Node
		}
	}
	return out
}

// SetExecNode sets tools.exec.node of agentID ("" for the global default)
// in the running configuration only: exechost.json (JSON with comments) is
// not rewritten, so the binding lasts until the gateway restarts, across
// reloads. A non-empty node must select a paired node, so a typo cannot
// silently strand an agent. The change is audited before it takes effect.
func (g *Gateway) SetExecNode(ctx context.Context, agentID, node string) error {
	node = strings.TrimSpace(node)
	if node != "" {
		if _, err := Select(g.candidates(), node); err != nil {
			return fmt.Errorf("bind to node %q: %w", node, err)
		}
	}
	// cfgMu is held across the audit record (and its fsync) so the
	// record and the change it describes are in the same order as other
	// changes; no exec waits on it, since Config is a lock-free load.
	g.cfgMu.Lock()
	defer g.cfgMu.Unlock()
	g.auditBinding(ctx, agentID, g.Config().Binding(agentID), node)
	// A later edit of the same agent replaces the earlier one, so the
	// list stays one entry per agent however often the UI is used.
	g.execNodes = slices.DeleteFunc(g.execNodes, func(e execNode) bool { return e.AgentID == agentID })
	g.execNodes = append(g.execNodes, execNode{AgentID: agentID, Node: node})
	g.cfg.Store(withExecNodes(g.base, g.execNodes))
	g.log.Info("node binding changed from the web UI (until restart)", "agent", agentID, "node", node)
	return nil
}
