package bridge

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
)

// Kinds of credential a connect request proves (Auth.Kind).
const (
	// AuthToken proves a shared secret the gateway keeps a hash of: a
	// node's token, or the gateway's own token (gateway.json, an
	// operator's credential).
	AuthToken = "token"
	// AuthJoinKey proves a one-time join key; Ref is SecretRef of it.
	AuthJoinKey = "joinKey"
	// AuthCredential proves an issued client credential (an Ed25519 key
	// the gateway knows the public half of); Ref is its id.
	AuthCredential = "credential"
)

// ErrGatewayKey is wrapped when the server at the other end does not
// hold the gateway key the client pinned, or cannot prove it holds the key
// it shows. Nothing of the client's credential was sent when it is
// returned for a mismatching key.
var ErrGatewayKey = errors.New("gateway identity check failed")

// CredentialSigner is a client credential's key as the handshake needs
// it: its id and a signature (unpadded base64url) of a message.
type CredentialSigner interface {
	CredentialID() string
	Sign(msg []byte) string
}

// ClientAuth is what the client side of the handshake proves and checks.
// Secrets are never sent: Token and JoinKey in ConnectParams.Auth and the
// Credential key only sign or MAC a payload bound to this connection's
// challenge, the client's nonce, the gateway's key and both channel keys.
type ClientAuth struct {
	// Device signs the challenge as a node's key (role node).
	Device DeviceSigner
	// Credential signs the challenge as an issued client credential.
	Credential CredentialSigner
	// GatewayKey is the pinned gateway public key (unpadded base64url).
	// A server showing another key is refused before anything is sent;
	// empty accepts the key shown (the result's GatewayKey says which,
	// for the caller to pin). Either way the gateway must prove it holds
	// the key by signing the client's nonce.
	GatewayKey string
}

// ClientAuthVersion, NodeAuthVersion and GatewayAuthVersion tag the three
// signed strings of the handshake, so a signature made for one is never
// valid as another (nor in OpenClaw's protocol).
const (
	ClientAuthVersion  = "exechost-client-v2"
	NodeAuthVersion    = "exechost-node-v3"
	GatewayAuthVersion = "exechost-gateway-v2"
)

// ClientAuthPayload is what a client's proof covers:
//
//	exechost-client-v2|<gatewayKey>|<nonce>|<clientNonce>|<channel>|<role>|<kind>|<ref>
//
// The gateway's key binds the proof to one gateway (a squatter showing
// its own key gets a proof no real gateway accepts), the nonce to one
// connection and channel (Transcript.Binding: both ends' channel keys)
// to the keys that protect every later frame, so a relayed proof is
// useless on any other channel. No field can contain "|": keys and nonces
// are base64url or hex, roles and kinds fixed words, refs checked by the
// gateway.
func ClientAuthPayload(gatewayKey, nonce, clientNonce, channel, role, kind, ref string) string {
	return strings.Join([]string{ClientAuthVersion, gatewayKey, nonce, clientNonce, channel, role, kind, ref}, "|")
}

// GatewayAuthPayload is what the gateway signs in a successful connect
// result, proving it holds the key the challenge showed:
//
//	exechost-gateway-v2|<gatewayKey>|<nonce>|<clientNonce>|<channel>|<role>|<status>
//
// channel (Transcript.Binding) tells the client the gateway itself chose
// the channel key of the challenge and saw the client's.
func GatewayAuthPayload(gatewayKey, nonce, clientNonce, channel, role, status string) string {
	return strings.Join([]string{GatewayAuthVersion, gatewayKey, nonce, clientNonce, channel, role, status}, "|")
}

// SecretRef names a secret without revealing it: the first 16 hex digits
// of its SHA-256, which is also the prefix of the hash the gateway stores.
func SecretRef(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:8])
}

// SecretProof proves knowledge of secret for payload: HMAC-SHA256 keyed
// with the secret's SHA-256 (what the gateway stores), unpadded base64url.
func SecretProof(secret, payload string) string {
	sum := sha256.Sum256([]byte(secret))
	return macProof(sum[:], payload)
}

// VerifySecretProof checks a SecretProof against the stored hex SHA-256
// of the secret, in constant time. Anything malformed is false.
func VerifySecretProof(storedHash, payload, proof string) bool {
	key, err := hex.DecodeString(storedHash)
	if err != nil || len(key) != sha256.Size || proof == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(macProof(key, payload)), []byte(proof)) == 1
}

func macProof(key []byte, payload string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// NewNonce returns 32 random bytes, hex: a connection's challenge or a
// client's nonce.
func NewNonce() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // never happens on supported platforms
	}
	return hex.EncodeToString(b[:])
}
