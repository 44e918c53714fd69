package gateway

import (
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/session"
)

// statusFor is exec.status for an agent connection: only runs of the
// asking session are visible. A run of another session answers exactly
// like an unknown run, so run ids cannot be probed.
func (g *Gateway) statusFor(p bridge.ExecStatusParams) (bridge.ExecStatusResult, error) {
	if err := checkSession(p.AgentID, p.SessionKey); err != nil {
		return bridge.ExecStatusResult{}, err
	}
	key := session.NewKey(p.AgentID, p.SessionKey)
	g.mu.Lock()
	r := g.runs[p.RunID]
	mine := r != nil && r.key == key
	g.mu.Unlock()
	if !mine {
		return bridge.ExecStatusResult{}, bridge.Errorf(bridge.CodeNotFound,
			"unknown run %q for session %s/%s (runs are kept for %s after they finish)",
			p.RunID, key.Agent, key.Session, RunRetention).WithHint("pass the agentId and sessionKey the run was started with")
	}
	return g.status(p.RunID)
}

// agentNodes is nodes.list for an agent connection: the nodes the agent
// may target. An agent bound by tools.exec.node sees only its node (none
// when the binding matches nothing); an unbound agent may target any
// paired node.
func (g *Gateway) agentNodes(agentID string) (bridge.NodesResult, error) {
	if err := checkSession(agentID, ""); err != nil {
		return bridge.NodesResult{}, err
	}
	all := g.listPaired()
	binding := g.Config().Binding(session.NewKey(agentID, "").Agent)
	if binding == "" {
		return bridge.NodesResult{Nodes: all}, nil
	}
	out := []bridge.NodeView{}
	if c, err := Select(g.candidates(), binding); err == nil {
		for _, n := range all {
			if n.NodeID == c.ID {
				out = append(out, n)
			}
		}
	}
	return bridge.NodesResult{Nodes: out}, nil
}
