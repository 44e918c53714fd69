package gateway

import (
	"sync"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/config"
)

// admission counts execs in flight, in total and per agent, against
// gateway.limits (config.Limits). A run takes its slot before it is
// registered and gives it back when it finishes (finishRun), so a
// background run holds its slot for as long as it runs, up to a day. The
// limits are read from the configuration at each admission: a reload that
// lowers them refuses new execs until enough finish, and never stops a
// running one.
type admission struct {
	mu       sync.Mutex
	total    int
	perAgent map[string]int
}

// admit takes a slot for one of agent's execs under cfg's limits, or
// refuses with BUSY naming the limit that is full and how to raise it.
// release gives the slot back; calling it more than once is harmless.
func (g *Gateway) admit(cfg *config.Config, agent string) (release func(), err error) {
	lim := cfg.Gateway.Limits.WithDefaults()
	a := &g.adm
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.perAgent == nil {
		a.perAgent = map[string]int{}
	}
	switch {
	case a.perAgent[agent] >= lim.ExecsPerAgent:
		return nil, bridge.Errorf(bridge.CodeBusy,
			"agent %s already has %d execs in flight, its limit (gateway.limits.execsPerAgent); retry when one finishes (hint: raise gateway.limits.execsPerAgent in exechost.json and reload the gateway with SIGHUP)",
			agent, a.perAgent[agent])
	case a.total >= lim.Execs:
		return nil, bridge.Errorf(bridge.CodeBusy,
			"the gateway already has %d execs in flight, its limit (gateway.limits.execs); retry when one finishes (hint: raise gateway.limits.execs in exechost.json and reload the gateway with SIGHUP)",
			a.total)
	}
	a.total++
	a.perAgent[agent]++
	return sync.OnceFunc(func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.total--
		if a.perAgent[agent]--; a.perAgent[agent] <= 0 {
			delete(a.perAgent, agent)
		}
	}), nil
}
