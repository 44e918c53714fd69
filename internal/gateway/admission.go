package gateway

import (
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/config"
)

// admit takes a slot (g.adm, an inflight.Limiter) for one of agent's execs
// under cfg's gateway.limits (config.Limits), or refuses with BUSY naming
// the limit that is full and how to raise it. A run takes its slot before
// it is registered and gives it back when it finishes (finishRun), so a
// background run holds its slot for as long as it runs, up to a day. The
// limits are read from the configuration at each admission: a reload that
// lowers them refuses new execs until enough finish, and never stops a
// running one. release gives the slot back; calling it more than once is
// harmless.
func (g *Gateway) admit(cfg *config.Config, agent string) (release func(), err error) {
	lim := cfg.Gateway.Limits.WithDefaults()
	release, full := g.adm.Acquire(agent, lim.Execs, lim.ExecsPerAgent)
	switch {
	case full == nil:
		return release, nil
	case full.PerKey:
		return nil, bridge.Errorf(bridge.CodeBusy, "agent %s already has %d execs in flight, its limit (gateway.limits.execsPerAgent); retry when one finishes", agent, full.InFlight).WithHint("raise gateway.limits.execsPerAgent in exechost.json and reload the gateway with SIGHUP")
	default:
		return nil, bridge.Errorf(bridge.CodeBusy, "the gateway already has %d execs in flight, its limit (gateway.limits.execs); retry when one finishes", full.InFlight).WithHint("raise gateway.limits.execs in exechost.json and reload the gateway with SIGHUP")
	}
}
