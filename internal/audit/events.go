package audit

// The gateway's own decisions. Execution hosts record EventDecision,
// EventFinished and EventDenied for the runs they gate; the gateway uses the
// same three events for its own decisions — EventDecision for something it
// carried out, EventDenied for something it refused, EventFinished for a
// host=sandbox run's outcome — and names what was decided in Action.
// docs/audit.md lists every combination with an example line.
const (
	// ActionExec is an exec request: one the gateway refused before any
	// execution host saw it, or a host=sandbox run (the gateway is its only
	// gatekeeper).
	ActionExec = "exec"
	// ActionNodeApprove is an operator pairing a pending node.
	ActionNodeApprove = "node.approve"
	// ActionNodeReject is an operator refusing a pending node.
	ActionNodeReject = "node.reject"
	// ActionNodeRemove is a paired node's token being revoked.
	ActionNodeRemove = "node.remove"
	// ActionNodeConnect is a node connection refused for its credentials
	// (an unknown or revoked token).
	ActionNodeConnect = "node.connect"
	// ActionJoinKeyIssue is an operator creating a one-time join key.
	ActionJoinKeyIssue = "joinkey.issue"
	// ActionJoinKeyUse is a node pairing itself with a join key (or
	// refused for a bad one).
	ActionJoinKeyUse = "joinkey.use"
	// ActionApprovalsEdit is an operator's edit of a node's
	// exec-approvals.json relayed by the gateway (`approvals set --node`):
	// recorded before the node applies it, and again (EventDenied) when the
	// node refuses it.
	ActionApprovalsEdit = "approvals.edit"
	// ActionBindingEdit is a change of tools.exec.node (an agent's node
	// binding) made in the gateway's web UI.
	ActionBindingEdit = "binding.edit"
	// ActionClientConnect is an agent or operator connection refused for
	// a bad gateway token.
	ActionClientConnect = "client.connect"
	// ActionMethod is a request refused because the caller's role may
	// not make it (an agent managing nodes or answering prompts).
	ActionMethod = "method"
	// ActionApprovalRelay is the answer to a prompt routed through the
	// gateway: an operator's decision, or none before the deadline.
	ActionApprovalRelay = "approval.relay"
	// ActionElevated is an operator's /elevated in a session: the one
	// session command that may loosen security and ask beyond the agent's
	// configured values (an agent's /elevated is refused, ActionMethod).
	ActionElevated = "session.elevated"
	// ActionCredentialRevoke is an open connection of a revoked
	// credential closed by the gateway.
	ActionCredentialRevoke = "credential.revoke"
)

// Reason codes: the bounded, machine-readable class of a gateway decision,
// used as the reason label of exechost_gateway_decisions_total. The
// record's Reason keeps the exact words the caller saw.
const (
	ReasonBinding         = "binding"          // agent bound to another node by tools.exec.node
	ReasonUnknownNode     = "unknown-node"     // no paired node matches
	ReasonAmbiguousNode   = "ambiguous-node"   // several paired nodes match
	ReasonNodeRequired    = "node-required"    // several nodes paired, none named
	ReasonNodeOffline     = "node-offline"     // paired but not connected
	ReasonSecurityDeny    = "security-deny"    // gateway-level security=deny
	ReasonHostUnavailable = "host-unavailable" // host=gateway or host=sandbox not available here
	ReasonDraining        = "draining"         // the gateway is shutting down
	ReasonBusy            = "busy"             // a limit on execs in flight (gateway.limits) was reached
	ReasonInvalidRequest  = "invalid-request"  // a parameter the gateway refuses
	ReasonSandboxError    = "sandbox-error"    // the sandbox backend failed to run the command
	ReasonAllowed         = "allowed"          // a sandbox run started
	ReasonCompleted       = "completed"        // a run finished
	ReasonOperator        = "operator"         // an operator's action (pairing, edits, answers)
	ReasonJoinKey         = "join-key"         // pairing by join key
	ReasonBadToken        = "bad-token"        // a node token the registry does not hold
	ReasonBadJoinKey      = "bad-join-key"     // an invalid, expired or used join key
	ReasonForbidden       = "forbidden"        // the caller's role may not do this
	ReasonNodeGone        = "node-gone"        // the node disconnected mid-operation
	ReasonNoAnswer        = "no-answer"        // no operator answered a prompt in time
	ReasonNodeError       = "node-error"       // the node refused or failed an operation
	ReasonRevoked         = "revoked"          // the caller's credential was revoked
	ReasonOther           = "other"            // anything not classified above
)

// GatewayFields are the parts of a Record only the gateway fills. They are
// embedded in Record, so they appear as top-level keys of the line.
type GatewayFields struct {
	// Action is what the gateway decided on (Action* constants).
	Action string `json:"action,omitempty"`
	// Actor names who caused the decision: "operator <client name>",
	// "agent <agentId>/<sessionKey>", "node <nodeId> from <ip>", or
	// "exechost up" for the gateway's own in-process caller.
	Actor string `json:"actor,omitempty"`
	// ReasonCode is the decision's class (Reason* constants), the value of
	// the metric's reason label.
	ReasonCode string `json:"reasonCode,omitempty"`
	// Backend and Scope are the sandbox backend (docker, bwrap) and its
	// sandbox.scope for host=sandbox runs.
	Backend string `json:"backend,omitempty"`
	Scope   string `json:"scope,omitempty"`
	// BaseHash and NewHash are an approvals file's hash before an edit and
	// after it (when known).
	BaseHash string `json:"baseHash,omitempty"`
	NewHash  string `json:"newHash,omitempty"`
	// Change summarises what an edit changed, e.g.
	// `agents.main.allowlist +"/usr/bin/make"; defaults.security allowlist→full`.
	Change string `json:"change,omitempty"`
	// RemoteIP is the peer address of a node connection.
	RemoteIP string `json:"remoteIp,omitempty"`
}
