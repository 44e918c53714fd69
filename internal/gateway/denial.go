package gateway

import (
	"errors"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/explain"
)

// explainDenial adds to a denial from an execution host what the caller
// can act on (explain.Complete): the host's name, the construct when the
// host sent none, and the fixing command and a hint. The host itself sends
// what was missing, which level of its policy decided and the unknown keys
// of its file (host.DenialError), so nothing is asked of it afterwards.
// Other errors pass through unchanged.
func (g *Gateway) explainDenial(x *execution, err error) error {
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
		if d.Policy != nil {
			p := *d.Policy
			d.Policy = &p // the host's copy stays as it was sent
		}
	}
	// The agent whose policy the execution host applied (Exec sends it
	// the session key's agent).
	h := explain.Host{Name: x.label, Agent: x.key.Agent, Requested: x.eff.Security}
	if x.nc != nil {
		h.Name, h.Node = g.nodeLabel(x.nc.id), x.p.Node
		if h.Node == "" {
			h.Node = g.nodeQuery(x.nc.id)
		}
	}
	explain.Complete(d, h)
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
