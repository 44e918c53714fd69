package bridge

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// MaxChallengeFrames bounds how many frames a client skips while it waits
// for the connect challenge, so a misbehaving server cannot keep it
// reading forever (the context deadline bounds the time).
const MaxChallengeFrames = 8

// Dial connects to a gateway, performs the connect handshake with p and
// returns the established connection. A refused handshake returns the
// gateway's *Error (CodeUnauthorized for bad credentials). For role node,
// opts.Device signs the gateway's challenge.
func Dial(ctx context.Context, url string, p ConnectParams, dopts *websocket.DialOptions, opts Options) (*Conn, ConnectResult, error) {
	ws, resp, err := websocket.Dial(ctx, url, dopts)
	if err != nil {
		if why := UpgradeRefusal(resp); why != "" {
			return nil, ConnectResult{}, fmt.Errorf("dial %s: the gateway refused the connection: %s", url, why)
		}
		return nil, ConnectResult{}, fmt.Errorf("dial %s: %w (hint: is `exechost gateway` running there? --gateway sets the URL)", url, err)
	}
	res, err := Handshake(ctx, ws, p, opts.Device)
	if err != nil {
		ws.CloseNow()
		if _, ok := err.(*Error); ok {
			return nil, res, err
		}
		return nil, res, fmt.Errorf("connect to %s: %w", url, err)
	}
	return NewConn(ws, opts), res, nil
}

// Handshake runs the client side of the connect handshake on an open
// WebSocket: it waits for the gateway's connect.challenge, sends the
// connect request — with dev's signature over DeviceAuthPayload when dev
// is set — and reads the response. A refusal is returned as the gateway's
// *Error. The caller closes ws on error.
func Handshake(ctx context.Context, ws *websocket.Conn, p ConnectParams, dev DeviceSigner) (ConnectResult, error) {
	var res ConnectResult
	var ch ConnectChallenge
	for i := 0; ; i++ {
		if i == MaxChallengeFrames {
			return res, fmt.Errorf("%w: no %s event in the first %d frames", ErrBadFrame, EventConnectChallenge, MaxChallengeFrames)
		}
		f, err := ReadFrame(ctx, ws)
		if err != nil {
			return res, fmt.Errorf("wait for the connect challenge: %w", err)
		}
		if f.Type == TypeRes && f.OK != nil && !*f.OK && f.Error != nil {
			return res, f.Error // refused before the handshake (e.g. busy)
		}
		if f.Type != TypeEvent || f.Event != EventConnectChallenge {
			continue
		}
		if err := Unmarshal(f.Payload, &ch); err != nil || ch.Nonce == "" {
			return res, fmt.Errorf("%w: bad connect challenge", ErrBadFrame)
		}
		break
	}
	if dev != nil {
		nodeID := ""
		if p.Node != nil {
			nodeID = p.Node.NodeID
		}
		at := time.Now().UnixMilli()
		p.Device = &DeviceAuth{
			ID: dev.DeviceID(), PublicKey: dev.PublicKeyString(), SignedAt: at, Nonce: ch.Nonce,
			Signature: dev.Sign([]byte(DeviceAuthPayload(dev.DeviceID(), nodeID, p.Role, at, p.Auth.Credential(), ch.Nonce))),
		}
	}
	f, err := NewRequest("connect", MethodConnect, p)
	if err != nil {
		return res, err
	}
	wctx, cancel := context.WithTimeout(ctx, WriteTimeout)
	err = WriteFrame(wctx, ws, f)
	cancel()
	if err != nil {
		return res, err
	}
	r, err := ReadFrame(ctx, ws)
	if err != nil {
		return res, err
	}
	if r.Type != TypeRes || r.OK == nil {
		return res, fmt.Errorf("%w: expected a response, got %s", ErrBadFrame, r.Type)
	}
	if !*r.OK {
		if r.Error == nil {
			return res, fmt.Errorf("%w: failed response without an error", ErrBadFrame)
		}
		return res, r.Error
	}
	if err := Unmarshal(r.Payload, &res); err != nil {
		return res, fmt.Errorf("bad connect result: %w", err)
	}
	return res, nil
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
	why := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, string(b))
	if why = strings.TrimSpace(why); why == "" {
		why = resp.Status
	}
	return why
}
