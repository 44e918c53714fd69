// Package openclaw makes exechost a node host for a real OpenClaw gateway
// (protocol v4): it connects as role "node" with the identity OpenClaw's own
// headless node host uses, proves its Ed25519 device key, and serves
// system.run, system.run.prepare, system.which and
// system.execApprovals.get/set with exechost's engine, so the machine's own
// exec-approvals.json decides and every exechost guarantee (analysis, output
// caps, process-tree kill, audit, askFallback, approver socket) holds.
//
// Frames are the same req/res/event JSON shapes exechost's bridge speaks, so
// the bridge's connection type carries them after the handshake; only the
// handshake and the payloads are OpenClaw's. docs/openclaw.md maps every
// field.
package openclaw

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// ProtocolVersion is the OpenClaw gateway protocol this package speaks.
// OpenClaw accepts N-1 (v3) from its own node host only; exechost asks for
// exactly v4 and reports a mismatch instead of guessing at v3's envelope.
const ProtocolVersion = 4

// Client identity. OpenClaw's gateway keys policy (command allowlists,
// pairing, the node protocol window) on these, so exechost presents itself
// exactly as OpenClaw's headless node host does.
const (
	ClientID   = "node-host"
	ClientMode = "node"
	RoleNode   = "node"
)

// Gateway methods and events used by a node.
const (
	MethodConnect      = "connect"
	MethodInvokeResult = "node.invoke.result"
	MethodNodeEvent    = "node.event"

	EventChallenge     = "connect.challenge"
	EventInvokeRequest = "node.invoke.request"
	EventInvokeCancel  = "node.invoke.cancel"
)

// Node commands served.
const (
	CmdSystemRun        = "system.run"
	CmdSystemRunPrepare = "system.run.prepare"
	CmdSystemWhich      = "system.which"
	CmdApprovalsGet     = "system.execApprovals.get"
	CmdApprovalsSet     = "system.execApprovals.set"
)

// Commands is the declared command surface, sorted as OpenClaw's node host
// sorts its own manifest; Caps the capability categories.
var (
	Commands = []string{CmdApprovalsGet, CmdApprovalsSet, CmdSystemRun, CmdSystemRunPrepare, CmdSystemWhich}
	Caps     = []string{"system"}
)

// Error codes in node.invoke.result, as OpenClaw's node host sends them.
const (
	CodeInvalidRequest = "INVALID_REQUEST"
	CodeUnavailable    = "UNAVAILABLE"
	CodeDenied         = "SYSTEM_RUN_DENIED"
	CodeTimeout        = "TIMEOUT"
)

// connectParams is the connect request's params.
type connectParams struct {
	MinProtocol int          `json:"minProtocol"`
	MaxProtocol int          `json:"maxProtocol"`
	Client      clientInfo   `json:"client"`
	Caps        []string     `json:"caps"`
	Commands    []string     `json:"commands,omitempty"`
	PathEnv     string       `json:"pathEnv,omitempty"`
	Auth        *connectAuth `json:"auth,omitempty"`
	Role        string       `json:"role"`
	Scopes      []string     `json:"scopes"`
	Device      *deviceProof `json:"device,omitempty"`
}

type clientInfo struct {
	ID           string `json:"id"`
	DisplayName  string `json:"displayName,omitempty"`
	Version      string `json:"version"`
	Platform     string `json:"platform"`
	DeviceFamily string `json:"deviceFamily,omitempty"`
	Mode         string `json:"mode"`
	InstanceID   string `json:"instanceId,omitempty"`
}

type connectAuth struct {
	Token string `json:"token,omitempty"`
}

type deviceProof struct {
	ID        string `json:"id"`
	PublicKey string `json:"publicKey"`
	Signature string `json:"signature"`
	SignedAt  int64  `json:"signedAt"`
	Nonce     string `json:"nonce"`
}

// challenge is the connect.challenge event payload.
type challenge struct {
	Nonce string           `json:"nonce"`
	TS    *json.RawMessage `json:"ts"`
}

// helloOK is the part of the hello-ok payload a node uses.
type helloOK struct {
	Type     string `json:"type"`
	Protocol int    `json:"protocol"`
	Server   struct {
		Version string `json:"version"`
		ConnID  string `json:"connId"`
	} `json:"server"`
	Auth struct {
		Role        string `json:"role"`
		DeviceToken string `json:"deviceToken"`
	} `json:"auth"`
	Policy struct {
		MaxPayload     int64 `json:"maxPayload"`
		TickIntervalMs int64 `json:"tickIntervalMs"`
	} `json:"policy"`
}

// invokeRequest is a node.invoke.request event payload. Params travel as a
// JSON string (paramsJSON), not an object.
type invokeRequest struct {
	ID             string  `json:"id"`
	NodeID         string  `json:"nodeId"`
	Command        string  `json:"command"`
	ParamsJSON     *string `json:"paramsJSON"`
	TimeoutMs      int64   `json:"timeoutMs"`
	IdempotencyKey string  `json:"idempotencyKey"`
	SessionKey     string  `json:"sessionKey"`
}

// invokeCancel is a node.invoke.cancel event payload.
type invokeCancel struct {
	InvokeID string `json:"invokeId"`
	NodeID   string `json:"nodeId"`
}

// invokeResult is node.invoke.result's params.
type invokeResult struct {
	ID          string       `json:"id"`
	NodeID      string       `json:"nodeId"`
	OK          bool         `json:"ok"`
	PayloadJSON *string      `json:"payloadJSON,omitempty"`
	Error       *invokeError `json:"error,omitempty"`
}

type invokeError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// nodeEvent is node.event's params: the payload is a JSON string.
type nodeEvent struct {
	Event       string  `json:"event"`
	PayloadJSON *string `json:"payloadJSON"`
}

// authPayloadV3 is the canonical string a device signs in connect:
// v3|deviceId|clientId|clientMode|role|scopes(comma)|signedAtMs|token|nonce|platform|deviceFamily
// with platform and deviceFamily trimmed and ASCII-lower-cased.
func authPayloadV3(deviceID, clientID, clientMode, role string, scopes []string, signedAtMs int64, token, nonce, platform, deviceFamily string) string {
	return strings.Join([]string{
		"v3", deviceID, clientID, clientMode, role, strings.Join(scopes, ","),
		strconv.FormatInt(signedAtMs, 10), token, nonce,
		normalizeMeta(platform), normalizeMeta(deviceFamily),
	}, "|")
}

// normalizeMeta lower-cases ASCII letters only, as OpenClaw does (a full
// Unicode lower-casing would sign a different string for some inputs).
func normalizeMeta(s string) string {
	s = strings.TrimSpace(s)
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 32
		}
	}
	return string(b)
}

// platformIdentity returns the platform and deviceFamily OpenClaw's node
// host reports for a Go GOOS. The gateway's default command policy is keyed
// on them: an unknown platform gets no system.run.
func platformIdentity(goos string) (platform, family string) {
	switch goos {
	case "darwin":
		return "macos", "Mac"
	case "windows":
		return "windows", "Windows"
	case "linux":
		return "linux", "Linux"
	}
	return goos, ""
}

// jsonString marshals v into a *string for the *JSON string fields.
func jsonString(v any) (*string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	s := string(b)
	return &s, nil
}

// declared reports whether cmd is in the declared surface.
func declared(cmd string) bool { return slices.Contains(Commands, cmd) }
