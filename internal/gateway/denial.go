package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/explain"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/session"
)

// explainTimeout bounds reading a node's approvals to explain a denial;
// past it the denial goes out with what is known.
const explainTimeout = 5 * time.Second

// explainDenial adds to a denial from an execution host what the caller
// can act on (explain.Complete): the construct or missing executables,
// which file and level decided, unknown keys in that file and the fixing
// command. Other errors pass through unchanged. The host's own structured
// fields, when it sends them, win over what is worked out here.
func (g *Gateway) explainDenial(ctx context.Context, nc *nodeConn, eff policy.Settings, p bridge.ExecParams, err error) error {
	var be *bridge.Error
	if !errors.As(err, &be) || be.Code != bridge.CodeDenied {
		return err
	}
	// Execution hosts send the denial structured; its message is for
	// people and is never parsed (a host that sends none gets what the
	// command text and the host's file say).
	d := &bridge.Denial{}
	if be.Denial != nil {
		*d = *be.Denial
	}
	// The agent whose policy the execution host applied (Exec sends it
	// the session key's agent).
	h := explain.Host{Name: "gateway", Agent: session.NewKey(p.AgentID, p.SessionKey).Agent, Requested: eff.Security}
	if nc != nil {
		h.Name, h.Node = g.nodeLabel(nc.id), p.Node
		if h.Node == "" {
			h.Node = g.nodeQuery(nc.id)
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), explainTimeout)
		defer cancel()
		if raw, err := g.invoke(cctx, nc, bridge.CmdExecApprovalsGet, struct{}{}, explainTimeout, ""); err == nil {
			var res bridge.ApprovalsGetResult
			if bridge.Unmarshal(raw, &res) == nil {
				h.Path = res.Path
				h.File, _ = approvals.Parse(res.Path, res.File)
			}
		}
	} else if eff.Host == policy.HostGateway {
		s := approvals.NewStore(g.opts.StateDir)
		h.Path = s.Path
		h.File, _ = s.Load()
	}
	explain.Complete(d, h, p.Command)
	return &bridge.Error{Code: be.Code, Message: be.Message, Denial: d}
}

// configDenial explains a security=deny the gateway's own layers decided
// (the exec call, the session, the agent's or the global tools.exec).
func (g *Gateway) configDenial(level string) *bridge.Denial {
	file := "the built-in configuration"
	if path := g.Config().Path; path != "" {
		file = path
	}
	return &bridge.Denial{
		Reason: explain.ReasonDisabled,
		Policy: &bridge.DenialSource{Host: "gateway", File: file, Level: "request (" + level + ")", Setting: "security=deny"},
		Hint:   "set tools.exec.security in the gateway's exechost.json, or `/exec security=allowlist` for the session",
	}
}

// nodeLabel names a node for a person: its display name with a short id
// ("build-box (3f2a9c01…)"), or the id when it has no display name.
func (g *Gateway) nodeLabel(id string) string {
	for _, c := range g.candidates() {
		if c.ID == id && c.DisplayName != "" {
			return c.DisplayName + " (" + id[:min(len(id), 8)] + "…)"
		}
	}
	return id
}

// nodeQuery is what `--node` should say for the node: its display name
// when that selects exactly this node, else its id.
func (g *Gateway) nodeQuery(id string) string {
	cands := g.candidates()
	for _, c := range cands {
		if c.ID != id || c.DisplayName == "" {
			continue
		}
		if sel, err := Select(cands, c.DisplayName); err == nil && sel.ID == id {
			return c.DisplayName
		}
	}
	return id
}
