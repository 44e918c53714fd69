// Package host is an execution host's gatekeeper: it takes one system.run
// request, analyses the command, combines the requested policy with this
// machine's exec-approvals.json, asks a human through the approval socket
// when needed (or applies askFallback), and only then hands the command to
// the runner. The gateway process (host=gateway), the node runner
// (host=node) and `exechost run` all go through Engine.Run, so a command
// reaches a process in the same few hops everywhere.
package host

import (
	"context"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/runner"
)

// Prompter asks a human. It returns the answer and who gave it, or an error
// when no answer could be had (unreachable, timed out, unverifiable reply);
// the engine then applies askFallback.
type Prompter interface {
	Prompt(ctx context.Context, req prompt.Request) (answer policy.Approval, by string, err error)
}

// Request is a system.run request as the engine takes it: the wire's
// bridge.SystemRunParams (RequestOf, Wire) with typed policy values, plus
// what only a local run may set.
type Request struct {
	Argv       []string
	RawCommand string
	Cwd        string
	Env        map[string]string
	TimeoutMs  int64
	AgentID    string
	SessionKey string
	RunID      string
	// ApprovalDecision and PlanHash are an answer a gateway says it
	// obtained, and the canonical form's sha256 it was given for. The
	// engine never acts on them: a host asks its own approver (or the
	// one its approvals route names), and the OpenClaw node checks a
	// gateway approval against the plan it prepared itself
	// (internal/openclaw). They travel for the audit and the wire.
	ApprovalDecision string
	PlanHash         string
	Security         policy.Security
	Ask              policy.Ask
	// PTY runs the command attached to a pseudo-terminal. Only local runs
	// (`exechost run --pty`) may set it; the wire never carries it.
	PTY bool
}

// RequestOf converts system.run params from the wire. Requested security
// and ask travel as strings; an unknown value is kept, and the engine's
// policy.Combine treats it as unset (the host's own file decides).
func RequestOf(p bridge.SystemRunParams) Request {
	return Request{
		Argv: p.Command, RawCommand: p.RawCommand, Cwd: p.Cwd, Env: p.Env,
		TimeoutMs: p.TimeoutMs, AgentID: p.AgentID, SessionKey: p.SessionKey,
		RunID: p.RunID, ApprovalDecision: p.ApprovalDecision, PlanHash: p.PlanHash,
		Security: policy.Security(p.Security), Ask: policy.Ask(p.Ask),
	}
}

// Wire is r as system.run params; nodeID names a forwarding node (empty
// on node.invoke). PTY never travels.
func (r Request) Wire(nodeID string) bridge.SystemRunParams {
	return bridge.SystemRunParams{
		Command: r.Argv, RawCommand: r.RawCommand, Cwd: r.Cwd, Env: r.Env,
		TimeoutMs: r.TimeoutMs, AgentID: r.AgentID, SessionKey: r.SessionKey,
		RunID: r.RunID, ApprovalDecision: r.ApprovalDecision, PlanHash: r.PlanHash,
		Security: string(r.Security), Ask: string(r.Ask), NodeID: nodeID,
	}
}

// Result is the runner's result plus what the engine decided; Wire is its
// system.run result payload.
type Result struct {
	runner.Result
	// Decision is the final decision (after any prompt or fallback).
	Decision policy.Decision
	// ResolvedPaths are the executables the analysis found.
	ResolvedPaths []string
}

// Wire is the result as the system.run result payload: the one conversion
// from the runner's result to the wire.
func (r Result) Wire() bridge.SystemRunResult { return WireResult(r.Result) }

// WireResult converts a runner result to the system.run result payload.
func WireResult(r runner.Result) bridge.SystemRunResult {
	return bridge.SystemRunResult{
		ExitCode: r.ExitCode, TimedOut: r.TimedOut, Success: r.Success, Stdout: r.Stdout, Stderr: r.Stderr,
		Truncated: r.Truncated, DroppedBytes: r.DroppedBytes, Error: r.Error,
	}
}

// FromWire is WireResult's inverse, for a result another host ran (a
// node's answer at the gateway, the approver's at a forwarding node).
func FromWire(w bridge.SystemRunResult) runner.Result {
	return runner.Result{
		ExitCode: w.ExitCode, TimedOut: w.TimedOut, Success: w.Success, Stdout: w.Stdout, Stderr: w.Stderr,
		Truncated: w.Truncated, DroppedBytes: w.DroppedBytes, Error: w.Error,
	}
}

// StartNotice is how long a run's exec.started may wait
// (runner.Spec.StartNotice): a run that ends sooner reports its start just
// before its end, in the same moment, instead of having a node write a
// frame and its gateway handle it while the command runs (issue 39: a
// quarter of a millisecond per short run on a 2-core machine). A longer
// run's start is heard this much later, well within what its session's
// next prompt or poll could tell apart.
const StartNotice = 50 * time.Millisecond

// DefaultPromptTimeout is how long a prompt waits for a human before
// askFallback applies.
const DefaultPromptTimeout = 120 * time.Second
