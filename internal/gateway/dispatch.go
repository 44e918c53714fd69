package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/exechost/exechost/internal/approvalroute"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/session"
	"github.com/exechost/exechost/internal/textsafe"
)

// This file is the gateway's one authorization table: every method a
// connection may call, which roles may call it and which handler answers
// each role. dispatch consults it before any handler runs, so where a
// method is implemented never decides who may call it. To add a method:
// declare its name beside the other wire names (internal/bridge), add a
// row to methodTable with a handler per allowed role, and add its expected
// roles to TestMethodTable (which fails for a method constant without a
// row). The connect handshake (bridge.MethodConnect) is not a method of
// an established connection and has no row.

// caller is who sent a request: its role, the name it announced at
// connect (for the audit log's actor and decidedBy) and, for a node, its
// connection.
type caller struct {
	role string
	name string
	node *nodeConn
	// agent is the agent id an agent credential acts for: every request
	// of the connection is for that agent (bindAgent). Empty for an
	// operator's credential, which may act for any agent.
	agent string
	// credential is the issued credential's id, empty for the gateway
	// token.
	credential string
}

// by names an operator for the audit log.
func (c caller) by() string {
	name := c.name
	if name == "" {
		name = "unnamed client"
	}
	return "operator " + name
}

// handler answers one method for one role.
type handler func(g *Gateway, ctx context.Context, c caller, method string, params json.RawMessage) (any, error)

// methodRow is one row of the table.
type methodRow struct {
	// roles maps each role that may call the method to the handler that
	// answers it (a role may get a scoped variant: an agent's nodes.list
	// shows only the nodes it may target). A role not listed is refused
	// FORBIDDEN, recorded in the audit log, before any handler runs.
	roles map[string]handler
	// why completes the refusal ("needs the operator role: <why>").
	why string
}

// Role sets of the table.
func operatorOnly(h handler) map[string]handler { return map[string]handler{bridge.RoleOperator: h} }
func clients(h handler) map[string]handler {
	return map[string]handler{bridge.RoleAgent: h, bridge.RoleOperator: h}
}
func nodeOnly(h handler) map[string]handler { return map[string]handler{bridge.RoleNode: h} }

// noPrompts is why an agent may not touch approval prompts.
const noPrompts = "an agent may not answer approval prompts"

// methodTable is every method of an established connection.
var methodTable = map[string]methodRow{
	// Agents and operators.
	bridge.MethodExec: {roles: clients(withParams(func(g *Gateway, ctx context.Context, p bridge.ExecParams) (any, error) {
		g.execCalls.Add(1) // a draining gateway waits for the answer (drain.go)
		defer g.execCalls.Add(-1)
		return g.tracedExec(ctx, p) // trace.go
	}))},
	bridge.MethodExecStatus: {roles: map[string]handler{
		// An agent sees only its own session's runs.
		bridge.RoleAgent: withParams(func(g *Gateway, _ context.Context, p bridge.ExecStatusParams) (any, error) {
			return g.statusFor(p)
		}),
		bridge.RoleOperator: withParams(func(g *Gateway, _ context.Context, p bridge.ExecStatusParams) (any, error) {
			return g.status(p.RunID)
		}),
	}},
	bridge.MethodSessionEvents: {roles: clients(withParams(func(g *Gateway, _ context.Context, p bridge.SessionParams) (any, error) {
		return g.sessionEvents(p)
	}))},
	// /approve inside session.command is the one permission that
	// depends on the arguments: the agent variant refuses it.
	bridge.MethodSessionCommand: {roles: map[string]handler{
		bridge.RoleAgent:    (*Gateway).sessionCommand,
		bridge.RoleOperator: (*Gateway).sessionCommand,
	}},
	// An agent sees the nodes it may target (its binding).
	bridge.MethodNodesList: {roles: map[string]handler{
		bridge.RoleAgent: withParams(func(g *Gateway, _ context.Context, p bridge.SessionParams) (any, error) {
			return g.agentNodes(p.AgentID)
		}),
		bridge.RoleOperator: func(g *Gateway, _ context.Context, _ caller, _ string, _ json.RawMessage) (any, error) {
			return bridge.NodesResult{Nodes: g.listPaired()}, nil
		},
	}},

	// Operators only: managing nodes and their policy, and answering
	// prompts, is the human operator's business.
	bridge.MethodNodesPending: {roles: operatorOnly(func(g *Gateway, _ context.Context, _ caller, _ string, _ json.RawMessage) (any, error) {
		return bridge.NodesResult{Nodes: g.listPending()}, nil
	})},
	bridge.MethodNodesApprove: {roles: operatorOnly(withParams(func(g *Gateway, ctx context.Context, p bridge.NodeIDParams) (any, error) {
		return g.approve(ctx, p.NodeID)
	}))},
	bridge.MethodNodesReject: {roles: operatorOnly(withParams(func(g *Gateway, ctx context.Context, p bridge.NodeIDParams) (any, error) {
		return g.reject(ctx, p.NodeID)
	}))},
	bridge.MethodNodesRemove: {roles: operatorOnly(withParams(func(g *Gateway, ctx context.Context, p bridge.NodeIDParams) (any, error) {
		return g.remove(ctx, p.NodeID)
	}))},
	bridge.MethodJoinKey: {roles: operatorOnly(withParams(func(g *Gateway, ctx context.Context, p bridge.JoinKeyParams) (any, error) {
		return g.joinKey(ctx, p)
	}))},
	bridge.MethodNodeApprovalGet: {roles: operatorOnly(nodeApprovalsHandler)},
	bridge.MethodNodeApprovalSet: {roles: operatorOnly(nodeApprovalsHandler)},
	approvalroute.MethodPending: {why: noPrompts, roles: operatorOnly(func(g *Gateway, _ context.Context, _ caller, _ string, _ json.RawMessage) (any, error) {
		return g.prompts.pending(), nil
	})},
	approvalroute.MethodResolve: {why: noPrompts, roles: operatorOnly(func(g *Gateway, _ context.Context, c caller, method string, params json.RawMessage) (any, error) {
		p, err := decode[approvalroute.ResolveParams](method, params)
		if err != nil {
			return nil, err
		}
		res, err := g.prompts.resolve(p.ID, p.Decision, c.by())
		if err != nil {
			return nil, err
		}
		g.log.Info("approval resolved", "id", res.ID, "decision", res.Decision, "by", res.By)
		return res, nil
	})},

	// Paired nodes only (handleNode refuses a node still pending).
	bridge.MethodInvokeResult: {roles: nodeOnly(func(g *Gateway, _ context.Context, c caller, method string, params json.RawMessage) (any, error) {
		return g.invokeResult(c.node, method, params)
	})},
	bridge.MethodNodeEvent: {roles: nodeOnly(func(g *Gateway, _ context.Context, c caller, _ string, params json.RawMessage) (any, error) {
		if err := g.nodeEvent(c.node, params); err != nil {
			return nil, err
		}
		return map[string]bool{"ok": true}, nil
	})},
	approvalroute.MethodNodeRequest: {roles: nodeOnly(func(g *Gateway, ctx context.Context, c caller, method string, params json.RawMessage) (any, error) {
		p, err := decode[approvalroute.NodeRequest](method, params)
		if err != nil {
			return nil, err
		}
		return g.prompts.nodeRequest(ctx, c.node.id, p)
	})},
	approvalroute.MethodNodeCancel: {roles: nodeOnly(func(g *Gateway, _ context.Context, c caller, method string, params json.RawMessage) (any, error) {
		p, err := decode[approvalroute.NodeCancel](method, params)
		if err != nil {
			return nil, err
		}
		g.prompts.nodeCancel(c.node.id, p.Ref)
		return map[string]bool{"ok": true}, nil
	})},
}

// withParams adapts a handler that needs only its decoded params.
func withParams[T any](f func(g *Gateway, ctx context.Context, p T) (any, error)) handler {
	return func(g *Gateway, ctx context.Context, _ caller, method string, params json.RawMessage) (any, error) {
		p, err := decode[T](method, params)
		if err != nil {
			return nil, err
		}
		return f(g, ctx, p)
	}
}

// dispatch answers one request: the table decides whether c may call
// method and which handler answers. An unknown method is NOT_FOUND; a
// known one outside c's roles is FORBIDDEN and recorded.
func (g *Gateway) dispatch(ctx context.Context, c caller, method string, params json.RawMessage) (any, error) {
	ctx = withCaller(ctx, c) // audit records name the actor (audit.go)
	row, ok := methodTable[method]
	if !ok {
		return nil, bridge.Errorf(bridge.CodeNotFound, "unknown method %q", method)
	}
	h := row.roles[c.role]
	if h == nil {
		return nil, g.forbidden(ctx, bridge.Errorf(bridge.CodeForbidden, "%s", forbiddenMessage(method, row)))
	}
	if c.role != bridge.RoleNode {
		release, err := g.callers.request(c, len(params))
		if err != nil {
			return nil, err
		}
		defer release()
	}
	if c.agent != "" {
		var err error
		if params, err = bindAgent(params, c.agent); err != nil {
			return nil, g.forbidden(ctx, bridge.AsError(err))
		}
	}
	return h(g, ctx, c, method, params)
}

// bindAgent makes a request of an agent credential's connection name that
// credential's agent: an absent or empty agentId becomes it, another one
// is refused. Every method an agent may call addresses its agent by the
// agentId field, so the agent's word never chooses whose session, runs
// or events it reaches. The params are read as strictly as the handler
// reads them (duplicate names refused), and a name that differs from
// agentId only in case is refused as naming another agent: a looser
// decoder downstream would have taken it (pitfall 23).
func bindAgent(params json.RawMessage, agent string) (json.RawMessage, error) {
	m := map[string]jsontext.Value{}
	if len(params) > 0 && string(params) != "null" {
		if err := bridge.UnmarshalRequest(params, &m); err != nil {
			return nil, bridge.Errorf(bridge.CodeInvalidRequest, "params must be an object with each name once: %v", err)
		}
	}
	for k, raw := range m {
		if !strings.EqualFold(k, "agentId") {
			continue
		}
		var claimed string
		if err := bridge.UnmarshalRequest(raw, &claimed); err != nil {
			return nil, bridge.Errorf(bridge.CodeInvalidRequest, "%s must be a string", textsafe.Strip(k, 16))
		}
		if k != "agentId" || (claimed != "" && claimed != agent) {
			return nil, bridge.Errorf(bridge.CodeForbidden, "this connection's credential acts for agent %q, not %q (as %q)", agent, textsafe.Strip(claimed, 64), textsafe.Strip(k, 16)).WithHint(fmt.Sprintf("each agent connects with its own credential: `exechost credentials issue --agent %s`", textsafe.Strip(claimed, 64)))
		}
	}
	m["agentId"], _ = jsontext.AppendQuote(nil, agent)
	return bridge.Marshal(m)
}

// forbiddenMessage says which roles may call method and why.
func forbiddenMessage(method string, row methodRow) string {
	roles := make([]string, 0, len(row.roles))
	for r := range row.roles {
		roles = append(roles, r)
	}
	slices.Sort(roles)
	msg := method + " needs the " + strings.Join(roles, " or ") + " role"
	if row.why != "" {
		msg += ": " + row.why
	}
	return msg
}

// sessionCommand runs a session's slash command; /approve is answered
// here for operators and refused for agents (an agent relaying its own
// /approve would approve its own command).
func (g *Gateway) sessionCommand(ctx context.Context, c caller, method string, params json.RawMessage) (any, error) {
	p, err := decode[bridge.SessionCommandParams](method, params)
	if err != nil {
		return nil, err
	}
	if err := checkSession(p.AgentID, p.SessionKey); err != nil {
		return nil, err
	}
	if isApprove(p.Text) {
		if c.role != bridge.RoleOperator {
			return nil, g.forbidden(ctx, bridge.Errorf(bridge.CodeForbidden, "/approve needs an operator connection: %s", noPrompts).WithHint("answer with `exechost approvals resolve ID DECISION`"))
		}
		return g.slashApprove(c, session.NewKey(p.AgentID, p.SessionKey), p.Text)
	}
	elevated := isCommand(p.Text, "/elevated")
	if elevated && c.role != bridge.RoleOperator {
		return nil, g.forbidden(ctx, bridge.Errorf(bridge.CodeForbidden, "/elevated needs an operator connection: it loosens security and ask beyond the agent's configuration").WithHint("an operator runs it, e.g. from the approver; /exec can only tighten"))
	}
	res, err := g.sessions.Command(session.NewKey(p.AgentID, p.SessionKey), p.Text)
	if err != nil {
		return nil, bridge.Errorf(bridge.CodeInvalidRequest, "%w", err)
	}
	if elevated {
		g.auditElevated(ctx, p, res)
	}
	return res, nil
}

// isCommand reports whether a slash command is name.
func isCommand(text, name string) bool {
	f := strings.Fields(text)
	return len(f) > 0 && strings.EqualFold(f[0], name)
}

// isApprove reports whether a slash command is /approve.
func isApprove(text string) bool { return isCommand(text, "/approve") }
