package gateway

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/config"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/metrics"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/session"
	"github.com/exechost/exechost/internal/state"
)

// Command timeouts.
const (
	DefaultTimeout = bridge.DefaultExecTimeout
	MaxTimeout     = 24 * time.Hour
)

// paramLayer parses the exec tool's own policy parameters. An invalid value
// is an error listing the accepted ones, never silently ignored.
func paramLayer(p bridge.ExecParams) (policy.Settings, error) {
	var s policy.Settings
	var err error
	if p.Host != "" {
		if s.Host, err = policy.ParseHost(p.Host); err != nil {
			return s, bridge.Errorf(bridge.CodeInvalidRequest, "%w", err)
		}
	}
	if p.Security != "" {
		if s.Security, err = policy.ParseSecurity(p.Security); err != nil {
			return s, bridge.Errorf(bridge.CodeInvalidRequest, "%w", err)
		}
	}
	if p.Ask != "" {
		if s.Ask, err = policy.ParseAsk(p.Ask); err != nil {
			return s, bridge.Errorf(bridge.CodeInvalidRequest, "%w", err)
		}
	}
	s.Node = strings.TrimSpace(p.Node)
	return s, nil
}

// Exec runs the exec method: it resolves host, security, ask and node with
// the design's precedence (tool param → session override → agent → global
// → default), picks the execution host and returns the result with the
// session's queued system events. With YieldMs, a run still going after
// that long returns status "running" and continues in the background.
func (g *Gateway) Exec(ctx context.Context, p bridge.ExecParams) (bridge.ExecResult, error) {
	if strings.TrimSpace(p.Command) == "" {
		return bridge.ExecResult{}, g.refused(ctx, p, "", "", audit.ReasonInvalidRequest, bridge.Errorf(bridge.CodeInvalidRequest, "command is empty"))
	}
	if g.isDraining() {
		return bridge.ExecResult{}, g.refused(ctx, p, "", "", audit.ReasonDraining, bridge.Errorf(bridge.CodeUnavailable, "the gateway is shutting down; retry once it is back"))
	}
	param, err := paramLayer(p)
	if err != nil {
		return bridge.ExecResult{}, g.refused(ctx, p, "", "", audit.ReasonInvalidRequest, err)
	}
	if err := checkSession(p.AgentID, p.SessionKey); err != nil {
		return bridge.ExecResult{}, g.refused(ctx, p, "", "", audit.ReasonInvalidRequest, err)
	}
	key := session.NewKey(p.AgentID, p.SessionKey)
	cfg := g.Config()
	agentL, globalL := cfg.Layers(key.Agent)
	sessL := g.sessions.Overrides(key)
	eff := tightenOnly(policy.Resolve(param, sessL, agentL, globalL), sessL, agentL, globalL, g.sessions.Settings(key).Elevated != "")
	timeout := DefaultTimeout
	if p.TimeoutSec > 0 {
		timeout = min(time.Duration(p.TimeoutSec)*time.Second, MaxTimeout)
	}
	r := &run{id: "run-" + uuid.NewString(), key: key, host: eff.Host, started: time.Now(), done: make(chan struct{})}
	x := &execution{g: g, run: r, key: key, p: p, eff: eff, timeout: timeout}
	tg, ok := g.targets[eff.Host]
	if !ok {
		return bridge.ExecResult{}, g.refused(ctx, p, eff.Host, "", audit.ReasonInvalidRequest, bridge.Errorf(bridge.CodeInvalidRequest, "host %q has no execution target", eff.Host))
	}
	if err := tg.place(cfg, x); err != nil {
		return bridge.ExecResult{}, g.refused(ctx, p, eff.Host, eff.Node, "", err)
	}
	if !tg.boundary && eff.Security == policy.SecurityDeny {
		// Nothing would run whatever the execution host allows: say
		// which layer decided, so the caller knows what to change.
		why := fmt.Sprintf("%v (security=deny from %s; hint: set tools.exec.security in exechost.json, or /exec security=allowlist)",
			policy.ErrDisabled, securitySource(param, sessL, agentL, globalL))
		denied := g.refused(ctx, p, eff.Host, r.nodeID, audit.ReasonSecurityDeny,
			&bridge.Error{Code: bridge.CodeDenied, Message: why, Denial: g.configDenial(securitySource(param, sessL, agentL, globalL))})
		ev := x.event(bridge.EventExecDenied)
		ev.Reason = why
		x.emit(ev)
		g.opts.Metrics.ObserveExec(string(eff.Host), string(policy.DenyRun), metrics.OutcomeDenied, 0)
		return bridge.ExecResult{}, denied
	}
	if r.release, err = g.admit(cfg, key.Agent); err != nil { // admission.go
		return bridge.ExecResult{}, g.refused(ctx, p, eff.Host, r.nodeID, "", err)
	}
	g.addRun(r)
	// Every run has a deadline: the command's timeout plus room for a
	// prompt and the transport, even if a backend ignored its timeout.
	parent, limit := ctx, timeout+InvokeMargin+host.DefaultPromptTimeout
	if p.YieldMs > 0 {
		// A background run outlives the request (and its connection).
		parent = context.WithoutCancel(ctx)
	}
	runCtx, cancel := context.WithTimeout(parent, limit)
	do := func() {
		defer cancel()
		res, err := g.execute(runCtx, tg, x) // target.go
		g.finishRun(r, res, err)
	}
	if p.YieldMs <= 0 {
		do() // ends by runCtx's deadline at the latest
		if r.err != nil {
			return bridge.ExecResult{}, r.err
		}
		res := r.result
		g.delivered(r)
		res.Events = bridge.WithoutTailOf(g.sessions.Drain(key), res)
		return res, nil
	}
	go do()
	t := time.NewTimer(min(time.Duration(p.YieldMs)*time.Millisecond, timeout))
	defer t.Stop()
	select {
	case <-r.done:
	case <-t.C:
		return bridge.ExecResult{Status: bridge.ExecRunning, RunID: r.id, Host: string(r.host), NodeID: r.nodeID,
			Events: g.sessions.Drain(key)}, nil
	}
	if r.err != nil {
		return bridge.ExecResult{}, r.err
	}
	res := r.result
	g.delivered(r)
	res.Events = bridge.WithoutTailOf(g.sessions.Drain(key), res)
	return res, nil
}

// tightenOnly keeps security and ask of the exec call and the session's
// /exec at least as strict as the agent's configured values (exechost.json,
// agent then global): the model chooses the tool's parameters and may type
// /exec, so neither may loosen what the operator configured. A field
// exechost.json leaves unset sets no floor (the built-in default only
// fills what nobody chose; the execution host's own exec-approvals.json
// gates the run either way). An operator's /elevated (elevated) is the
// one way to loosen, and then the session's settings are the floor. Host
// and node still come from the usual precedence.
func tightenOnly(eff, sess, agent, global policy.Settings, elevated bool) policy.Settings {
	layers := []policy.Settings{agent, global}
	if elevated {
		layers = []policy.Settings{sess, agent, global}
	}
	for _, l := range layers {
		if l.Security.Valid() {
			eff.Security = policy.Stricter(eff.Security, l.Security)
			break
		}
	}
	for _, l := range layers {
		if l.Ask.Valid() {
			eff.Ask = policy.MoreAsking(eff.Ask, l.Ask)
			break
		}
	}
	return eff
}

// securitySource names the layer that set the effective security, for
// denial messages: the first layer, in precedence order, that asked for
// it.
func securitySource(param, sess, agent, global policy.Settings) string {
	eff := tightenOnly(policy.Resolve(param, sess, agent, global), sess, agent, global, false).Security
	for _, l := range []struct {
		name string
		s    policy.Settings
	}{{"the exec call", param}, {"the session (/exec)", sess}, {"the agent's tools.exec", agent}, {"tools.exec", global}} {
		if l.s.Security == eff {
			return l.name
		}
	}
	return "the built-in default"
}

// Bounds on caller-chosen names kept in memory.
const (
	MaxAgentID    = 128
	MaxSessionKey = 512
)

// checkSession bounds the agent id and session key a caller may create
// state under.
func checkSession(agent, sess string) error {
	if len(agent) > MaxAgentID || len(sess) > MaxSessionKey {
		return bridge.Errorf(bridge.CodeInvalidRequest, "agentId (max %d bytes) or sessionKey (max %d bytes) too long", MaxAgentID, MaxSessionKey)
	}
	return nil
}

// exactLive returns the connected node whose id is exactly id, or nil.
func (g *Gateway) exactLive(id string) *nodeConn {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.live[id]
}

// candidates lists paired nodes for selection.
func (g *Gateway) candidates() []Candidate {
	recs := g.reg.all()
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Candidate, 0, len(recs))
	for _, rec := range recs {
		_, live := g.live[rec.NodeID]
		out = append(out, Candidate{ID: rec.NodeID, DisplayName: rec.DisplayName, RemoteIP: rec.RemoteIP, Connected: live})
	}
	return out
}

// selectNode resolves q to a connected node.
func (g *Gateway) selectNode(q string) (*nodeConn, error) {
	c, err := Select(g.candidates(), q)
	if err != nil {
		return nil, selectError(err)
	}
	return g.connected(c)
}

func (g *Gateway) connected(c Candidate) (*nodeConn, error) {
	g.mu.Lock()
	nc := g.live[c.ID]
	g.mu.Unlock()
	if nc == nil {
		return nil, bridge.Errorf(bridge.CodeUnavailable, "node %s is paired but not connected", c).WithHint("start `exechost node run` there")
	}
	return nc, nil
}

func selectError(err error) error {
	switch {
	case errors.Is(err, ErrAmbiguousNode):
		return &bridge.Error{Code: bridge.CodeAmbiguous, Message: err.Error()}
	case errors.Is(err, ErrNodeRequired):
		return &bridge.Error{Code: bridge.CodeNodeRequired, Message: err.Error()}
	default:
		return &bridge.Error{Code: bridge.CodeNotFound, Message: err.Error()}
	}
}

// configPath is where cfg came from, or where exechost.json would be read
// from when the built-in or embedded configuration is in effect.
func configPath(cfg *config.Config, stateDir string) string {
	if cfg.Path != "" {
		return cfg.Path
	}
	return filepath.Join(stateDir, state.ConfigFile)
}

// pickNode applies node selection and the agent's binding: with
// tools.exec.node set (agent or global), the agent may only use that node.
func (g *Gateway) pickNode(cfg *config.Config, agent, q string) (*nodeConn, error) {
	binding := cfg.Binding(agent)
	// An exact node id is selection's first rule and ids are unique, so a
	// connected node with that id is the answer without listing every
	// paired node (which costs a copy and sort of the whole registry).
	if want := binding; want != "" && (q == "" || q == binding) {
		if nc := g.exactLive(want); nc != nil {
			return nc, nil
		}
	} else if binding == "" && q != "" {
		if nc := g.exactLive(q); nc != nil {
			return nc, nil
		}
	}
	cands := g.candidates()
	if binding != "" {
		bound, err := Select(cands, binding)
		if err != nil {
			return nil, selectError(fmt.Errorf("tools.exec.node binds agent %q to %q: %w", agent, binding, err))
		}
		if q != "" && q != binding {
			if sel, err := Select(cands, q); err != nil || sel.ID != bound.ID {
				return nil, bridge.Errorf(bridge.CodeDenied, "agent %q is bound to node %s by tools.exec.node; node %q is not allowed", agent, bound.ID, q).WithHint("omit the node or change the binding in exechost.json")
			}
		}
		return g.connected(bound)
	}
	if q != "" {
		c, err := Select(cands, q)
		if err != nil {
			return nil, selectError(err)
		}
		return g.connected(c)
	}
	switch len(cands) {
	case 0:
		return nil, bridge.Errorf(bridge.CodeNotFound, "no nodes are paired").WithHint("run `exechost node run --gateway URL` on the node, then `exechost nodes approve ID`")
	case 1:
		return g.connected(cands[0])
	}
	// Several nodes and none named: tools.exec.defaultNode picks one
	// without restricting the agent (a binding would).
	if def := cfg.DefaultNode(agent); def != "" {
		c, err := Select(cands, def)
		if err != nil {
			return nil, selectError(fmt.Errorf("tools.exec.defaultNode of agent %q is %q: %w", agent, def, err))
		}
		return g.connected(c)
	}
	return nil, selectError(hint.Wrap(fmt.Errorf("%w: %d nodes are paired and none is named: %s", ErrNodeRequired, len(cands), list(cands)), fmt.Sprintf("name one with --node NAME (the MCP tool's node), or make one the default with \"tools\": {\"exec\": {\"defaultNode\": \"NAME\"}} in %s, then SIGHUP the gateway", configPath(cfg, g.opts.StateDir))))
}
