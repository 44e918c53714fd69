// Package approvalroute carries exec approval prompts between execution
// hosts, the gateway and its operators ("approve from anywhere"): the wire
// shapes of the gateway's approval methods and events, the approvals.route
// setting, and the prompter that races a local approver against the
// gateway (route=both).
//
// It sits beside the daemons, not inside the gateway (it imports host, for
// the prompter it wraps, and prompt), so that the node runner, the gateway
// and the CLI share one definition without the node importing the gateway.
package approvalroute

import "github.com/exechost/exechost/internal/prompt"

// Wire names of the gateway's approval methods and events.
const (
	// EventRequested is broadcast to operator clients when a prompt is
	// queued; its payload is a Requested.
	EventRequested = "exec.approval.requested"
	// EventResolved is broadcast to operator clients when a prompt is
	// answered or expires, so every UI drops it; payload Resolved.
	EventResolved = "exec.approval.resolved"
	// MethodResolve answers a prompt (operators only); params
	// ResolveParams, result Resolved.
	MethodResolve = "exec.approval.resolve"
	// MethodPending lists the pending prompts (operators only); result
	// PendingResult.
	MethodPending = "exec.approval.pending"
	// MethodNodeRequest is a node's prompt to the gateway, answered when
	// an operator resolves it or it expires; params NodeRequest, result
	// NodeAnswer.
	MethodNodeRequest = "node.approval.request"
	// MethodNodeCancel withdraws a node's prompt (its local approver
	// answered first, or the run ended); params NodeCancel.
	MethodNodeCancel = "node.approval.cancel"
)

// Requested is one pending prompt as operators see it.
type Requested struct {
	ID string `json:"id"`
	// Request is what the execution host asks about.
	Request prompt.Request `json:"request"`
	// ExpiresAtMs is when the execution host stops waiting and applies
	// askFallback (unix ms).
	ExpiresAtMs int64 `json:"expiresAtMs"`
	// ReceivedAtMs is when the gateway queued it (unix ms).
	ReceivedAtMs int64 `json:"receivedAtMs,omitempty"`
	// Host is "gateway" or "node"; NodeID names the node for host=node.
	Host   string `json:"host"`
	NodeID string `json:"nodeId,omitempty"`
}

// Outcomes of a Resolved event.
const (
	OutcomeAnswered = "answered"
	OutcomeExpired  = "expired"
)

// Resolved says a prompt left the queue: answered (with the decision and
// who decided) or expired.
type Resolved struct {
	ID       string `json:"id"`
	Outcome  string `json:"outcome"`
	Decision string `json:"decision,omitempty"`
	By       string `json:"by,omitempty"`
}

// ResolveParams are exec.approval.resolve's params. ID may be a unique
// prefix of a pending prompt's id.
type ResolveParams struct {
	ID       string `json:"id"`
	Decision string `json:"decision"`
}

// PendingResult is exec.approval.pending's payload, oldest first.
type PendingResult struct {
	Approvals []Requested `json:"approvals"`
}

// NodeRequest is a node's prompt. Ref is the node's own handle for it
// (used by node.approval.cancel); the gateway assigns the prompt's id.
type NodeRequest struct {
	Ref     string         `json:"ref"`
	Request prompt.Request `json:"request"`
}

// NodeAnswer is the gateway's answer to a node's prompt.
type NodeAnswer struct {
	ID       string `json:"id"`
	Decision string `json:"decision"`
	By       string `json:"by"`
}

// NodeCancel withdraws a node's prompt by its Ref.
type NodeCancel struct {
	Ref string `json:"ref"`
}
