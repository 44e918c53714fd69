package gateway

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/config"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/session"
)

// A target is one kind of execution host the gateway routes an exec to:
// the gateway's own engine (target_engine.go), a node (target_node.go), a
// sandbox (target_sandbox.go). Exec does everything else once for all of
// them: policy resolution, admission, the one event sink (lifecycle), the
// one audit path (auditRun), denial explanations and run bookkeeping. To
// add a kind of host, write one file with a type implementing target and
// add its row to targetTable (CONTRIBUTING.md, "Adding an execution
// target").
type target interface {
	// place decides where x runs before anything is admitted (a node:
	// selection and the agent's binding) and sets x.label; an error is a
	// refusal, recorded and returned as it is.
	place(cfg *config.Config, x *execution) error
	// run runs x's command and returns the execution host's result. It
	// reports the run's lifecycle events through x.emit (or its host
	// does: the engine's OnEvent, a node's node.event). A denial is a
	// *bridge.Error with CodeDenied; a host that cannot be used here is an
	// unavailable error (a refusal); any other error means the host failed
	// (the command did not run, or its outcome is unknown), which the
	// gateway reports as such, never as a denial.
	run(ctx context.Context, x *execution) (bridge.SystemRunResult, error)
	// annotate adds to an audit record about one of its runs what the
	// target knows (a sandbox: its backend and scope).
	annotate(rec *audit.Record)
}

// targetRow is one kind of execution host in targetTable.
type targetRow struct {
	// new builds the target for a gateway (it may keep g).
	new func(g *Gateway) target
	// boundary: the target itself is the boundary (a sandbox). No
	// execution host's policy or audit log sees its runs, so the
	// gateway's security=deny does not apply and the gateway records each
	// run's start and outcome itself.
	boundary bool
	// failCode is the audit reason code of a run the target failed to
	// carry out.
	failCode string
}

// targetTable is the registry of execution targets by the host value that
// selects them (exec's host parameter, tools.exec.host, /exec host=).
var targetTable = map[policy.Host]targetRow{
	policy.HostGateway: {new: newEngineTarget, failCode: audit.ReasonOther},
	policy.HostNode:    {new: newNodeTarget, failCode: audit.ReasonNodeError},
	policy.HostSandbox: {new: newSandboxTarget, boundary: true, failCode: audit.ReasonSandboxError},
}

// targets is a gateway's instances of targetTable's rows.
type targets map[policy.Host]boundTarget

// boundTarget is one row of targetTable with its instance.
type boundTarget struct {
	target
	targetRow
}

// newTargets builds g's targets from targetTable.
func newTargets(g *Gateway) targets {
	ts := make(targets, len(targetTable))
	for h, row := range targetTable {
		ts[h] = boundTarget{target: row.new(g), targetRow: row}
	}
	return ts
}

// execution is one exec on its way to a target: what Exec resolved, and
// where it goes.
type execution struct {
	g       *Gateway
	run     *run
	key     session.Key
	p       bridge.ExecParams
	eff     policy.Settings
	timeout time.Duration
	// label names the execution host in events and records: "gateway",
	// "sandbox" or a node id (set by place).
	label string
	// nc is the node a host=node run goes to (set by place).
	nc *nodeConn
}

// request is x as the system.run request every execution host takes.
func (x *execution) request() host.Request {
	return host.Request{
		Argv:       []string{"/bin/sh", "-c", x.p.Command},
		RawCommand: x.p.Command,
		Cwd:        x.p.Cwd,
		Env:        x.p.Env,
		TimeoutMs:  x.timeout.Milliseconds(),
		AgentID:    x.key.Agent,
		SessionKey: x.key.Session,
		RunID:      x.run.id,
		Security:   x.eff.Security,
		Ask:        x.eff.Ask,
	}
}

// event is a lifecycle event of x with the run's identity filled in.
func (x *execution) event(kind string) bridge.ExecEvent {
	return bridge.ExecEvent{Kind: kind, RunID: x.run.id, AgentID: x.key.Agent, SessionKey: x.key.Session,
		NodeID: x.label, Host: string(x.eff.Host), Command: x.p.Command}
}

// emit reports a lifecycle event of x to the gateway's event sink.
func (x *execution) emit(ev bridge.ExecEvent) { x.g.lifecycle(x.key, x.run, x.label, ev) }

// unavailableError is a target that cannot be used on this gateway (not
// configured): a refusal recorded as host-unavailable, not a failure.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string { return e.err.Error() }

// Unwrap returns the *bridge.Error the caller gets.
func (e *unavailableError) Unwrap() error { return e.err }

// unavailable refuses a run because its target is not available here.
func unavailable(format string, args ...any) error {
	return &unavailableError{err: bridge.Errorf(bridge.CodeUnavailable, format, args...)}
}

// execute runs x on t: the one path every target's runs take after
// admission. It records the run where the gateway is its only gatekeeper,
// explains a denial, and reports a host's failure as a failure (an
// exec.failed event and record) unless the host reported the run's end
// itself.
func (g *Gateway) execute(ctx context.Context, t boundTarget, x *execution) (bridge.ExecResult, error) {
	out := bridge.ExecResult{Status: bridge.ExecCompleted, RunID: x.run.id, Host: string(x.eff.Host), NodeID: x.run.nodeID}
	if t.boundary {
		// Durable before the command starts.
		g.auditRun(ctx, t, x, audit.EventDecision, audit.ReasonAllowed, "host="+string(x.eff.Host)+": the sandbox is the boundary", nil)
	}
	hostRun(ctx, x) // trace.go
	res, err := t.run(ctx, x)
	g.ranOn(ctx, x, res, err)
	if err == nil {
		if t.boundary {
			g.auditRun(ctx, t, x, audit.EventFinished, audit.ReasonCompleted, "", &res)
		}
		out.SystemRunResult = res
		return out, nil
	}
	if u, ok := errors.AsType[*unavailableError](err); ok {
		g.auditRun(ctx, t, x, audit.EventDenied, audit.ReasonHostUnavailable, bridge.AsError(u.err).Message, nil)
		return out, u.err
	}
	be := bridge.AsError(err)
	switch be.Code {
	case bridge.CodeDenied:
		return out, g.explainDenial(x, be)
	case bridge.CodeInvalidRequest:
		return out, be // the host refused the request; it said so itself
	}
	if !x.run.ended.Load() {
		ev := x.event(bridge.EventExecFailed)
		ev.Reason = be.Message
		x.emit(ev)
	}
	res.Error = be.Message
	g.auditRun(ctx, t, x, audit.EventFinished, t.failCode, "", &res)
	return out, be
}

// lifecycle is the gateway's one event sink: every lifecycle event of
// every target (the gateway engine's OnEvent, a node's node.event, the
// sandbox target, the gateway's own refusals and failures) becomes a system
// event of the run's session here. label names the execution host; r, when
// known, learns that its end was reported.
func (g *Gateway) lifecycle(key session.Key, r *run, label string, ev bridge.ExecEvent) {
	var text, tail string // tail: only a finished event keeps one
	who := label
	if r != nil && r.host == policy.HostNode && r.nodeID == label {
		// The text is read by an agent or a person: the node as --node
		// takes it (its display name when that selects it), not a 64-hex
		// id; the event's NodeID field keeps the id.
		who = g.nodeQuery(label)
	}
	switch ev.Kind {
	case bridge.EventExecStarted:
		text = session.StartedText(who, ev.RunID)
	case bridge.EventExecFinished:
		code := -1
		if ev.ExitCode != nil {
			code = *ev.ExitCode
		}
		text = session.FinishedText(who, ev.RunID, code, ev.Tail)
		if strings.HasSuffix(text, ev.Tail) {
			tail = text[len(text)-len(ev.Tail):] // the same bytes as Text's end, not a second copy
		}
	case bridge.EventExecDenied:
		text = session.DeniedText(who, ev.RunID, ev.Reason)
	case bridge.EventExecFailed:
		text = session.FailedText(who, ev.RunID, ev.Reason)
	default:
		return
	}
	if r != nil && ev.Kind != bridge.EventExecStarted {
		r.ended.Store(true)
	}
	if g.sessions.Enqueue(key, bridge.SystemEvent{Text: text, Kind: ev.Kind, RunID: ev.RunID, NodeID: label, Tail: tail}) > 0 {
		g.opts.Metrics.EventQueueDrop()
	}
}
