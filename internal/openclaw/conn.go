package openclaw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/hint"
)

// HandshakeTimeout bounds the whole handshake (dial, challenge, connect
// response). OpenClaw's own client waits 15 s for the challenge; a gateway
// that is slow to start answers UNAVAILABLE with retryAfterMs instead.
const HandshakeTimeout = 20 * time.Second

// ErrPairingRequired is wrapped by a ConnectError the gateway answered with
// PAIRING_REQUIRED (or NOT_PAIRED): an operator must approve this device.
var ErrPairingRequired = errors.New("pairing required")

// ErrProtocolMismatch is wrapped when the gateway does not speak v4.
var ErrProtocolMismatch = errors.New("protocol mismatch")

// ErrAuth is wrapped when the gateway refused the credentials; retrying
// with the same ones cannot help.
var ErrAuth = errors.New("gateway refused the credentials")

// ConnectError is a refused connect: the gateway's code, message and
// details (OpenClaw puts the machine-readable reason in details.code).
type ConnectError struct {
	Code         string         `json:"code"`
	Message      string         `json:"message"`
	Details      map[string]any `json:"details"`
	Retryable    bool           `json:"retryable"`
	RetryAfterMs int64          `json:"retryAfterMs"`
}

func (e *ConnectError) Error() string {
	msg := "gateway refused connect: " + e.Code + ": " + e.Message
	if dc := e.detail("code"); dc != "" {
		msg += " (" + dc + ")"
	}
	return msg
}

func (e *ConnectError) detail(k string) string {
	if v, ok := e.Details[k].(string); ok {
		return v
	}
	return ""
}

// Unwrap classifies the refusal for errors.Is.
func (e *ConnectError) Unwrap() error {
	dc := e.detail("code")
	switch {
	case e.Code == "PAIRING_REQUIRED" || e.Code == "NOT_PAIRED" || dc == "PAIRING_REQUIRED" || strings.Contains(strings.ToLower(e.Message), "pairing required"):
		return ErrPairingRequired
	case dc == "PROTOCOL_MISMATCH" || strings.Contains(strings.ToLower(e.Message), "protocol mismatch"):
		return ErrProtocolMismatch
	case strings.HasPrefix(dc, "AUTH_") || strings.HasPrefix(dc, "DEVICE_AUTH_") || e.Code == "UNAUTHORIZED":
		return ErrAuth
	}
	return nil
}

// rawFrame is a frame read during the handshake, keeping the error's
// details that bridge.Error drops.
type rawFrame struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	OK      *bool           `json:"ok"`
	Payload json.RawMessage `json:"payload"`
	Error   *ConnectError   `json:"error"`
	Event   string          `json:"event"`
}

// dialParams is what dial needs: where, who (role, client identity,
// declared surface) and the credentials.
type dialParams struct {
	URL        string
	Role       string
	Scopes     []string
	ClientID   string
	ClientMode string
	Caps       []string
	Commands   []string
	Token      string
	// TLSFingerprint pins a wss:// gateway's certificate (dialsafe.go);
	// empty: $EXECHOST_TLS_FINGERPRINT, else normal TLS verification.
	TLSFingerprint string
	Identity       *Identity
	DisplayName    string
	InstanceID     string
	Version        string
	GOOS           string
	PathEnv        string
	// anyOwner skips the check of who owns a loopback socket the token
	// goes to (tests' control only).
	anyOwner bool
}

// dial opens the WebSocket, answers the challenge with a signed connect,
// and returns the open bridge connection and hello-ok.
func dial(ctx context.Context, p dialParams, opts bridge.Options) (*bridge.Conn, helloOK, error) {
	var hello helloOK
	hctx, cancel := context.WithTimeout(ctx, HandshakeTimeout)
	defer cancel()
	tr, pinErr, err := tokenSafeTransport(p)
	if err != nil {
		return nil, hello, err
	}
	ws, resp, err := websocket.Dial(hctx, p.URL, &websocket.DialOptions{
		HTTPHeader: http.Header{"User-Agent": {"exechost/" + p.Version}},
		HTTPClient: bridge.BatchingClient(tr), // each result frame in one write
	})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		if perr := pinErr(); perr != nil {
			return nil, hello, perr
		}
		return nil, hello, hint.Wrap(fmt.Errorf("dial %s: %w", p.URL, err), "is the OpenClaw gateway running there? `openclaw gateway status`")
	}
	ws.SetReadLimit(bridge.MaxFrame)
	fail := func(err error) (*bridge.Conn, helloOK, error) {
		ws.CloseNow()
		return nil, hello, err
	}
	// 1. connect.challenge: the nonce and the gateway's clock, which the
	// signature must use (signedAt = ts).
	var ch challenge
	for {
		f, err := readRaw(hctx, ws)
		if err != nil {
			return fail(fmt.Errorf("waiting for connect.challenge from %s: %w", p.URL, err))
		}
		if f.Type == bridge.TypeEvent && f.Event == EventChallenge {
			if err := json.Unmarshal(f.Payload, &ch); err != nil {
				return fail(fmt.Errorf("bad connect.challenge: %w", err))
			}
			break
		}
	}
	var ts int64
	if ch.TS == nil || json.Unmarshal(*ch.TS, &ts) != nil || ts < 0 || strings.TrimSpace(ch.Nonce) == "" {
		return fail(errors.New("bad connect.challenge: nonce and a non-negative integer ts are required"))
	}
	platform, family := platformIdentity(p.GOOS)
	scopes := p.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	cp := connectParams{
		MinProtocol: ProtocolVersion, MaxProtocol: ProtocolVersion,
		Client: clientInfo{ID: p.ClientID, DisplayName: p.DisplayName, Version: p.Version, Platform: platform,
			DeviceFamily: family, Mode: p.ClientMode, InstanceID: p.InstanceID},
		Caps: p.Caps, Commands: p.Commands, PathEnv: p.PathEnv,
		Role: p.Role, Scopes: scopes,
	}
	if p.Token != "" {
		cp.Auth = &connectAuth{Token: p.Token}
	}
	id := p.Identity
	payload := authPayloadV3(id.DeviceID(), p.ClientID, p.ClientMode, p.Role, scopes, ts, p.Token, ch.Nonce, platform, family)
	cp.Device = &deviceProof{ID: id.DeviceID(), PublicKey: id.PublicKey(), Signature: id.Sign(payload), SignedAt: ts, Nonce: ch.Nonce}
	req, err := bridge.NewRequest("connect-1", MethodConnect, cp)
	if err != nil {
		return fail(err)
	}
	if err := bridge.WriteFrame(hctx, ws, req); err != nil {
		return fail(fmt.Errorf("connect to %s: %w", p.URL, err))
	}
	// 2. The connect response; events that race it (ticks, presence) are
	// skipped.
	for {
		f, err := readRaw(hctx, ws)
		if err != nil {
			return fail(fmt.Errorf("connect to %s: %w", p.URL, err))
		}
		if f.Type != bridge.TypeRes || f.ID != req.ID {
			continue
		}
		if f.OK == nil || !*f.OK {
			if f.Error == nil {
				return fail(fmt.Errorf("connect to %s: refused without an error", p.URL))
			}
			return fail(f.Error)
		}
		if err := json.Unmarshal(f.Payload, &hello); err != nil {
			return fail(fmt.Errorf("connect to %s: bad hello-ok: %w", p.URL, err))
		}
		break
	}
	if hello.Protocol != ProtocolVersion {
		return fail(hint.Wrap(fmt.Errorf("%w: gateway %s answered protocol %d, exechost speaks %d", ErrProtocolMismatch, p.URL, hello.Protocol, ProtocolVersion), fmt.Sprintf("use an OpenClaw release that speaks protocol v%d", ProtocolVersion)))
	}
	return bridge.NewConn(ws, opts), hello, nil
}

func readRaw(ctx context.Context, ws *websocket.Conn) (rawFrame, error) {
	var f rawFrame
	_, data, err := ws.Read(ctx)
	if err != nil {
		var ce websocket.CloseError
		if errors.As(err, &ce) {
			return f, fmt.Errorf("gateway closed the connection (%d %s)", ce.Code, ce.Reason)
		}
		return f, err
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return f, fmt.Errorf("%w: %v", bridge.ErrBadFrame, err)
	}
	return f, nil
}
