package host

import (
	"errors"
	"net"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/fschange"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/sandbox"
)

// SandboxEgress gives a host=sandbox run (the gateway's sandbox target)
// its lease on this engine's egress proxy when the agent's
// confine.network in this engine's exec-approvals.json is a list of
// names: the same list, ask, askFallback, prompts, allow-always and audit
// records as a jailed run of that agent (docs/sandbox.md, "Egress by
// name"). It returns nil (and a no-op end) when the network is no list.
// backend names the sandbox in the reach line prompts show. A policy
// that cannot be read fails closed: the run is refused, as the list it
// may hold could not be held. Call end once the run has ended.
func (e *Engine) SandboxEgress(req Request, backend string) (eg *sandbox.Egress, end func(), err error) {
	none := func() {}
	if req.RunID == "" {
		return nil, none, bridge.InvalidRequest(hint.Wrap(errors.New("egress: a sandbox run without a run id"), "the gateway gives every run its id"))
	}
	agent := req.AgentID
	if agent == "" {
		agent = "*"
	}
	var view fschange.View
	if !e.NoCache {
		view = e.watcher().Poll()
	}
	ap, err := e.agentPolicy(agent, view)
	if err != nil {
		return nil, none, err
	}
	p := &Prepared{Agent: agent, Cwd: req.Cwd, Text: req.RawCommand, Resolved: ap.resolved}
	p.Effective = policy.Combine(req.Security, req.Ask, p.Resolved.Local)
	if p.Text == "" {
		p.argv = req.Argv
	}
	if egressOf(p) == nil {
		return nil, none, nil
	}
	if _, err := e.egressProxy(); err != nil {
		return nil, none, err
	}
	reach := egressReach(p, "host=sandbox ("+backend+"): network: none")
	px, env, end, err := e.leaseEgress(p, req, sandbox.EgressAddr, reach)
	if err != nil {
		return nil, none, err
	}
	return &sandbox.Egress{
		Key:      egressPolicy(p),
		Patterns: egressOf(p),
		Env:      env,
		Serve:    func(ln net.Listener) error { return px.Serve(ln) },
	}, end, nil
}
