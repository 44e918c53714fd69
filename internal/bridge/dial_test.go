package bridge

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/exechost/exechost/internal/testproc"
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

// fakeIdentity is a gateway key for fake gateways, and the channel key
// its challenges offer.
type fakeIdentity struct {
	priv ed25519.PrivateKey
	ck   *ChannelKey
}

func newFakeIdentity() fakeIdentity {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	ck, err := NewChannelKey()
	if err != nil {
		panic(err)
	}
	return fakeIdentity{priv, ck}
}

// transcript is the handshake's transcript as a gateway holding k sees it.
func (k fakeIdentity) transcript(nonce string, p ConnectParams) Transcript {
	return Transcript{GatewayKey: k.pub(), Nonce: nonce, ClientNonce: p.ClientNonce, GatewayChannelKey: k.ck.Public, ClientChannelKey: p.ChannelKey}
}

func (k fakeIdentity) pub() string {
	return base64.RawURLEncoding.EncodeToString(k.priv.Public().(ed25519.PublicKey))
}

func (k fakeIdentity) challenge(nonce string) Frame {
	return frame(NewEvent(EventConnectChallenge, ConnectChallenge{Nonce: nonce, GatewayKey: k.pub(), ChannelKey: k.ck.Public}, 0))
}

// accept answers connect request f as a gateway holding k would, its
// result signed by signer (k's own key, or an impostor's), and returns the
// channel (nil if the client's channel key is unusable).
func (k fakeIdentity) accept(ctx context.Context, ws *websocket.Conn, nonce string, f Frame, res ConnectResult, signer ed25519.PrivateKey) *Channel {
	var p ConnectParams
	_ = json.Unmarshal(f.Params, &p)
	t := k.transcript(nonce, p)
	res.GatewaySignature = base64.RawURLEncoding.EncodeToString(ed25519.Sign(signer, []byte(GatewayAuthPayload(k.pub(), nonce, p.ClientNonce, t.Binding(), p.Role, res.Status))))
	ch, err := k.ck.Channel(t, true)
	if err != nil {
		return nil
	}
	_ = ch.WriteFrame(ctx, ws, frame(NewResult(f.ID, res)))
	return ch
}

func TestHandshake(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer := testSigner{priv}
	gk := newFakeIdentity()
	t.Run("signs the challenge after skipping other frames", func(t *testing.T) {
		got := make(chan Frame, 1)
		url := fakeGateway(t, func(ctx context.Context, ws *websocket.Conn) {
			send(ctx, ws, frame(NewEvent("noise", nil, 0)))
			send(ctx, ws, gk.challenge("n0nce"))
			f, err := ReadFrame(ctx, ws)
			if err != nil {
				return
			}
			got <- f
			gk.accept(ctx, ws, "n0nce", f, ConnectResult{Role: RoleNode, Status: StatusPending}, gk.priv)
			_, _, _ = ws.Read(ctx)
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, res, err := Dial(ctx, url, ConnectParams{Role: RoleNode, Auth: Auth{Token: "ehn_t"}, Node: &NodeInfo{NodeID: "n1"}}, nil, Options{Device: signer})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close("done")
		if res.Status != StatusPending || res.GatewayKey != gk.pub() {
			t.Fatalf("result %+v", res)
		}
		f := testproc.Recv(t, got, "the server's view of the connect frame")
		if strings.Contains(string(f.Params), "ehn_t") {
			t.Fatalf("the token went on the wire: %s", f.Params)
		}
		var p ConnectParams
		_ = json.Unmarshal(f.Params, &p)
		d := p.Device
		if d == nil || d.Nonce != "n0nce" || d.ID != "dev" || d.PublicKey != signer.PublicKeyString() {
			t.Fatalf("device = %+v", d)
		}
		sig, _ := base64.RawURLEncoding.DecodeString(d.Signature)
		msg := DeviceAuthPayload("dev", "n1", RoleNode, d.SignedAt, gk.pub(), "n0nce", p.ClientNonce, gk.transcript("n0nce", p).Binding(), AuthToken, "")
		if !ed25519.Verify(priv.Public().(ed25519.PublicKey), []byte(msg), sig) {
			t.Fatalf("signature does not cover %q", msg)
		}
		sum := sha256.Sum256([]byte("ehn_t"))
		if p.Auth.Kind != AuthToken || !VerifySecretProof(hex.EncodeToString(sum[:]), msg, p.Auth.Proof) {
			t.Fatalf("auth = %+v: not a proof of the token over %q", p.Auth, msg)
		}
	})
	t.Run("a pinned key that differs sends nothing", func(t *testing.T) {
		got := make(chan []byte, 1)
		url := fakeGateway(t, func(ctx context.Context, ws *websocket.Conn) {
			send(ctx, ws, newFakeIdentity().challenge("n0nce"))
			_, data, _ := ws.Read(ctx)
			got <- data
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _, err := Dial(ctx, url, ConnectParams{Role: RoleOperator, Auth: Auth{Token: "ehg_secret"}}, nil, Options{GatewayKey: gk.pub()})
		if !errors.Is(err, ErrGatewayKey) {
			t.Fatalf("Dial to another key: %v", err)
		}
		if data := testproc.Recv(t, got, "what the server read"); len(data) != 0 {
			t.Fatalf("the client sent %q to a server with another key", data)
		}
	})
	t.Run("a server that shows the right key but cannot sign is refused", func(t *testing.T) {
		url := fakeGateway(t, func(ctx context.Context, ws *websocket.Conn) {
			send(ctx, ws, gk.challenge("n0nce"))
			f, err := ReadFrame(ctx, ws)
			if err != nil {
				return
			}
			gk.accept(ctx, ws, "n0nce", f, ConnectResult{Role: RoleNode, Status: StatusPaired}, newFakeIdentity().priv)
			_, _, _ = ws.Read(ctx)
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _, err := Dial(ctx, url, ConnectParams{Role: RoleNode, Node: &NodeInfo{NodeID: "n1"}}, nil, Options{Device: signer, GatewayKey: gk.pub()})
		if !errors.Is(err, ErrGatewayKey) {
			t.Fatalf("Dial to an impostor: %v", err)
		}
	})
	t.Run("a gateway without the channel gets nothing", func(t *testing.T) {
		got := make(chan []byte, 1)
		url := fakeGateway(t, func(ctx context.Context, ws *websocket.Conn) {
			send(ctx, ws, frame(NewEvent(EventConnectChallenge, ConnectChallenge{Nonce: "n0nce", GatewayKey: gk.pub()}, 0)))
			_, data, _ := ws.Read(ctx)
			got <- data
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _, err := Dial(ctx, url, ConnectParams{Role: RoleOperator, Auth: Auth{Token: "ehg_secret"}}, nil, Options{GatewayKey: gk.pub()})
		if !errors.Is(err, ErrChannel) || !strings.Contains(err.Error(), "older than this client") {
			t.Fatalf("Dial to a gateway without the channel: %v", err)
		}
		if data := testproc.Recv(t, got, "what the server read"); len(data) != 0 {
			t.Fatalf("the client sent %q to a gateway without the channel", data)
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
			send(ctx, ws, gk.challenge("x"))
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

// A gateway whose handshake slots are full answers the upgrade 503 with
// Retry-After; Dial reports that as the CodeBusy error it is (a caller
// may retry), with the gateway's reason, not as an absent gateway.
func TestDialBusyIsCodeBusy(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many connections from loopback are still authenticating (limit 16); retry shortly", http.StatusServiceUnavailable)
	}))
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err := Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http"), ConnectParams{Role: RoleOperator}, nil, Options{})
	var be *Error
	if !errors.As(err, &be) || be.Code != CodeBusy {
		t.Fatalf("dial a busy gateway: %v, want a %s error", err, CodeBusy)
	}
	if !strings.Contains(be.Message, "still authenticating") || be.Hint == "" {
		t.Errorf("busy error %q (hint %q): want the gateway's reason and a hint", be.Message, be.Hint)
	}
	// The control: another refusal is not busy.
	hs2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	t.Cleanup(hs2.Close)
	_, _, err = Dial(ctx, "ws"+strings.TrimPrefix(hs2.URL, "http"), ConnectParams{Role: RoleOperator}, nil, Options{})
	if errors.As(err, &be) && be.Code == CodeBusy {
		t.Fatalf("a 500 reads as busy: %v", err)
	}
}
