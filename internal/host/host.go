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

	"github.com/exechost/exechost/internal/approver"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/runner"
)

// Prompter asks a human. It returns the answer and who gave it, or an error
// when no answer could be had (unreachable, timed out, unverifiable reply);
// the engine then applies askFallback.
type Prompter interface {
	Prompt(ctx context.Context, req approver.PromptRequest) (answer policy.Approval, by string, err error)
}

// Lifecycle event kinds, as node events and system events name them.
const (
	EventStarted  = "exec.started"
	EventFinished = "exec.finished"
	EventDenied   = "exec.denied"
)

// Event is one lifecycle event of a run.
type Event struct {
	Kind       string `json:"-"`
	RunID      string `json:"runId"`
	SessionKey string `json:"sessionKey,omitempty"`
	AgentID    string `json:"agentId,omitempty"`
	NodeID     string `json:"nodeId,omitempty"`
	Host       string `json:"host,omitempty"`
	Command    string `json:"command,omitempty"`
	ExitCode   *int   `json:"exitCode,omitempty"`
	TimedOut   bool   `json:"timedOut,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Tail       string `json:"tail,omitempty"`
}

// Request is a system.run request; its JSON shape is the design's
// system.run params, plus the requested security and ask that the gateway
// resolved for this call.
type Request struct {
	Argv             []string          `json:"command"`
	RawCommand       string            `json:"rawCommand"`
	Cwd              string            `json:"cwd"`
	Env              map[string]string `json:"env,omitempty"`
	TimeoutMs        int64             `json:"timeoutMs"`
	AgentID          string            `json:"agentId"`
	SessionKey       string            `json:"sessionKey"`
	RunID            string            `json:"runId"`
	ApprovalDecision string            `json:"approvalDecision,omitempty"`
	// PlanHash is the canonical form's sha256 that ApprovalDecision was
	// given for (PromptRequest.PlanHash); a decision for another tree is
	// not applied.
	PlanHash string          `json:"planHash,omitempty"`
	Security policy.Security `json:"security,omitempty"`
	Ask      policy.Ask      `json:"ask,omitempty"`
	// PTY runs the command attached to a pseudo-terminal. Only local runs
	// (`exechost run --pty`) may set it; the wire never carries it.
	PTY bool `json:"-"`
}

// Result is a system.run result payload plus what the engine decided.
type Result struct {
	runner.Result
	// Decision is the final decision (after any prompt or fallback).
	Decision policy.Decision `json:"-"`
	// ResolvedPaths are the executables the analysis found.
	ResolvedPaths []string `json:"-"`
}

// DefaultPromptTimeout is how long a prompt waits for a human before
// askFallback applies.
const DefaultPromptTimeout = 120 * time.Second
