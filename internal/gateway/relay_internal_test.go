package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/testproc"
)

// wireRelay is a process on a port the client dials (a stale --gateway
// URL, a squatted default port) that forwards the real challenge, proof
// and answer between the client and the gateway, then tries to continue
// the session on its own: after the client's first call has been answered
// it sends the gateway its own request for a join key. With substitute it
// instead runs its own key exchange with each side, replacing both
// channel keys in the handshake.
type wireRelay struct {
	url        string
	substitute bool

	mu        sync.Mutex
	seen      [][]byte    // every message the gateway sent, as the relay saw it
	answer    chan []byte // the gateway's answer to the relay's own request
	injected  chan struct{}
	injectErr error
	upClosed  chan error // why the gateway's side ended
}

const relayReqID = "relay-1"

func newWireRelay(t *testing.T, gatewayURL string, substitute bool) *wireRelay {
	t.Helper()
	r := &wireRelay{substitute: substitute, answer: make(chan []byte, 1), injected: make(chan struct{}), upClosed: make(chan error, 1)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		down, err := websocket.Accept(w, req, nil)
		if err != nil {
			return
		}
		defer down.CloseNow()
		up, _, err := websocket.Dial(ctx, gatewayURL, nil)
		if err != nil {
			return
		}
		defer up.CloseNow()
		down.SetReadLimit(-1)
		up.SetReadLimit(-1)
		go r.toGateway(ctx, down, up)
		r.toClient(ctx, up, down)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { cancel(); _ = srv.Close() })
	r.url = "ws://" + ln.Addr().String()
	return r
}

// toClient forwards the gateway's messages, keeps the answer to its own
// request, and injects that request once the client's first call has been
// answered (the gateway's third message: challenge, connect answer, that
// answer).
func (r *wireRelay) toClient(ctx context.Context, up, down *websocket.Conn) {
	for n := 1; ; n++ {
		typ, data, err := up.Read(ctx)
		if err != nil {
			select {
			case r.upClosed <- err:
			default:
			}
			down.CloseNow()
			return
		}
		r.mu.Lock()
		r.seen = append(r.seen, data)
		r.mu.Unlock()
		if bytes.Contains(data, []byte(`"id":"`+relayReqID+`"`)) {
			r.answer <- data
			continue
		}
		if n == 1 && r.substitute {
			data = substituteKey(data, "payload")
		}
		if err := down.Write(ctx, typ, data); err != nil {
			return
		}
		if n == 3 {
			req := []byte(`{"type":"req","id":"` + relayReqID + `","method":"` + bridge.MethodJoinKey + `","params":{"ttlMs":600000}}`)
			r.injectErr = up.Write(ctx, websocket.MessageText, req)
			close(r.injected)
		}
	}
}

func (r *wireRelay) toGateway(ctx context.Context, down, up *websocket.Conn) {
	for n := 1; ; n++ {
		typ, data, err := down.Read(ctx)
		if err != nil {
			up.CloseNow()
			return
		}
		if n == 1 && r.substitute {
			data = substituteKey(data, "params")
		}
		if up.Write(ctx, typ, data) != nil {
			return
		}
	}
}

// substituteKey replaces the channel key in a handshake frame's params or
// payload with one of the relay's own.
func substituteKey(data []byte, field string) []byte {
	var f map[string]json.RawMessage
	var inner map[string]any
	if json.Unmarshal(data, &f) != nil || json.Unmarshal(f[field], &inner) != nil {
		return data
	}
	mine, err := bridge.NewChannelKey()
	if err != nil {
		return data
	}
	inner["channelKey"] = mine.Public
	f[field], _ = json.Marshal(inner)
	out, _ := json.Marshal(f)
	return out
}

func (r *wireRelay) sawGateway(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.seen {
		if bytes.Contains(m, []byte(s)) {
			return true
		}
	}
	return false
}

// relayGateway is a gateway on a loopback port; unbound accepts clients
// without the channel (the control).
func relayGateway(t *testing.T, unbound bool) (*Gateway, string) {
	t.Helper()
	g, err := New(Options{StateDir: t.TempDir(), unboundChannel: unbound})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return g, "ws://" + ln.Addr().String()
}

func (g *Gateway) joinKeyCount(t *testing.T) int {
	t.Helper()
	n := 0
	if err := g.reg.update(func(d *registryData) (bool, error) { n = len(d.JoinKeys); return false, nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// legacyDial is a client from before the channel: the same challenge
// proof, bound to nothing but the challenge, and then plain frames.
func legacyDial(ctx context.Context, url, token, gatewayKey string) (*bridge.Conn, error) {
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return nil, err
	}
	f, err := bridge.ReadFrame(ctx, ws)
	if err != nil {
		ws.CloseNow()
		return nil, err
	}
	var ch bridge.ConnectChallenge
	if err := bridge.Unmarshal(f.Payload, &ch); err != nil || ch.GatewayKey != gatewayKey {
		ws.CloseNow()
		return nil, errors.New("not the pinned gateway")
	}
	p := bridge.ConnectParams{Role: bridge.RoleOperator, ClientNonce: bridge.NewNonce(), Auth: bridge.Auth{Kind: bridge.AuthToken}}
	p.Auth.Proof = bridge.SecretProof(token, bridge.ClientAuthPayload(ch.GatewayKey, ch.Nonce, p.ClientNonce, "", p.Role, p.Auth.Kind, ""))
	req, err := bridge.NewRequest("connect", bridge.MethodConnect, p)
	if err == nil {
		err = bridge.WriteFrame(ctx, ws, req)
	}
	if err == nil {
		f, err = bridge.ReadFrame(ctx, ws)
	}
	if err != nil {
		ws.CloseNow()
		return nil, err
	}
	if !*f.OK {
		ws.CloseNow()
		return nil, f.Error
	}
	return bridge.NewConn(ws, bridge.Options{NoPing: true}), nil
}

// TestRelayCannotContinueTheSession runs the relay of issue 40 for real:
// an operator's client dials the relay's port, the relay forwards the
// handshake and the client's first call unchanged, then sends its own
// join-key request on the authenticated connection. On the sealed channel
// the gateway hangs up at the relay's first frame, the relay gets no
// answer and no key, and what it forwarded is unreadable to it (the
// client's own join key is nowhere in it). The control: the same relay
// against a gateway that accepts unbound clients, and a client of before
// the channel, obtains a join key and reads the client's.
func TestRelayCannotContinueTheSession(t *testing.T) {
	t.Run("sealed", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		g, url := relayGateway(t, false)
		relay := newWireRelay(t, url, false)
		c, _, err := bridge.Dial(ctx, relay.url, bridge.ConnectParams{Role: bridge.RoleOperator, Auth: bridge.Auth{Token: g.Token()}},
			nil, bridge.Options{GatewayKey: g.PublicKey(), NoPing: true})
		if err != nil {
			t.Fatalf("the client's own handshake through the relay: %v", err)
		}
		defer c.Close("test done")
		var own bridge.JoinKeyResult
		if err := c.Call(ctx, bridge.MethodJoinKey, bridge.JoinKeyParams{TTLMs: 600_000}, &own); err != nil {
			t.Fatalf("the client's own call through the relay: %v", err)
		}
		select {
		case <-relay.injected:
		case <-ctx.Done():
			t.Fatal("the relay never injected its request")
		}
		select {
		case <-c.Done():
		case a := <-relay.answer:
			t.Fatalf("the gateway answered the relay's request: %s", a)
		case <-ctx.Done():
			t.Fatal("the gateway kept the channel open after the relay's frame")
		}
		// The gateway refused the frame (1008); its reason went sealed
		// to the client, so the relay's close frame carries none.
		var ce websocket.CloseError
		if why := testproc.Recv(t, relay.upClosed, "the end of the gateway's side"); !errors.As(why, &ce) || ce.Code != websocket.StatusPolicyViolation || ce.Reason != "" {
			t.Errorf("the gateway closed for another reason, or told the relay why: %v", why)
		}
		if err := c.Err(); err == nil || !strings.Contains(err.Error(), "unsealed frame") {
			t.Errorf("the client learnt %v, want the gateway's sealed reason (an unsealed frame)", err)
		}
		select {
		case a := <-relay.answer:
			t.Fatalf("the gateway answered the relay's request: %s", a)
		default:
		}
		if n := g.joinKeyCount(t); n != 1 {
			t.Fatalf("%d join keys exist, want only the client's own", n)
		}
		if relay.sawGateway(own.Key) {
			t.Fatal("the relay read the client's join key off the channel")
		}
	})

	t.Run("control: unbound", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		g, url := relayGateway(t, true)
		relay := newWireRelay(t, url, false)
		c, err := legacyDial(ctx, relay.url, g.Token(), g.PublicKey())
		if err != nil {
			t.Fatalf("legacy client through the relay: %v", err)
		}
		defer c.Close("test done")
		var own bridge.JoinKeyResult
		if err := c.Call(ctx, bridge.MethodJoinKey, bridge.JoinKeyParams{TTLMs: 600_000}, &own); err != nil {
			t.Fatal(err)
		}
		var a []byte
		select {
		case a = <-relay.answer:
		case <-ctx.Done():
			t.Fatal("control: the relay got no answer; the test does not show the attack")
		}
		var res bridge.JoinKeyResult
		f, err := bridge.DecodeFrame(a)
		if err != nil || !*f.OK || bridge.Unmarshal(f.Payload, &res) != nil || res.Key == "" {
			t.Fatalf("control: the relay's request was not granted: %s", a)
		}
		if n := g.joinKeyCount(t); n != 2 {
			t.Fatalf("control: %d join keys, want the client's and the relay's", n)
		}
		if !relay.sawGateway(own.Key) {
			t.Fatal("control: the relay did not read the client's join key")
		}
	})
}

// TestRelaySubstitutedKeysRefused: a relay that runs its own exchange with
// each side (its channel key in the challenge the client sees, its own in
// the connect the gateway sees) would hold both channels; the client's
// proof covers the keys it saw, so the gateway refuses it.
func TestRelaySubstitutedKeysRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, url := relayGateway(t, false)
	relay := newWireRelay(t, url, true)
	_, _, err := bridge.Dial(ctx, relay.url, bridge.ConnectParams{Role: bridge.RoleOperator, Auth: bridge.Auth{Token: g.Token()}},
		nil, bridge.Options{GatewayKey: g.PublicKey(), NoPing: true})
	var be *bridge.Error
	if !errors.As(err, &be) || be.Code != bridge.CodeUnauthorized {
		t.Fatalf("a handshake with substituted channel keys: %v", err)
	}
	// The control: the same relay passing the keys through lets the
	// handshake succeed, so the refusal is the substitution's.
	plain := newWireRelay(t, url, false)
	c, _, err := bridge.Dial(ctx, plain.url, bridge.ConnectParams{Role: bridge.RoleOperator, Auth: bridge.Auth{Token: g.Token()}},
		nil, bridge.Options{GatewayKey: g.PublicKey(), NoPing: true})
	if err != nil {
		t.Fatalf("control: %v", err)
	}
	c.Close("test done")
}

// TestClientWithoutChannelRefused: a client of before the channel is
// refused with an error that says why and what to do.
func TestClientWithoutChannelRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, url := relayGateway(t, false)
	_, err := legacyDial(ctx, url, g.Token(), g.PublicKey())
	be := bridge.AsError(err)
	if err == nil || !strings.Contains(be.Message, "channelKey is missing") || !strings.Contains(be.Hint, "upgrade") {
		t.Fatalf("a client without the channel: %v", err)
	}
}
