package bridge

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/exechost/exechost/internal/hint"
)

// MaxChallengeFrames bounds how many frames a client skips while it waits
// for the connect challenge, so a misbehaving server cannot keep it
// reading forever (the context deadline bounds the time).
const MaxChallengeFrames = 8

// Dial connects to a gateway, performs the connect handshake with p and
// returns the established connection. A refused handshake returns the
// gateway's *Error (CodeUnauthorized for bad credentials). For role node,
// opts.Device signs the gateway's challenge; opts.Credential signs it for
// an issued client credential; opts.GatewayKey pins the gateway's key.
func Dial(ctx context.Context, url string, p ConnectParams, dopts *websocket.DialOptions, opts Options) (*Conn, ConnectResult, error) {
	ws, resp, err := websocket.Dial(ctx, url, dopts)
	if err != nil {
		if e := BusyRefusal(url, resp); e != nil {
			return nil, ConnectResult{}, e
		}
		if why := UpgradeRefusal(resp); why != "" {
			return nil, ConnectResult{}, fmt.Errorf("dial %s: the gateway refused the connection: %s", url, why)
		}
		return nil, ConnectResult{}, hint.Wrap(fmt.Errorf("dial %s: %w", url, err), "is `exechost gateway` running there? --gateway sets the URL")
	}
	res, ch, err := Handshake(ctx, ws, p, ClientAuth{Device: opts.Device, Credential: opts.Credential, GatewayKey: opts.GatewayKey})
	if err != nil {
		ws.CloseNow()
		if _, ok := err.(*Error); ok {
			return nil, res, err
		}
		return nil, res, fmt.Errorf("connect to %s: %w", url, err)
	}
	opts.Channel = ch
	return NewConn(ws, opts), res, nil
}

// Handshake runs the client side of the connect handshake on an open
// WebSocket: it waits for the gateway's connect.challenge, checks the
// gateway key it shows against a.GatewayKey (before sending anything),
// sends the connect request with a proof of its credential — a.Device's
// signature for a node, a.Credential's signature, or a MAC of p.Auth's
// token or join key; the secrets themselves never leave — and reads the
// response, whose gateway signature over the client's nonce and both
// channel keys must verify with the key shown. It returns the channel
// every later frame travels on (Options.Channel for NewConn). A refusal
// is returned as the gateway's *Error. The caller closes ws on error.
func Handshake(ctx context.Context, ws *websocket.Conn, p ConnectParams, a ClientAuth) (ConnectResult, *Channel, error) {
	var res ConnectResult
	var cc ConnectChallenge
	for i := 0; ; i++ {
		if i == MaxChallengeFrames {
			return res, nil, fmt.Errorf("%w: no %s event in the first %d frames", ErrBadFrame, EventConnectChallenge, MaxChallengeFrames)
		}
		f, err := ReadFrame(ctx, ws)
		if err != nil {
			return res, nil, fmt.Errorf("wait for the connect challenge: %w", err)
		}
		if f.Type == TypeRes && f.OK != nil && !*f.OK && f.Error != nil {
			return res, nil, f.Error // refused before the handshake (e.g. busy)
		}
		if f.Type != TypeEvent || f.Event != EventConnectChallenge {
			continue
		}
		if err := Unmarshal(f.Payload, &cc); err != nil || cc.Nonce == "" {
			return res, nil, fmt.Errorf("%w: bad connect challenge", ErrBadFrame)
		}
		break
	}
	gk, err := parseKey(cc.GatewayKey)
	if err != nil {
		return res, nil, hint.Wrap(fmt.Errorf("%w: the server shows no usable gateway key (%v); it is not an exechost gateway of this version", ErrGatewayKey, err), "upgrade the gateway")
	}
	if a.GatewayKey != "" && a.GatewayKey != cc.GatewayKey {
		return res, nil, hint.Wrap(fmt.Errorf("%w: the server shows gateway key %s, not the pinned %s; nothing was sent", ErrGatewayKey, KeyFingerprint(cc.GatewayKey), KeyFingerprint(a.GatewayKey)), "another process may be listening on the gateway's address; if the gateway's key really changed, see docs/threat-model-gateway.md on re-pinning")
	}
	if cc.ChannelKey == "" {
		return res, nil, hint.Wrap(fmt.Errorf("%w: the gateway offers no channel key in its challenge: it is older than this client, and this client does not send a credential proof over an unbound connection", ErrChannel), "upgrade the gateway to this client's version")
	}
	mine, err := NewChannelKey()
	if err != nil {
		return res, nil, err
	}
	p.ClientNonce = NewNonce()
	p.ChannelKey = mine.Public
	t := Transcript{GatewayKey: cc.GatewayKey, Nonce: cc.Nonce, ClientNonce: p.ClientNonce, GatewayChannelKey: cc.ChannelKey, ClientChannelKey: mine.Public}
	// Derived before anything is sent: a malformed gateway channel key
	// fails here, with nothing of the credential on the wire.
	ch, err := mine.Channel(t, false)
	if err != nil {
		return res, nil, err
	}
	proveAuth(&p, a, cc, t.Binding())
	f, err := NewRequest("connect", MethodConnect, p)
	if err != nil {
		return res, nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, WriteTimeout)
	err = WriteFrame(wctx, ws, f)
	cancel()
	if err != nil {
		return res, nil, err
	}
	r, err := ch.readAnswer(ctx, ws)
	if err != nil {
		return res, nil, err
	}
	if r.Type != TypeRes || r.OK == nil {
		return res, nil, fmt.Errorf("%w: expected a response, got %s", ErrBadFrame, r.Type)
	}
	if !*r.OK {
		if r.Error == nil {
			return res, nil, fmt.Errorf("%w: failed response without an error", ErrBadFrame)
		}
		return res, nil, r.Error
	}
	if err := Unmarshal(r.Payload, &res); err != nil {
		return res, nil, fmt.Errorf("bad connect result: %w", err)
	}
	if !verifySig(gk, GatewayAuthPayload(cc.GatewayKey, cc.Nonce, p.ClientNonce, t.Binding(), p.Role, res.Status), res.GatewaySignature) {
		return ConnectResult{}, nil, fmt.Errorf("%w: the server accepted the connection but did not prove it holds gateway key %s", ErrGatewayKey, KeyFingerprint(cc.GatewayKey))
	}
	res.GatewayKey = cc.GatewayKey
	return res, ch, nil
}

// proveAuth replaces p.Auth's secrets by their proof for challenge ch and,
// for a node, adds the device signature over the same payload.
func proveAuth(p *ConnectParams, a ClientAuth, ch ConnectChallenge, channel string) {
	in := p.Auth
	var out Auth
	switch {
	case a.Credential != nil:
		out.Kind, out.Ref = AuthCredential, a.Credential.CredentialID()
		out.Proof = a.Credential.Sign([]byte(ClientAuthPayload(ch.GatewayKey, ch.Nonce, p.ClientNonce, channel, p.Role, out.Kind, out.Ref)))
		p.Auth = out
		return
	case in.Token != "":
		out.Kind = AuthToken
	case in.JoinKey != "":
		out.Kind, out.Ref = AuthJoinKey, SecretRef(in.JoinKey)
	}
	payload := ClientAuthPayload(ch.GatewayKey, ch.Nonce, p.ClientNonce, channel, p.Role, out.Kind, out.Ref)
	if a.Device != nil {
		nodeID := ""
		if p.Node != nil {
			nodeID = p.Node.NodeID
		}
		at := time.Now().UnixMilli()
		payload = DeviceAuthPayload(a.Device.DeviceID(), nodeID, p.Role, at, ch.GatewayKey, ch.Nonce, p.ClientNonce, channel, out.Kind, out.Ref)
		p.Device = &DeviceAuth{ID: a.Device.DeviceID(), PublicKey: a.Device.PublicKeyString(), SignedAt: at, Nonce: ch.Nonce, Signature: a.Device.Sign([]byte(payload))}
	}
	secret := in.Token
	if secret == "" {
		secret = in.JoinKey
	}
	if secret != "" {
		out.Proof = SecretProof(secret, payload)
	}
	p.Auth = out
}

// parseKey decodes an unpadded base64url Ed25519 public key.
func parseKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("gateway key: %w", err)
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("gateway key: %d bytes, want %d", len(b), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// verifySig reports whether sig (unpadded base64url) is pub's signature
// of msg.
func verifySig(pub ed25519.PublicKey, msg, sig string) bool {
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || len(raw) != ed25519.SignatureSize {
		return false
	}
	return ed25519.Verify(pub, []byte(msg), raw)
}

// KeyFingerprint is a gateway key's short form for messages: the first 8
// bytes of the SHA-256 of the raw key, as nodekey.Fingerprint shows a
// node's (the same digits for the same key).
func KeyFingerprint(key string) string {
	b, err := base64.RawURLEncoding.DecodeString(key)
	if err != nil || key == "" {
		return "(none)"
	}
	sum := sha256.Sum256(b)
	h := hex.EncodeToString(sum[:8])
	return h[0:4] + ":" + h[4:8] + ":" + h[8:12] + ":" + h[12:16]
}

// BusyRefusal is the gateway's answer to an upgrade its handshake limits
// refused (503, Retry-After: too many connections still authenticating)
// as the CodeBusy error it is, which a caller may retry after a second;
// nil when resp is not that answer.
func BusyRefusal(url string, resp *http.Response) *Error {
	if resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		return nil
	}
	why := resp.Status
	if resp.Body != nil {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		if s := strings.TrimSpace(printable(string(b))); s != "" {
			why = s
		}
	}
	return Errorf(CodeBusy, "%w", hint.Wrap(fmt.Errorf("dial %s: the gateway is busy: %s", url, why), "retry in a second"))
}

// printable replaces control characters with spaces: a refusal's body is
// shown to the user.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// UpgradeRefusal returns why a gateway refused the WebSocket upgrade (the
// 403 body of its Host/Origin policy, which carries the fix hint), or ""
// when resp is not such a refusal. The body is bounded and stripped of
// control characters: it is shown to the user.
func UpgradeRefusal(resp *http.Response) string {
	if resp == nil || resp.StatusCode != http.StatusForbidden || resp.Body == nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	why := strings.TrimSpace(printable(string(b)))
	if why == "" {
		why = resp.Status
	}
	return why
}
