// Package receipt is exechost's signed run receipts: when a run ends or is
// refused, the executing host (the gateway or a node) appends a receipt
// signed with its own Ed25519 identity key (gateway.key / node.key in the
// protected state directory, which no command can read) to
// <state>/receipts.jsonl. Each receipt names the previous one's digest and
// a sequence number, so a host's receipts form one chain; the gateway
// countersigns what it forwarded to a node and what the node answered.
//
// The contract:
//   - A receipt line is its canonical encoding (Canonical) with the
//     signature as the last member: the line without `,"sig":"…"` is the
//     byte string whose signature it carries, prefixed by SignContext. A
//     verifier decodes a line strictly (no unknown or duplicate members),
//     re-encodes it and refuses a line that is not byte-for-byte the
//     canonical form, so no two lines carry one signature.
//   - A receipt's digest is the hex SHA-256 of its whole line (signature
//     included); the next receipt of the same host names it in prev.
//   - Verification (Verify) needs only the lines and the public keys:
//     no state directory, no secret.
//   - Receipts carry digests and sizes, never output, environment values
//     or secrets.
package receipt

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/exechost/exechost/internal/nodekey"
)

// Version is the receipt format's version (Receipt.V).
const Version = 1

// SignContext prefixes the canonical bytes a receipt's signature covers.
// The same key signs the gateway's connect challenges; the prefix keeps a
// receipt signature from ever standing for one (and the reverse).
const SignContext = "exechost-receipt-v1\n"

// Kinds of receipt.
const (
	// KindRun is a run that ended or was refused on the signing host.
	KindRun = "run"
	// KindCountersign is the gateway's view of a run it forwarded to a
	// node: what it sent and what it got back.
	KindCountersign = "countersign"
	// KindRotated records receipts the log removed (retention): the
	// sequence range and the last removed receipt's digest, so a verifier
	// can tell removal by rotation from a gap.
	KindRotated = "rotated"
)

// Approval says who decided a run and how.
type Approval struct {
	// Decision is allow-once, allow-always, deny or allow (policy).
	Decision string `json:"decision,omitempty"`
	// By is "rule" (an allowlist rule or security=full), "grant" (an
	// allow-always the host had recorded), "human" (asked now),
	// "fallback" (askFallback decided) or "policy" (a refusal by policy).
	By string `json:"by"`
	// Rule is the allowlist pattern(s) that matched, when By is rule or
	// grant.
	Rule []string `json:"rule,omitempty"`
	// Approver names the human or route that answered, when By is human.
	Approver string `json:"approver,omitempty"`
	// Reason is the decision's reason code.
	Reason string `json:"reason,omitempty"`
}

// Jail is the confinement a run was started under.
type Jail struct {
	// Layers are the walls this host applied (confine.Layer names).
	Layers []string `json:"layers"`
	// RulesSHA256 is the SHA-256 of the confinement's JSON (writable,
	// protected, hidden, network, limits …).
	RulesSHA256 string `json:"rulesSha256,omitempty"`
}

// Output is a digest of what a run printed, never the bytes.
type Output struct {
	StdoutSHA256 string `json:"stdoutSha256"`
	StdoutBytes  int    `json:"stdoutBytes"`
	StderrSHA256 string `json:"stderrSha256"`
	StderrBytes  int    `json:"stderrBytes"`
	Truncated    bool   `json:"truncated,omitempty"`
	// DroppedBytes is what the output cap dropped.
	DroppedBytes int64 `json:"droppedBytes,omitempty"`
}

// Peer names the other side of a countersignature.
type Peer struct {
	NodeID string `json:"nodeId"`
	// Key is the node's public key (unpadded base64url), as proven on
	// connect.
	Key string `json:"key"`
}

// Removed is the range a rotation removed.
type Removed struct {
	FromSeq uint64 `json:"fromSeq"`
	ToSeq   uint64 `json:"toSeq"`
	// LastDigest is the digest of receipt ToSeq: the next retained
	// receipt names it in prev.
	LastDigest string `json:"lastDigest"`
	File       string `json:"file,omitempty"`
}

// Receipt is one signed record. Field order is the canonical member order.
type Receipt struct {
	V    int    `json:"v"`
	Kind string `json:"kind"`
	// Host is what signed: "gateway" or the node's id.
	Host string `json:"host"`
	// HostKey is the signer's public key (unpadded base64url).
	HostKey string `json:"hostKey"`
	Seq     uint64 `json:"seq"`
	// Prev is the previous receipt's digest ("" for the first).
	Prev string `json:"prev"`
	// Time is when the receipt was written (RFC 3339, UTC).
	Time string `json:"time"`

	RunID      string `json:"runId,omitempty"`
	Event      string `json:"event,omitempty"` // finished, denied
	AgentID    string `json:"agentId,omitempty"`
	SessionKey string `json:"sessionKey,omitempty"`
	// Credential is the id of the credential the caller connected with.
	Credential string `json:"credential,omitempty"`

	Approval *Approval `json:"approval,omitempty"`
	// CommandSHA256 is the SHA-256 of the command text as received.
	CommandSHA256 string `json:"commandSha256,omitempty"`
	// PlanSHA256 is the SHA-256 of the analysed plan (the resolved
	// segments the decision was made on).
	PlanSHA256 string `json:"planSha256,omitempty"`
	// Executables maps each resolved executable to its sha256.
	Executables map[string]string `json:"executables,omitempty"`
	// PolicySHA256 is the SHA-256 of exec-approvals.json as decided on.
	PolicySHA256 string `json:"policySha256,omitempty"`
	Jail         *Jail  `json:"jail,omitempty"`

	ExitCode *int     `json:"exitCode,omitempty"`
	TimedOut bool     `json:"timedOut,omitempty"`
	Error    string   `json:"error,omitempty"`
	Output   *Output  `json:"output,omitempty"`
	Started  string   `json:"started,omitempty"`
	Ended    string   `json:"ended,omitempty"`
	Peer     *Peer    `json:"peer,omitempty"`
	Removed  *Removed `json:"removed,omitempty"`

	Sig string `json:"sig,omitempty"`
}

// ErrNotCanonical is a line that decodes but is not the canonical form of
// what it decodes to: an extra member, a duplicate, reordered members,
// other spacing or escaping.
var ErrNotCanonical = errors.New("receipt is not in canonical form")

// Canonical returns r's signed bytes: its JSON with members in declaration
// order, no insignificant space, Go's escaping, map keys sorted, and no
// sig member.
func (r Receipt) Canonical() ([]byte, error) {
	r.Sig = ""
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("encode receipt: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// signed is what the signature covers.
func signed(canon []byte) []byte {
	return append([]byte(SignContext), canon...)
}

// line joins canonical bytes and a signature into a receipt line (no
// newline).
func line(canon []byte, sig string) []byte {
	out := make([]byte, 0, len(canon)+len(sig)+10)
	out = append(out, canon[:len(canon)-1]...)
	out = append(out, `,"sig":"`...)
	out = append(out, sig...)
	out = append(out, `"}`...)
	return out
}

// Signer signs receipts; *nodekey.Key implements it.
type Signer interface {
	Sign(msg []byte) string
	PublicKeyString() string
}

// Sign fills r.HostKey and r.Sig and returns r's line (no newline).
func Sign(r *Receipt, s Signer) ([]byte, error) {
	r.V = Version
	r.HostKey = s.PublicKeyString()
	canon, err := r.Canonical()
	if err != nil {
		return nil, err
	}
	r.Sig = s.Sign(signed(canon))
	return line(canon, r.Sig), nil
}

// Digest returns the hex SHA-256 of a receipt line (without its newline):
// what the next receipt names in prev.
func Digest(line []byte) string {
	sum := sha256.Sum256(line)
	return hex.EncodeToString(sum[:])
}

// Parse decodes one receipt line strictly: unknown members are refused
// and the line must be the canonical encoding of what it decodes to, with
// the signature last (ErrNotCanonical). It does not check the signature.
func Parse(data []byte) (Receipt, error) {
	var r Receipt
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Receipt{}, fmt.Errorf("decode receipt: %w", err)
	}
	if dec.More() {
		return Receipt{}, fmt.Errorf("decode receipt: %w: data after the object", ErrNotCanonical)
	}
	canon, err := r.Canonical()
	if err != nil {
		return Receipt{}, err
	}
	if r.Sig == "" || !bytes.Equal(line(canon, r.Sig), data) {
		return Receipt{}, ErrNotCanonical
	}
	return r, nil
}

// CheckSignature reports whether r (as Parse returned it) carries a valid
// signature by the key in r.HostKey. Trusting that key is the caller's
// decision.
func CheckSignature(r Receipt) bool {
	pub, err := nodekey.ParsePublicKey(r.HostKey)
	if err != nil {
		return false
	}
	canon, err := r.Canonical()
	if err != nil {
		return false
	}
	return nodekey.Verify(pub, signed(canon), r.Sig)
}

// SHA256 is the hex SHA-256 of s, the digest every receipt field uses.
func SHA256(s []byte) string {
	sum := sha256.Sum256(s)
	return hex.EncodeToString(sum[:])
}

// SHA256String is SHA256 of a string's bytes without copying them: a
// run's output is up to MaxOutput bytes, and every receipt digests it.
func SHA256String(s string) string {
	return SHA256(unsafe.Slice(unsafe.StringData(s), len(s))) // only read
}

// Stamp formats t as receipts do (RFC 3339, nanoseconds, UTC).
func Stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
