// Package asksock is the approval socket ("ask socket") between an
// execution host (the gateway process or a node runner) and the human's
// approver (`exechost approver` and its UIs in internal/approverui): a Unix
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
package asksock

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
