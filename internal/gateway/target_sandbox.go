package gateway

import (
	"context"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/config"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/session"
)

// sandboxTarget is host=sandbox: the sandbox backend (Options.Sandbox)
// runs the command; the sandbox is the boundary, so the gateway is the
// run's only gatekeeper and its only record (targetRow.boundary). A
// backend's error is the sandbox failing, reported as a failure.
type sandboxTarget struct{ g *Gateway }

func newSandboxTarget(g *Gateway) target { return sandboxTarget{g} }

// egressLeaser leases a sandbox run the engine's egress proxy when the
// agent's policy lists egress names (*host.Engine).
type egressLeaser interface {
	SandboxEgress(req host.Request, backend string) (*sandbox.Egress, func(), error)
}

func (t sandboxTarget) place(_ *config.Config, x *execution) error {
	x.label = "sandbox"
	return nil
}

func (t sandboxTarget) run(ctx context.Context, x *execution) (bridge.SystemRunResult, error) {
	sb := t.g.opts.Sandbox
	if sb == nil {
		why := t.g.opts.SandboxError
		if why == nil {
			why = sandbox.ErrNotConfigured
		}
		return bridge.SystemRunResult{}, unavailable("host=sandbox: %v", why)
	}
	req := sandbox.Request{
		SessionKey: x.key.Session, AgentID: x.key.Agent, Command: x.p.Command, Cwd: x.p.Cwd, Env: x.p.Env, Timeout: x.timeout,
	}
	// An egress list in the agent's policy holds in the sandbox too, or
	// the run is refused (sandbox.CheckEgress).
	if le, ok := t.g.opts.Executor.(egressLeaser); ok {
		eg, end, err := le.SandboxEgress(x.request(), sb.Name())
		if err != nil {
			return bridge.SystemRunResult{}, bridge.Errorf(bridge.CodeUnavailable, "sandbox %s: %v", sb.Name(), err)
		}
		defer end()
		req.Egress = eg
	}
	if err := sandbox.CheckEgress(sb, req); err != nil {
		return bridge.SystemRunResult{}, unavailable("host=sandbox: %v", err)
	}
	x.emit(x.event(bridge.EventExecStarted))
	res, err := sb.Exec(ctx, req)
	if err != nil {
		return bridge.SystemRunResult{}, bridge.Errorf(bridge.CodeUnavailable, "sandbox %s: %v", sb.Name(), err)
	}
	t.g.sandboxNotice(x.run)
	ev := x.event(bridge.EventExecFinished)
	code := res.ExitCode
	ev.ExitCode, ev.TimedOut, ev.Tail = &code, res.TimedOut, res.Tail
	x.emit(ev)
	return host.WireResult(res), nil
}

func (t sandboxTarget) annotate(rec *audit.Record) {
	rec.Scope = string(t.g.Config().Sandbox.WithDefaults().Scope)
	if t.g.opts.Sandbox != nil {
		rec.Backend = t.g.opts.Sandbox.Name()
	}
}

// sandboxNotice tells a session's first sandbox command, once, which path
// its commands take (a resident agent, or one runtime call each, and why):
// a system event of kind session.KindSandbox for the caller, and a log line.
func (g *Gateway) sandboxNotice(r *run) {
	pr, ok := g.opts.Sandbox.(sandbox.PathReporter)
	if !ok || !g.sessions.Once(r.key, session.KindSandbox) {
		return
	}
	path := pr.CommandPath()
	g.log.Info("sandbox commands", "backend", g.opts.Sandbox.Name(), "agent", r.key.Agent, "session", r.key.Session, "mode", path.Mode, "binary", path.Binary, "reason", path.Reason)
	text := session.SandboxText(g.opts.Sandbox.Name(), r.id, path.String())
	if g.sessions.Enqueue(r.key, bridge.SystemEvent{Text: text, Kind: session.KindSandbox, RunID: r.id, NodeID: "sandbox"}) > 0 {
		g.opts.Metrics.EventQueueDrop()
	}
}
