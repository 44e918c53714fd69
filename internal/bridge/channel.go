package bridge

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
)

// The channel: every frame after the connect handshake travels sealed
// under keys only the two endpoints can derive.
//
// The gateway's connect.challenge carries a fresh X25519 public key
// (ConnectChallenge.ChannelKey); the client answers with its own
// (ConnectParams.ChannelKey). Both ends compute the X25519 shared secret.
// The transcript — channel version, the gateway's Ed25519 key, the
// challenge nonce, the client's nonce and both channel keys — is covered
// by the client's credential proof (ClientAuthPayload, DeviceAuthPayload
// take its Binding) and by the gateway's signature in the connect result
// (GatewayAuthPayload), so neither end accepts a handshake in which a
// third party substituted a key: a relay that forwards the handshake
// unchanged gets a session whose keys it cannot compute, and one that
// substitutes its own key gets a proof the gateway refuses (or a result
// the client refuses). Two AES-256-GCM keys, one per direction, come from
// HKDF-SHA256 over the shared secret, salted with the transcript's hash.
//
// A sealed frame is one binary WebSocket message: the frame's JSON text
// (exactly the frame the design fixes) encrypted and authenticated with
// the sender's key, under a nonce that is the sender's frame count (the
// sequence number, never sent). The receiver opens frame n with nonce n,
// so a tampered, replayed, reordered or dropped frame fails to open and
// the connection closes.
//
// WebSocket control frames are not sealed (the library writes them), so
// what they say is not trusted. A close reason carries meaning ("node
// removed by the operator; its token is revoked", "credential ci was
// revoked"), so the closing end sends it as a sealed close record — the
// last sealed message, whose plaintext is closeRecord then the reason —
// and a close frame without a reason; the receiver reports only a reason
// that came sealed, never the text of an unsealed close frame (a relay's
// forgery), and a reason a relay withholds becomes "no authenticated
// reason", which a relay can cause anyway by cutting the connection.
// Pings and pongs stay unsealed: they carry only liveness, and a relay
// that answers pings for a peer that is gone, or drops them, achieves no
// more than one that holds or cuts the connection, which it always can;
// every call has its own deadline, and a dropped sealed frame is detected
// by the next one's count.

// ChannelVersion tags the transcript and the key schedule.
const ChannelVersion = "exechost-channel-v1"

// SealOverhead is what sealing adds to a frame (the GCM tag).
const SealOverhead = 16

// closeRecord starts the plaintext of a sealed close record; a frame's
// JSON never starts with it.
const closeRecord = 0x00

// closeRecordWait bounds the write of a close record to a peer that
// stopped reading.
const closeRecordWait = 2 * time.Second

// maxCloseReason bounds a close reason, sealed or not (the WebSocket
// close frame's own limit is 123 bytes).
const maxCloseReason = 120

// ErrChannel is wrapped when a sealed frame fails to open, or when the
// peer does not speak the sealed channel.
var ErrChannel = errors.New("channel authentication failed")

// ChannelKey is one end's ephemeral X25519 key for one connection.
type ChannelKey struct {
	priv *ecdh.PrivateKey
	// Public is the public half, unpadded base64url (32 bytes).
	Public string
}

// NewChannelKey returns a fresh ephemeral key.
func NewChannelKey() (*ChannelKey, error) {
	priv, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("channel key: %w", err)
	}
	return &ChannelKey{priv: priv, Public: base64.RawURLEncoding.EncodeToString(priv.PublicKey().Bytes())}, nil
}

// Transcript is what both ends of one handshake agree on before the
// channel's keys exist.
type Transcript struct {
	GatewayKey        string // the gateway's Ed25519 key the challenge showed
	Nonce             string // the challenge nonce
	ClientNonce       string
	GatewayChannelKey string // ConnectChallenge.ChannelKey
	ClientChannelKey  string // ConnectParams.ChannelKey
}

// Binding is the transcript as the handshake's proofs and signature cover
// it: both channel keys (the other fields are in those payloads already).
// Both are base64url, so neither contains the payloads' "|" or the ".".
func (t Transcript) Binding() string { return t.GatewayChannelKey + "." + t.ClientChannelKey }

func (t Transcript) hash() []byte {
	sum := sha256.Sum256([]byte(strings.Join([]string{ChannelVersion, t.GatewayKey, t.Nonce, t.ClientNonce, t.GatewayChannelKey, t.ClientChannelKey}, "|")))
	return sum[:]
}

// Channel derives the connection's channel from this key, the transcript
// (whose peer channel key it reads) and which end this is. A malformed
// peer key fails with ErrChannel.
func (k *ChannelKey) Channel(t Transcript, gatewaySide bool) (*Channel, error) {
	peer, mine := t.ClientChannelKey, t.GatewayChannelKey
	if !gatewaySide {
		peer, mine = mine, peer
	}
	if mine != k.Public {
		return nil, fmt.Errorf("%w: the transcript does not carry this end's channel key", ErrChannel)
	}
	raw, err := base64.RawURLEncoding.DecodeString(peer)
	if err != nil {
		return nil, fmt.Errorf("%w: peer channel key: %v", ErrChannel, err)
	}
	pub, err := ecdh.X25519().NewPublicKey(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: peer channel key: %v", ErrChannel, err)
	}
	// ECDH refuses the low-order points that would make the secret
	// all zeros (a relay's way to know it).
	secret, err := k.priv.ECDH(pub)
	if err != nil {
		return nil, fmt.Errorf("%w: key exchange: %v", ErrChannel, err)
	}
	salt := t.hash()
	c2g, err := newAEAD(secret, salt, ChannelVersion+" client to gateway")
	if err != nil {
		return nil, err
	}
	g2c, err := newAEAD(secret, salt, ChannelVersion+" gateway to client")
	if err != nil {
		return nil, err
	}
	if gatewaySide {
		return &Channel{seal: g2c, open: c2g}, nil
	}
	return &Channel{seal: c2g, open: g2c}, nil
}

func newAEAD(secret, salt []byte, info string) (cipher.AEAD, error) {
	key, err := hkdf.Key(sha256.New, secret, salt, info, 32)
	if err != nil {
		return nil, fmt.Errorf("channel keys: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("channel keys: %w", err)
	}
	return cipher.NewGCM(block)
}

// Channel seals the frames one end sends and opens those it receives,
// counting each direction. Writes are serialised (the count must follow
// the order on the wire); reads come from one read loop.
type Channel struct {
	wmu     sync.Mutex
	seal    cipher.AEAD
	sendSeq uint64
	broken  bool // a write failed midway: no later frame may follow it

	open    cipher.AEAD
	recvSeq uint64

	// unsealedCloseReasons reports the text of unsealed close frames as
	// before the close record existed: tests' control only.
	unsealedCloseReasons bool
}

func seqNonce(n uint64) []byte {
	var nonce [12]byte
	binary.BigEndian.PutUint64(nonce[4:], n)
	return nonce[:]
}

// WriteFrame writes f sealed: the gateway's connect result, the first
// sealed frame, written before a Conn owns the socket (see WriteFrame for
// ctx).
func (ch *Channel) WriteFrame(ctx context.Context, ws *websocket.Conn, f Frame) error {
	return ch.writeSealed(ctx, ws, f)
}

// readAnswer reads the gateway's answer to a connect request: a refusal
// comes unsealed (the gateway may refuse before it has a channel), an
// acceptance only sealed, as the channel's first frame.
func (ch *Channel) readAnswer(ctx context.Context, ws *websocket.Conn) (Frame, error) {
	ws.SetReadLimit(MaxFrame + SealOverhead)
	data, sealed, err := readMessage(ctx, ws, ch)
	if err != nil {
		return Frame{}, closeReason(err)
	}
	f, err := DecodeFrame(data)
	if err != nil {
		return Frame{}, err
	}
	if !sealed && (f.Type != TypeRes || f.OK == nil || *f.OK) {
		return Frame{}, fmt.Errorf("%w: the gateway's answer to connect was not sealed; only a refusal may be", ErrChannel)
	}
	return f, nil
}

// writeSealed encodes f, seals it with the next send number and writes it
// as one binary message.
func (ch *Channel) writeSealed(ctx context.Context, ws *websocket.Conn, f Frame) error {
	bp := frameBufs.get()
	defer frameBufs.put(bp)
	data, err := f.appendJSON((*bp)[:0])
	if err != nil {
		return fmt.Errorf("encode frame: %w", err)
	}
	ch.wmu.Lock()
	defer ch.wmu.Unlock()
	if ch.broken {
		return fmt.Errorf("%w: the channel was closed, or an earlier write failed", ErrClosed)
	}
	if cap(data)-len(data) < SealOverhead { // seal in place, not into a fresh copy
		data = slices.Grow(data, SealOverhead)
	}
	data = ch.seal.Seal(data[:0], seqNonce(ch.sendSeq), data, nil)
	*bp = data
	ch.sendSeq++
	if err := ws.Write(ctx, websocket.MessageBinary, data); err != nil {
		ch.broken = true
		return fmt.Errorf("%w: write: %v", ErrClosed, err)
	}
	return nil
}

// openSealed opens the next frame the peer sent (a binary message) into
// a fresh slice of its exact size. A frame that does not open under the
// next receive number fails with ErrChannel.
func (ch *Channel) openSealed(sealed []byte) ([]byte, error) {
	if len(sealed) < SealOverhead {
		return nil, fmt.Errorf("%w: a sealed frame shorter than its tag", ErrChannel)
	}
	out, err := ch.open.Open(make([]byte, 0, len(sealed)-SealOverhead), seqNonce(ch.recvSeq), sealed, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: frame %d was tampered with, replayed, reordered or dropped on the way", ErrChannel, ch.recvSeq)
	}
	ch.recvSeq++
	return out, nil
}

// writeClose sends reason as the channel's last sealed message (a close
// record); no frame may follow it. A failed write is reported and leaves
// the channel broken as writeSealed does.
func (ch *Channel) writeClose(ctx context.Context, ws *websocket.Conn, reason string) error {
	reason = truncate(strings.ToValidUTF8(reason, "?"), maxCloseReason)
	data := append([]byte{closeRecord}, reason...)
	ch.wmu.Lock()
	defer ch.wmu.Unlock()
	if ch.broken {
		return fmt.Errorf("%w: the channel was closed, or an earlier write failed", ErrClosed)
	}
	sealed := ch.seal.Seal(nil, seqNonce(ch.sendSeq), data, nil)
	ch.sendSeq++
	ch.broken = true // the close record is the last sealed message
	ctx, cancel := context.WithTimeout(ctx, closeRecordWait)
	defer cancel()
	if err := ws.Write(ctx, websocket.MessageBinary, sealed); err != nil {
		return fmt.Errorf("%w: write close record: %v", ErrClosed, err)
	}
	return nil
}

// closeRecordReason returns the reason of an opened message that is a
// close record.
func closeRecordReason(data []byte) (string, bool) {
	if len(data) == 0 || data[0] != closeRecord {
		return "", false
	}
	r := data[1:]
	if len(r) > maxCloseReason || !utf8.Valid(r) {
		r = []byte(truncate(strings.ToValidUTF8(string(r), "?"), maxCloseReason))
	}
	return string(r), true
}

// closedBy turns the read error that ended a sealed connection into the
// error pending calls fail with: the reason of the peer's close record
// when one came, else the close frame's status only (its text is not
// authenticated, so it is not shown).
func (ch *Channel) closedBy(err error, sealedReason *string) error {
	if ch.unsealedCloseReasons {
		return closeReason(err)
	}
	if sealedReason != nil {
		return fmt.Errorf("%w by peer: %s", ErrClosed, *sealedReason)
	}
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return fmt.Errorf("%w (%s) with no authenticated reason: the peer gave none, or the close came from elsewhere on the way", ErrClosed, closeStatusText(ce.Code))
	}
	return fmt.Errorf("%w: %v", ErrClosed, err)
}

// closeStatusText says what a close status means in fixed words: the
// status is not authenticated either, but a forged one can only claim
// one of these.
func closeStatusText(c websocket.StatusCode) string {
	switch c {
	case websocket.StatusMessageTooBig:
		return "status 1009: a frame exceeded the peer's read limit"
	case websocket.StatusGoingAway:
		return "status 1001: the peer is going away"
	case websocket.StatusPolicyViolation:
		return "status 1008: the peer refused a frame"
	case websocket.StatusNormalClosure:
		return "status 1000: a normal closure"
	}
	return fmt.Sprintf("status %d", int(c))
}
