package gateway

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/gateway/approvalroute"
	"github.com/exechost/exechost/internal/session"
)

// caller is who sent a client request: its role and (for the audit log's
// decidedBy) the client name it announced at connect.
type caller struct {
	role string
	name string
}

// by names an operator for the audit log.
func (c caller) by() string {
	name := c.name
	if name == "" {
		name = "unnamed client"
	}
	return "operator " + name
}

// dispatchClient answers a client request: approval methods and the
// caller-aware variants of nodes.list, exec.status and session.command
// here, everything else in handleClient.
func (g *Gateway) dispatchClient(ctx context.Context, c caller, method string, params json.RawMessage) (any, error) {
	ctx = withCaller(ctx, c) // audit records name the actor (audit.go)
	switch method {
	case approvalroute.MethodPending, approvalroute.MethodResolve:
		if c.role != bridge.RoleOperator {
			// An agent must never answer a prompt about its own command.
			return nil, g.forbidden(ctx, bridge.Errorf(bridge.CodeForbidden, "%s needs the operator role: an agent may not answer approval prompts", method))
		}
		if method == approvalroute.MethodPending {
			return g.appr.pending(), nil
		}
		p, err := decode[approvalroute.ResolveParams](method, params)
		if err != nil {
			return nil, err
		}
		res, err := g.appr.resolve(p.ID, p.Decision, c.by())
		if err != nil {
			return nil, err
		}
		g.log.Info("approval resolved", "id", res.ID, "decision", res.Decision, "by", res.By)
		return res, nil
	case bridge.MethodNodesList:
		if c.role == bridge.RoleAgent {
			p, err := decode[bridge.SessionParams](method, params)
			if err != nil {
				return nil, err
			}
			return g.agentNodes(p.AgentID)
		}
	case bridge.MethodExecStatus:
		if c.role != bridge.RoleOperator {
			p, err := decode[bridge.ExecStatusParams](method, params)
			if err != nil {
				return nil, err
			}
			return g.statusFor(p)
		}
	case bridge.MethodSessionCommand:
		p, err := decode[bridge.SessionCommandParams](method, params)
		if err != nil {
			return nil, err
		}
		if isApprove(p.Text) {
			if err := checkSession(p.AgentID, p.SessionKey); err != nil {
				return nil, err
			}
			return g.slashApprove(c, session.NewKey(p.AgentID, p.SessionKey), p.Text)
		}
	}
	return g.handleClient(ctx, c.role, method, params)
}

// isApprove reports whether a slash command is /approve.
func isApprove(text string) bool {
	f := strings.Fields(text)
	return len(f) > 0 && strings.EqualFold(f[0], "/approve")
}
