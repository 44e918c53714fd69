package bridge

import (
	"slices"
	"strings"
)

// ExecParams are the params of the exec method (the agent's exec tool).
// Empty fields defer to the session override, the agent's config, the
// global config and the built-in defaults, in that order.
type ExecParams struct {
	Command        string            `json:"command"`
	Host           string            `json:"host,omitempty"`
	Security       string            `json:"security,omitempty"`
	Ask            string            `json:"ask,omitempty"`
	Node           string            `json:"node,omitempty"`
	Cwd            string            `json:"cwd,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	TimeoutSec     int               `json:"timeoutSec,omitempty"`
	SessionKey     string            `json:"sessionKey,omitempty"`
	AgentID        string            `json:"agentId,omitempty"`
	YieldMs        int               `json:"yieldMs,omitempty"`
	IdempotencyKey string            `json:"idempotencyKey,omitempty"`
	// Traceparent and Tracestate are the agent's W3C trace context: the
	// gateway's span of this exec continues that trace (docs/tracing.md).
	Traceparent string `json:"traceparent,omitempty"`
	Tracestate  string `json:"tracestate,omitempty"`
}

// Exec statuses.
const (
	ExecCompleted = "completed"
	ExecRunning   = "running"
)

// ExecResult is the exec method's payload. A denial is a failed response
// (CodeDenied) instead, whose message is the design's SYSTEM_RUN_* string.
type ExecResult struct {
	Status string `json:"status"`
	RunID  string `json:"runId"`
	Host   string `json:"host"`
	NodeID string `json:"nodeId,omitempty"`
	// SystemRunResult is the execution host's result, flattened into this
	// object as the design shows it.
	SystemRunResult
	// Events are the session's queued system events, delivered with this
	// response and removed from the queue.
	Events []SystemEvent `json:"events,omitempty"`
}

// SystemRunParams are the system.run params (gateway → node in
// node.invoke.request, and the "request" of the approver exec host's exec
// frame): the design's `{command:[argv…], rawCommand, cwd, env, timeoutMs,
// agentId, sessionKey, runId, approvalDecision?}` plus what the gateway
// resolved for the call. host.RequestOf and host.Request.Wire convert.
type SystemRunParams struct {
	Command          []string          `json:"command"`
	RawCommand       string            `json:"rawCommand"`
	Cwd              string            `json:"cwd"`
	Env              map[string]string `json:"env,omitempty"`
	TimeoutMs        int64             `json:"timeoutMs"`
	AgentID          string            `json:"agentId"`
	SessionKey       string            `json:"sessionKey"`
	RunID            string            `json:"runId"`
	ApprovalDecision string            `json:"approvalDecision,omitempty"`
	// PlanHash is the canonical form's sha256 that ApprovalDecision was
	// given for; a decision for another tree is not applied.
	PlanHash string `json:"planHash,omitempty"`
	// Security and Ask carry what the gateway requested for this call, so
	// no execution host (nor a forward to the approver) loosens it.
	Security string `json:"security,omitempty"`
	Ask      string `json:"ask,omitempty"`
	// NodeID names the forwarding node in an exec frame to the approver
	// (prompts, events, audit); empty on node.invoke.
	NodeID string `json:"nodeId,omitempty"`
}

// SystemRunResult is the system.run result payload (node → gateway, and
// the approver exec host's exec-res payload): the design's `{exitCode,
// timedOut, success, stdout, stderr, truncated, error?}`. A command that
// ran is a result whatever its exit code; a refusal is a *Error instead.
type SystemRunResult struct {
	ExitCode  int    `json:"exitCode"`
	TimedOut  bool   `json:"timedOut"`
	Success   bool   `json:"success"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	Truncated bool   `json:"truncated"`
	// DroppedBytes is how much output the 200,000-byte cap dropped.
	DroppedBytes int64  `json:"droppedBytes,omitempty"`
	Error        string `json:"error,omitempty"`

	// Wire is Stdout and Stderr as JSON, as they arrived: set only by a
	// decode through KeepingWire (passthrough.go), kept in this process
	// and never sent itself (as Error.Cause). Unexported inside, so a
	// comparison of results sees only whether it is set.
	Wire *outputWire `json:"-"`
}

// ExecStatusParams names a background run. An agent connection sees only
// its own session's runs, so it names the session it asks for.
type ExecStatusParams struct {
	RunID      string `json:"runId"`
	AgentID    string `json:"agentId,omitempty"`
	SessionKey string `json:"sessionKey,omitempty"`
}

// Lifecycle event kinds: a node.event's event, an ExecEvent's Kind and a
// SystemEvent's kind.
const (
	EventExecStarted  = "exec.started"
	EventExecFinished = "exec.finished"
	EventExecDenied   = "exec.denied"
	// EventExecFailed ends a run that has no result because its host
	// failed (a sandbox backend's error, a node gone mid-run, an approver
	// exec host that cannot be reached): not a denial, nothing decided
	// against the command. An addition to the design's three kinds; a
	// gateway that does not know it drops it.
	EventExecFailed = "exec.failed"
)

// ExecEvent is one lifecycle event of a run: what an execution host
// reports (host.Engine.OnEvent), the payload of a node's node.event and
// what the gateway's one event sink turns into a SystemEvent.
type ExecEvent struct {
	// Kind is the event (EventExec*); on the wire it is node.event's
	// event, beside this payload.
	Kind       string `json:"-"`
	RunID      string `json:"runId"`
	SessionKey string `json:"sessionKey,omitempty"`
	AgentID    string `json:"agentId,omitempty"`
	NodeID     string `json:"nodeId,omitempty"`
	Host       string `json:"host,omitempty"`
	Command    string `json:"command,omitempty"`
	ExitCode   *int   `json:"exitCode,omitempty"`
	TimedOut   bool   `json:"timedOut,omitempty"`
	// Reason is why a run was denied or failed, for people.
	Reason string `json:"reason,omitempty"`
	// ReasonCode is a denial's machine-readable reason (policy.DenialCode:
	// "security=deny", "allowlist-miss", "user-denied",
	// "approval-required"); code branches on it, never on Reason.
	ReasonCode string `json:"reasonCode,omitempty"`
	// Tail is the end of a finished run's output.
	Tail string `json:"tail,omitempty"`
}

// SystemEvent is one queued per-session system event. Text is exactly the
// design's wording ("Exec started (node=…, id=…)" …).
type SystemEvent struct {
	Text   string `json:"text"`
	TS     int64  `json:"ts"`
	Kind   string `json:"kind,omitempty"`
	RunID  string `json:"runId,omitempty"`
	NodeID string `json:"nodeId,omitempty"`
	// Tail is the output tail an exec.finished event's Text ends with
	// (after a newline), kept beside the text so that the run's own
	// result, which carries that output in full, can deliver the event
	// without it (WithoutTailOf). The gateway makes it a slice of Text's
	// own end, so a queued event holds its tail once. Never sent itself.
	Tail string `json:"-"`
}

// WithoutTailOf returns events with the exec.finished event of res's run
// cut to its first line when its tail is, byte for byte, the end of
// res's stdout followed by its stderr: the agent reading res has that
// text already, and a tail is up to 20,000 bytes escaped once more by the
// gateway and decoded once more by the agent. Any other event, and a tail
// the result does not end with (truncated output, a tail cut from a
// longer stream), is left as it is. events is not modified.
func WithoutTailOf(events []SystemEvent, res ExecResult) []SystemEvent {
	var out []SystemEvent
	for i, ev := range events {
		if ev.Kind != EventExecFinished || ev.RunID != res.RunID || ev.Tail == "" ||
			!strings.HasSuffix(ev.Text, "\n"+ev.Tail) || !endsOutput(res.SystemRunResult, ev.Tail) {
			continue
		}
		if out == nil {
			out = slices.Clone(events)
		}
		out[i].Text = ev.Text[:len(ev.Text)-len(ev.Tail)-1]
		out[i].Tail = ""
	}
	if out == nil {
		return events
	}
	return out
}

// endsOutput reports whether tail, less the "…" a cut tail starts with,
// is the end of r.Stdout+r.Stderr.
func endsOutput(r SystemRunResult, tail string) bool {
	body := strings.TrimPrefix(tail, "…")
	if len(body) <= len(r.Stderr) {
		return strings.HasSuffix(r.Stderr, body)
	}
	cut := len(body) - len(r.Stderr)
	return body[cut:] == r.Stderr && strings.HasSuffix(r.Stdout, body[:cut])
}

// SessionParams address one agent's session.
type SessionParams struct {
	SessionKey string `json:"sessionKey,omitempty"`
	AgentID    string `json:"agentId,omitempty"`
}

// SessionEventsResult is session.events' payload.
type SessionEventsResult struct {
	Events []SystemEvent `json:"events"`
}

// SessionCommandParams is session.command's params: a slash command
// (`/exec …`, `/elevated …`) typed in a front-end.
type SessionCommandParams struct {
	SessionKey string `json:"sessionKey,omitempty"`
	AgentID    string `json:"agentId,omitempty"`
	Text       string `json:"text"`
}

// SessionSettings are a session's exec overrides.
type SessionSettings struct {
	Host     string `json:"host,omitempty"`
	Security string `json:"security,omitempty"`
	Ask      string `json:"ask,omitempty"`
	Node     string `json:"node,omitempty"`
	Elevated string `json:"elevated,omitempty"`
}

// SessionCommandResult is session.command's payload: a reply for the user
// and the session's overrides after the command.
type SessionCommandResult struct {
	Reply    string          `json:"reply"`
	Settings SessionSettings `json:"settings"`
}

// NodeIDParams name one node (approve, reject, remove).
type NodeIDParams struct {
	NodeID string `json:"nodeId"`
}

// NodeView is one node in the registry as nodes.list shows it.
type NodeView struct {
	NodeID      string   `json:"nodeId"`
	DisplayName string   `json:"displayName"`
	RemoteIP    string   `json:"remoteIp"`
	Platform    string   `json:"platform"`
	Version     string   `json:"version,omitempty"`
	Commands    []string `json:"commands"`
	Connected   bool     `json:"connected"`
	LastSeen    int64    `json:"lastSeen"`
	Paired      bool     `json:"paired"`
	// Fingerprint abbreviates the node's public key; the node prints the
	// same string while it waits, so an operator approves what they can
	// compare. Empty for a paired node that has not yet bound a key.
	Fingerprint string `json:"fingerprint,omitempty"`
}

// NodesResult is nodes.list's and nodes.pending's payload.
type NodesResult struct {
	Nodes []NodeView `json:"nodes"`
}

// JoinKeyParams ask for a one-time join key valid for TTLMs.
type JoinKeyParams struct {
	TTLMs int64 `json:"ttlMs"`
}

// JoinKeyResult is the key (shown once) and when it expires.
type JoinKeyResult struct {
	Key         string `json:"key"`
	ExpiresAt   int64  `json:"expiresAt"`
	Fingerprint string `json:"tlsFingerprint,omitempty"`
}

// Run statuses reported by exec.status.
const (
	RunRunning   = "running"
	RunCompleted = "completed"
	RunFailed    = "failed"
)

// ExecStatusResult is exec.status's payload: the run's state and, once it
// is over, its result or the error that ended it (a denial included).
type ExecStatusResult struct {
	RunID  string      `json:"runId"`
	Status string      `json:"status"`
	Host   string      `json:"host"`
	NodeID string      `json:"nodeId,omitempty"`
	Result *ExecResult `json:"result,omitempty"`
	Error  *Error      `json:"error,omitempty"`
}
