// Package approver is the approval socket between an execution host (the
// gateway process or a node runner) and the human's approver UI: a Unix
// socket, newline-delimited JSON, peer UID check, server challenge, client
// nonce and timestamp, HMAC-SHA256 keyed by the token from
// exec-approvals.json in both directions. The token never crosses the socket.
//
// The frames and both HMAC strings are exactly the design's ("Approval
// socket"; see RequestMAC and DecisionMAC). Behaviour the design leaves
// open, as implemented here:
//
//   - A peer of another uid (or whose credentials cannot be read) gets one
//     error frame with code invalid-auth and no hello, then the connection
//     closes. Windows has no peer check yet, so the server refuses to start
//     there (ErrUnsupported) and hosts apply askFallback.
//   - Checks run in this order: rate limit (per peer uid+pid), frame shape
//     (bad-request), hmac (invalid-auth), ts (expired), nonce (replay), the
//     request object (bad-request). Nothing that changes state happens
//     before the hmac verifies.
//   - Only too-large closes the connection; other refusals answer the frame
//     and keep the connection, so one connection may carry several prompts.
//     A connection with nothing pending that sends nothing for
//     Server.IdleTimeout is closed.
//   - Admission (Server.admit): a connection whose first request or exec
//     frame is not accepted within HelloTimeout (5 s) of hello is closed;
//     one peer process (uid+pid from SO_PEERCRED) holds at most
//     MaxConnsPerPeer (16) connections; when all MaxConns (64) slots are
//     taken, an idle connection (nothing in flight) of the peer holding the
//     most is closed for the newcomer, so idle peers never keep a prompt
//     out. Only when every slot has a prompt in flight is a newcomer
//     refused (rate-limited).
//   - A prompt stays queued until the request's expiresAtMs (default 120 s,
//     at most an hour); a client that disconnects expires its prompts. The
//     server answers a prompt nobody decided with an "expired" error frame
//     shortly after expiresAtMs (the client normally gave up already).
//   - The decision frame may carry "by" (who answered, e.g. "approver tui").
//     It is NOT covered by the hmac: informational (audit text) only.
package approver

import "encoding/json"

// Protocol constants from the design.
const (
	ProtocolVersion = 1
	// MaxFrame is the default payload limit; a longer line closes the
	// connection.
	MaxFrame = 256 << 10
	// MaxSkewMillis is how far a request's ts may be from the approver's
	// clock before it is "expired".
	MaxSkewMillis = 10_000
)

// Frame types.
const (
	TypeHello    = "hello"
	TypeRequest  = "request"
	TypeDecision = "decision"
	TypeError    = "error"
	TypeExec     = "exec"
	TypeExecRes  = "exec-res"
)

// Error codes of an error frame.
const (
	CodeInvalidAuth = "invalid-auth"
	CodeExpired     = "expired"
	CodeReplay      = "replay"
	CodeTooLarge    = "too-large"
	CodeRateLimited = "rate-limited"
	CodeBadRequest  = "bad-request"
)

// Hello is the approver's first frame on every connection.
type Hello struct {
	Type      string `json:"type"`
	V         int    `json:"v"`
	Challenge string `json:"challenge"`
}

// PromptRequest is what a human sees: the "request" object of a request
// frame. Its raw JSON bytes (as sent) are what the HMAC covers.
type PromptRequest struct {
	Command       string   `json:"command"`
	Argv          []string `json:"argv"`
	Cwd           string   `json:"cwd"`
	Host          string   `json:"host"`
	Security      string   `json:"security"`
	Ask           string   `json:"ask"`
	AgentID       string   `json:"agentId"`
	SessionKey    string   `json:"sessionKey"`
	NodeID        string   `json:"nodeId"`
	ResolvedPaths []string `json:"resolvedPaths"`
	// Extensions beyond the design's minimum; approvers that do not know
	// them ignore them.
	Reason      string   `json:"reason,omitempty"`      // why the prompt appeared ("allowlist-miss", "ask=always", …)
	Allowlisted []bool   `json:"allowlisted,omitempty"` // per resolved path: already allowlisted?
	Choices     []string `json:"choices,omitempty"`     // decisions offered (no allow-always with ask=always)
	ExpiresAtMs int64    `json:"expiresAtMs,omitempty"` // when the host stops waiting and applies askFallback
	Fallback    string   `json:"askFallback,omitempty"` // what happens then
	// What will run: the canonical form of the parsed command (printed from
	// the tree the host analysed), its sha256 (which the approval binds: the
	// host runs nothing else on this answer), how it runs ("interpreter",
	// "direct", "interpreter, unchecked" or "shell text") and each
	// executable with how it starts ("exec /usr/bin/git", …).
	Canonical   string   `json:"canonical,omitempty"`
	PlanHash    string   `json:"canonicalSha256,omitempty"`
	RunsAs      string   `json:"runsAs,omitempty"`
	Executables []string `json:"executables,omitempty"`
	// AllowAlways says exactly what an allow-always answer would add to
	// the allowlist and what it would leave out; nil when the execution
	// host did not say (the UIs then say so rather than guess).
	AllowAlways *AllowAlwaysPlan `json:"allowAlways,omitempty"`
}

// AllowAlwaysPlan is what an allow-always answer would persist: the
// execution host fills it from the same computation that persists
// (shellcmd.Recordable), so what the human reads is what gets written.
type AllowAlwaysPlan struct {
	// Add lists the exact patterns that would be added, in order.
	Add []string `json:"add"`
	// Skipped explains each executable left out (shells, interpreters,
	// privilege changers, unresolved names).
	Skipped []string `json:"skipped,omitempty"`
}

// RequestFrame is a client's prompt.
type RequestFrame struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	TS      int64           `json:"ts"`
	Nonce   string          `json:"nonce"`
	Request json.RawMessage `json:"request"`
	HMAC    string          `json:"hmac"`
}

// DecisionFrame is the approver's answer.
type DecisionFrame struct {
	Type     string `json:"type"`
	ID       string `json:"id"`
	Decision string `json:"decision"`
	HMAC     string `json:"hmac"`
	// By names who answered ("approver tui", "approver web", "approver
	// auto-decide"). It is an extension beyond the design's frame and is
	// NOT covered by the hmac: informational only (audit text), never a
	// basis for a security decision.
	By string `json:"by,omitempty"`
}

// ErrorFrame refuses a frame.
type ErrorFrame struct {
	Type    string `json:"type"`
	ID      string `json:"id,omitempty"`
	Code    string `json:"code"`
	Message string `json:"message"`
}
