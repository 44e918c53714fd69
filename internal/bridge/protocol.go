package bridge

import (
	"encoding/json"
	"strconv"
	"strings"
)

// ProtocolVersion is the bridge protocol this build speaks.
const ProtocolVersion = 1

// MethodConnect is the method of the first frame on every connection.
const MethodConnect = "connect"

// Roles a connection can take. An issued credential (or the gateway's own
// token) grants agent or operator; nodes authenticate with their key and
// paired token.
const (
	RoleAgent    = "agent"
	RoleOperator = "operator"
	RoleNode     = "node"
)

// EventConnectChallenge is the first frame the gateway sends on every
// connection, before it reads the connect request: a fresh nonce that the
// client's proof covers, so a recorded connect cannot be replayed, and the
// gateway's public key, which the client checks against its pin before it
// answers.
const EventConnectChallenge = "connect.challenge"

// ConnectChallenge is the payload of the connect.challenge event.
type ConnectChallenge struct {
	Nonce string `json:"nonce"`
	Ts    int64  `json:"ts"`
	// GatewayKey is the gateway's Ed25519 public key, unpadded base64url.
	GatewayKey string `json:"gatewayKey"`
	// ChannelKey is the gateway's ephemeral X25519 key for this
	// connection's channel (channel.go), unpadded base64url.
	ChannelKey string `json:"channelKey"`
}

// ConnectParams are the params of the connect request.
type ConnectParams struct {
	Role string `json:"role"`
	Auth Auth   `json:"auth"`
	// ClientNonce is the client's fresh nonce, which the gateway signs
	// in its result to prove it holds its key.
	ClientNonce string `json:"clientNonce"`
	// ChannelKey is the client's ephemeral X25519 key for this
	// connection's channel (channel.go); a gateway refuses a connect
	// without one.
	ChannelKey string     `json:"channelKey,omitempty"`
	Client     ClientInfo `json:"client"`
	Node       *NodeInfo  `json:"node,omitempty"`
	// Device proves a node's identity: its public key and a signature
	// of DeviceAuthPayload over the connection's challenge. Required for
	// role node.
	Device *DeviceAuth `json:"device,omitempty"`
}

// DeviceAuth is a node's proof of key possession (OpenClaw's connect
// "device" object): ID is the hex SHA-256 of the raw Ed25519 public key,
// PublicKey that raw key and Signature the signature of DeviceAuthPayload,
// both unpadded base64url; Nonce repeats the challenge and SignedAt is the
// signer's clock in Unix milliseconds.
type DeviceAuth struct {
	ID        string `json:"id"`
	PublicKey string `json:"publicKey"`
	Signature string `json:"signature"`
	SignedAt  int64  `json:"signedAt"`
	Nonce     string `json:"nonce"`
}

// DeviceAuthPayload is the canonical string a node signs on connect, and
// its token or join key proof (SecretProof) covers:
//
//	exechost-node-v3|<deviceId>|<nodeId>|<role>|<signedAtMs>|<gatewayKey>|<nonce>|<clientNonce>|<channel>|<kind>|<ref>
//
// kind and ref are the connect's Auth.Kind and Auth.Ref (empty for
// interactive pairing). The nonce makes every signature good for one
// connection only, the gateway key for one gateway, channel
// (Transcript.Binding) for the keys of this connection's channel; nodeId and role bind
// it to what the node claims on that connection. The version tag differs
// from OpenClaw's "v2"/"v3" on purpose: a signature made for one protocol
// is never valid in the other. No field can contain "|": ids, roles,
// keys and nonces use other alphabets, and the gateway validates nodeId
// and ref before it verifies.
func DeviceAuthPayload(deviceID, nodeID, role string, signedAtMs int64, gatewayKey, nonce, clientNonce, channel, kind, ref string) string {
	return strings.Join([]string{NodeAuthVersion, deviceID, nodeID, role, strconv.FormatInt(signedAtMs, 10), gatewayKey, nonce, clientNonce, channel, kind, ref}, "|")
}

// DeviceSigner is a node's key as the handshake needs it;
// *nodekey.Key implements it.
type DeviceSigner interface {
	DeviceID() string
	PublicKeyString() string
	Sign(msg []byte) string
}

// Auth carries a connection's proof of its credential. Token and JoinKey
// are the client's secrets: they are never encoded (json:"-"); Handshake
// turns them into Kind, Ref and Proof, which is all that travels. A node
// pairing for the first time proves neither (interactive pairing) or a
// join key (headless pairing).
type Auth struct {
	Token   string `json:"-"`
	JoinKey string `json:"-"`
	// Kind is AuthToken, AuthJoinKey, AuthCredential or empty.
	Kind string `json:"kind,omitempty"`
	// Ref names the credential: a credential's id, a join key's
	// SecretRef; empty for a token.
	Ref string `json:"ref,omitempty"`
	// Proof is the MAC (SecretProof) or signature over the connection's
	// auth payload.
	Proof string `json:"proof,omitempty"`
}

// ClientInfo describes the connecting program, for logs and the registry.
type ClientInfo struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Platform string `json:"platform"`
}

// NodeInfo is a node's self-description in its connect request.
type NodeInfo struct {
	NodeID      string   `json:"nodeId"`
	DisplayName string   `json:"displayName"`
	Commands    []string `json:"commands"`
}

// Connect statuses of a node.
const (
	StatusPaired  = "paired"
	StatusPending = "pending"
)

// ConnectResult is the payload of a successful connect response.
type ConnectResult struct {
	Protocol int    `json:"protocol"`
	Role     string `json:"role"`
	NodeID   string `json:"nodeId,omitempty"`
	// Status is a node's pairing state: "paired", or "pending" while an
	// operator has not approved it yet.
	Status string `json:"status,omitempty"`
	// Token is a node's newly issued token when a join key paired it.
	Token string `json:"token,omitempty"`
	// GatewaySignature is the gateway's signature of GatewayAuthPayload:
	// the client accepts the result only if it verifies with the key the
	// challenge showed.
	GatewaySignature string `json:"gatewaySignature,omitempty"`
	// GatewayKey is the key the challenge showed (set by Handshake on
	// the client, not sent), for a caller that pins on first use.
	GatewayKey string `json:"-"`
	// Agent is the agent id the gateway bound to the connection, empty
	// when the credential may act for any agent (an operator's).
	Agent string `json:"agent,omitempty"`
}

// Node commands (what a node announces and the gateway invokes).
const (
	CmdSystemRun          = "system.run"
	CmdSystemWhich        = "system.which"
	CmdExecApprovalsGet   = "system.execApprovals.get"
	CmdExecApprovalsSet   = "system.execApprovals.set"
	EventInvokeRequest    = "node.invoke.request"
	EventInvokeCancel     = "node.invoke.cancel"
	MethodInvokeResult    = "node.invoke.result"
	MethodNodeEvent       = "node.event"
	EventPairApproved     = "node.pair.approved"
	EventPairRejected     = "node.pair.rejected"
	MethodExec            = "exec"
	MethodExecStatus      = "exec.status"
	MethodSessionEvents   = "session.events"
	MethodSessionCommand  = "session.command"
	MethodNodesList       = "nodes.list"
	MethodNodesPending    = "nodes.pending"
	MethodNodesApprove    = "nodes.approve"
	MethodNodesReject     = "nodes.reject"
	MethodNodesRemove     = "nodes.remove"
	MethodJoinKey         = "pairing.joinKey"
	MethodNodeApprovalGet = "nodes.approvals.get"
	MethodNodeApprovalSet = "nodes.approvals.set"
)

// NodeCommands is what a node runner announces.
var NodeCommands = []string{CmdSystemRun, CmdSystemWhich, CmdExecApprovalsGet, CmdExecApprovalsSet}

// InvokeRequest is the payload of a node.invoke.request event.
type InvokeRequest struct {
	ID             string          `json:"id"`
	NodeID         string          `json:"nodeId"`
	Command        string          `json:"command"`
	Params         json.RawMessage `json:"params,omitempty"`
	TimeoutMs      int64           `json:"timeoutMs"`
	IdempotencyKey string          `json:"idempotencyKey"`
}

// InvokeCancel is the payload of a node.invoke.cancel event: the gateway
// stopped waiting for invoke ID (its caller went away), so the node ends
// it — a prompt it is waiting on is withdrawn and the command never runs.
// An extension beyond the design's frames; older nodes ignore it.
type InvokeCancel struct {
	ID     string `json:"id"`
	NodeID string `json:"nodeId"`
	Reason string `json:"reason,omitempty"`
}

// InvokeResult is the params of a node.invoke.result request.
type InvokeResult struct {
	ID     string `json:"id"`
	NodeID string `json:"nodeId"`
	OK     bool   `json:"ok"`
	// Payload is the command's result, JSON produced by Marshal (it is
	// spliced into the frame unchecked, see appendWire).
	Payload json.RawMessage `json:"payload,omitempty"`
	Error   *Error          `json:"error,omitempty"`

	// run, set by InvokeOK, is the payload in place of Payload, written
	// by appendWire straight into the frame: a system.run result is
	// encoded once, into the frame that carries it.
	run *SystemRunResult
}

// InvokeOK is the successful InvokeResult whose payload is v. A
// SystemRunResult is kept to be written into the frame that carries the
// answer; anything else is marshalled now.
func InvokeOK(v any) (InvokeResult, error) {
	if run, ok := v.(SystemRunResult); ok {
		return InvokeResult{OK: true, run: &run}, nil
	}
	raw, err := marshalRaw(v)
	if err != nil {
		return InvokeResult{}, err
	}
	return InvokeResult{OK: true, Payload: raw}, nil
}

// Held is how many bytes r's payload holds, for a cache that bounds what
// it keeps: Payload's length, or the text of the run result kept in its
// place (its encoding is at least as long).
func (r InvokeResult) Held() int {
	if r.run != nil {
		return len(r.run.Stdout) + len(r.run.Stderr) + len(r.run.Error)
	}
	return len(r.Payload)
}

// appendWire encodes r as Marshal would, but splices Payload in without
// the re-scan Marshal gives a json.RawMessage: a system.run payload is the
// whole captured output. Payload must be valid JSON (the node builds it
// with Marshal); an invalid one only makes the gateway reject the node's
// own frame, which the node could write anyway.
func (r InvokeResult) appendWire(dst []byte) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, r.ID)
	dst = append(dst, `,"nodeId":`...)
	dst = appendString(dst, r.NodeID)
	dst = append(dst, `,"ok":`...)
	dst = strconv.AppendBool(dst, r.OK)
	switch {
	case r.run != nil:
		dst = append(dst, `,"payload":`...)
		dst = r.run.appendWire(dst)
	case len(r.Payload) > 0:
		dst = append(dst, `,"payload":`...)
		dst = append(dst, r.Payload...)
	}
	if r.Error != nil {
		b, _ := Marshal(r.Error) // two strings always encode
		dst = append(dst, `,"error":`...)
		dst = append(dst, b...)
	}
	return append(dst, '}')
}

// NodeEvent is the params of a node.event request.
type NodeEvent struct {
	Event string `json:"event"`
	// Payload is the event, JSON produced by Marshal (spliced in
	// unchecked, as InvokeResult's: a finished event carries an output
	// tail).
	Payload json.RawMessage `json:"payload"`
}

// appendWire encodes e as Marshal would, splicing Payload in
// without re-scanning it; see InvokeResult.appendWire.
func (e NodeEvent) appendWire(dst []byte) []byte {
	dst = append(dst, `{"event":`...)
	dst = appendString(dst, e.Event)
	dst = append(dst, `,"payload":`...)
	if len(e.Payload) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, e.Payload...)
	}
	return append(dst, '}')
}

// PairApproved is the payload of a node.pair.approved event: the token the
// node saves in node.json.
type PairApproved struct {
	NodeID string `json:"nodeId"`
	Token  string `json:"token"`
}

// WhichParams and WhichResult are system.which's shapes.
type WhichParams struct {
	Bins []string `json:"bins"`
}

// WhichResult maps each found name to its absolute path.
type WhichResult struct {
	Bins map[string]string `json:"bins"`
}

// ApprovalsGetResult is system.execApprovals.get's payload: the node's
// exec-approvals.json without the socket token, and the hash a set must
// name as its base.
type ApprovalsGetResult struct {
	Path   string          `json:"path"`
	Exists bool            `json:"exists"`
	Hash   string          `json:"hash"`
	File   json.RawMessage `json:"file"`
}

// ApprovalsSetParams is system.execApprovals.set's params; a stale BaseHash
// is refused (CodeStale) so a concurrent local edit is never lost.
type ApprovalsSetParams struct {
	File     json.RawMessage `json:"file"`
	BaseHash string          `json:"baseHash"`
}

// NodeApprovalsParams address a node's approvals through the gateway.
type NodeApprovalsParams struct {
	Node     string          `json:"node"`
	File     json.RawMessage `json:"file,omitempty"`
	BaseHash string          `json:"baseHash,omitempty"`
}
