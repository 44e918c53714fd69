package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/receipt"
	"github.com/exechost/exechost/internal/trace"
)

// tracedExec is Exec inside the exec's span (Options.Tracer; a nil tracer
// costs one branch). The span continues the agent's trace when the params
// carry a W3C traceparent.
func (g *Gateway) tracedExec(ctx context.Context, p bridge.ExecParams) (bridge.ExecResult, error) {
	if g.opts.Tracer == nil {
		return g.Exec(ctx, p)
	}
	ctx, span := g.opts.Tracer.StartExec(ctx, trace.Exec{
		AgentID: p.AgentID, Host: p.Host, CommandSHA256: receipt.SHA256String(p.Command),
		Traceparent: p.Traceparent, Tracestate: p.Tracestate, Start: time.Now(),
	})
	res, err := g.Exec(ctx, p)
	r := trace.Result{RunID: res.RunID, NodeID: res.NodeID, Status: res.Status}
	switch {
	case err != nil:
		r.Status, r.ErrorType = "refused", string(bridge.AsError(err).Code)
		if errors.Is(err, context.DeadlineExceeded) {
			r.ErrorType = "timeout"
		}
	case res.Status == bridge.ExecCompleted:
		code := res.ExitCode
		r.ExitCode, r.TimedOut, r.OutputBytes = &code, res.TimedOut, len(res.Stdout)+len(res.Stderr)
	}
	trace.EndExec(span, r)
	return res, err
}

// hostRun marks the start of x's run on its execution host in the exec's
// span: everything before it was the gateway's resolution and admission.
func hostRun(ctx context.Context, x *execution) {
	trace.Event(ctx, trace.EventHostRun, trace.AttrHost.String(string(x.eff.Host)), trace.AttrNodeID.String(x.label), trace.AttrRunID.String(x.run.id))
}

// ranOn is what the gateway does once x's host answered: mark the span
// and countersign a node's run (receipts.go).
func (g *Gateway) ranOn(ctx context.Context, x *execution, res bridge.SystemRunResult, err error) {
	trace.Event(ctx, trace.EventHostFinished)
	g.countersign(x, res, err)
}
