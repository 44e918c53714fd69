package asksock

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/hint"
)

// The approver as exec host (docs/approver-exec-host.md): a node runner
// forwards system.run to the approver as an "exec" frame, which is
// authenticated exactly like a prompt's "request" frame (same fields, same
// RequestMAC over the raw "request" bytes), and the approver answers with
// one signed "exec-res" frame:
//
//	{"type":"exec-res","id","ok":true,"payload":{…bridge.SystemRunResult},"hmac"}
//	{"type":"exec-res","id","ok":false,"error":{"code","message","denial"?},"hmac"}
//	hmac = ExecResultMAC(token, challenge, id, raw bytes of payload or error)
//
// The error object is a bridge.Error, made by bridge.AsError exactly as the
// gateway and the node make theirs, so the node forwards it unchanged.
//
// Frame-level refusals (invalid-auth, expired, replay, too-large,
// rate-limited, bad-request) are the ordinary unsigned error frames and mean
// that nothing ran.

// MaxExecResFrame bounds an exec-res line on the client. Output is capped at
// runner.MaxOutput bytes, but JSON may escape each byte into six, so the
// limit is well above the request limit (MaxFrame).
const MaxExecResFrame = 4 << 20

// MaxExecTimeoutMs caps a forwarded command's timeoutMs (24 h): a request
// cannot pin an approver's slot forever.
const MaxExecTimeoutMs = 24 * 60 * 60 * 1000

// ExecResFrame is the approver's answer to an exec frame. Exactly one of
// Payload (OK) and Error (!OK) is present; HMAC covers the raw bytes of
// that one.
type ExecResFrame struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	OK      bool            `json:"ok"`
	Payload json.RawMessage `json:"payload,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
	HMAC    string          `json:"hmac"`
}

// Executor runs one authenticated, forwarded system.run in the approver's
// own session under the approver's exec-approvals.json. The approver's
// host.Engine implements it through approver.EngineExecutor. A denial or failure to
// run is an error; bridge.AsError maps it for the wire.
type Executor interface {
	Exec(ctx context.Context, req bridge.SystemRunParams) (bridge.SystemRunResult, error)
}

// ExecutorFunc adapts a function to Executor.
type ExecutorFunc func(ctx context.Context, req bridge.SystemRunParams) (bridge.SystemRunResult, error)

// Exec calls f.
func (f ExecutorFunc) Exec(ctx context.Context, req bridge.SystemRunParams) (bridge.SystemRunResult, error) {
	return f(ctx, req)
}

// ExecResultMAC returns the hmac field of an exec-res frame:
//
//	hex(HMAC-SHA256(key=token, challenge ":" id ":" sha256hex(body)))
//
// where body is the raw JSON bytes of the frame's "payload" when ok is true
// and of its "error" when ok is false, as sent. Binding the challenge and id
// means a result cannot be replayed onto another connection or request. The
// ok flag itself is not hashed: the client requires a payload to carry
// "exitCode" and an error to carry a non-empty "code", so signed bytes of
// one kind never pass as the other.
func ExecResultMAC(token []byte, challenge, id string, body []byte) string {
	sum := sha256.Sum256(body)
	m := hmac.New(sha256.New, token)
	m.Write([]byte(challenge))
	m.Write([]byte{':'})
	m.Write([]byte(id))
	m.Write([]byte{':'})
	m.Write([]byte(hex.EncodeToString(sum[:])))
	return hex.EncodeToString(m.Sum(nil))
}

// SessionEnv lists the variables that connect a command to the approver's
// desktop session. A forwarded request may not set them: running in the
// approver's session is the point of forwarding, so the approver's own
// values are what the command sees. Unexported so no caller can shorten
// the refusal; SessionEnv returns a copy.
var sessionEnv = []string{"DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "XAUTHORITY"}

// SessionEnv returns the desktop-session variables (see sessionEnv), a
// fresh copy on every call.
func SessionEnv() []string { return slices.Clone(sessionEnv) }

// ErrInvalidExec wraps every reason the approver refuses an exec request
// before handing it to its executor; checkExecRequest marks each one
// bridge.InvalidRequest (INVALID_REQUEST on the wire).
var ErrInvalidExec = errors.New("invalid exec request")

// ErrSessionEnv is the cause of an exec refused because its env sets one of
// SessionEnv().
var ErrSessionEnv = errors.New("session variable cannot be set by a forwarded request")

// checkExecRequest validates a decoded exec request before anything runs.
// Dangerous env names are refused again by the engine (policy.DangerousEnv);
// session variables are refused here.
func checkExecRequest(r *bridge.SystemRunParams) error {
	if len(r.Command) == 0 && strings.TrimSpace(r.RawCommand) == "" {
		return bridge.InvalidRequest(fmt.Errorf("%w: neither command nor rawCommand", ErrInvalidExec))
	}
	if r.TimeoutMs < 0 || r.TimeoutMs > MaxExecTimeoutMs {
		return bridge.InvalidRequest(fmt.Errorf("%w: timeoutMs %d out of range [0, %d]", ErrInvalidExec, r.TimeoutMs, MaxExecTimeoutMs))
	}
	if r.NodeID != "" && !validID(r.NodeID) {
		return bridge.InvalidRequest(fmt.Errorf("%w: malformed nodeId", ErrInvalidExec))
	}
	for name := range r.Env {
		for _, s := range sessionEnv {
			if strings.EqualFold(name, s) {
				return bridge.InvalidRequest(hint.Wrap(fmt.Errorf("%w: env %s: %w", ErrInvalidExec, s, ErrSessionEnv), fmt.Sprintf("the approver's own %s is used", s)))
			}
		}
	}
	return nil
}
