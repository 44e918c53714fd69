package bridge

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// testSigner is a DeviceSigner over a raw Ed25519 key (the bridge does
// not import nodekey; the gateway's tests cover the real key).
type testSigner struct{ priv ed25519.PrivateKey }

func (s testSigner) DeviceID() string { return "dev" }
func (s testSigner) PublicKeyString() string {
	return base64.RawURLEncoding.EncodeToString(s.priv.Public().(ed25519.PublicKey))
}
func (s testSigner) Sign(msg []byte) string {
	return base64.RawURLEncoding.EncodeToString(ed25519.Sign(s.priv, msg))
}

// fakeGateway runs script on each accepted WebSocket.
func fakeGateway(t *testing.T, script func(ctx context.Context, ws *websocket.Conn)) string {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		script(ctx, ws)
	}))
	t.Cleanup(hs.Close)
	return "ws" + strings.TrimPrefix(hs.URL, "http")
}

func frame(f Frame, err error) Frame {
	if err != nil {
		panic(err)
	}
	return f
}

func send(ctx context.Context, ws *websocket.Conn, f Frame) { _ = WriteFrame(ctx, ws, f) }

func TestHandshake(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer := testSigner{priv}
	t.Run("signs the challenge after skipping other frames", func(t *testing.T) {
		got := make(chan ConnectParams, 1)
		url := fakeGateway(t, func(ctx context.Context, ws *websocket.Conn) {
			send(ctx, ws, frame(NewEvent("noise", nil, 0)))
			send(ctx, ws, frame(NewEvent(EventConnectChallenge, ConnectChallenge{Nonce: "n0nce"}, 0)))
			f, err := ReadFrame(ctx, ws)
			if err != nil {
				return
			}
			var p ConnectParams
			_ = json.Unmarshal(f.Params, &p)
			got <- p
			send(ctx, ws, frame(NewResult(f.ID, ConnectResult{Role: RoleNode, Status: StatusPending})))
			_, _, _ = ws.Read(ctx)
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, res, err := Dial(ctx, url, ConnectParams{Role: RoleNode, Auth: Auth{Token: "ehn_t"}, Node: &NodeInfo{NodeID: "n1"}}, nil, Options{Device: signer})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close("done")
		if res.Status != StatusPending {
			t.Fatalf("result %+v", res)
		}
		p := <-got
		d := p.Device
		if d == nil || d.Nonce != "n0nce" || d.ID != "dev" || d.PublicKey != signer.PublicKeyString() {
			t.Fatalf("device = %+v", d)
		}
		sig, _ := base64.RawURLEncoding.DecodeString(d.Signature)
		msg := DeviceAuthPayload("dev", "n1", RoleNode, d.SignedAt, "ehn_t", "n0nce")
		if !ed25519.Verify(priv.Public().(ed25519.PublicKey), []byte(msg), sig) {
			t.Fatalf("signature does not cover %q", msg)
		}
	})
	t.Run("no challenge", func(t *testing.T) {
		url := fakeGateway(t, func(ctx context.Context, ws *websocket.Conn) {
			for range MaxChallengeFrames + 1 {
				send(ctx, ws, frame(NewEvent("noise", nil, 0)))
			}
			_, _, _ = ws.Read(ctx)
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _, err := Dial(ctx, url, ConnectParams{Role: RoleAgent}, nil, Options{})
		if !errors.Is(err, ErrBadFrame) {
			t.Fatalf("Dial without a challenge: %v", err)
		}
	})
	t.Run("refusal is the gateway's error", func(t *testing.T) {
		url := fakeGateway(t, func(ctx context.Context, ws *websocket.Conn) {
			send(ctx, ws, frame(NewEvent(EventConnectChallenge, ConnectChallenge{Nonce: "x"}, 0)))
			f, err := ReadFrame(ctx, ws)
			if err != nil {
				return
			}
			_ = WriteFrame(ctx, ws, NewFailure(f.ID, Errorf(CodeUnauthorized, "no")))
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _, err := Dial(ctx, url, ConnectParams{Role: RoleAgent}, nil, Options{})
		var be *Error
		if !errors.As(err, &be) || be.Code != CodeUnauthorized {
			t.Fatalf("refused Dial: %v", err)
		}
	})
}
