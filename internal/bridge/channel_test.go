package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// wsMsg is one WebSocket message as a relay sees it.
type wsMsg struct {
	typ  websocket.MessageType
	data []byte
}

// relayed is a server Conn and a client Conn joined through a relay that
// passes the client's messages through mutate (which returns what to
// forward in their place) and records the server's.
type relayed struct {
	srv, cli *Conn
	mu       sync.Mutex
	events   []string // payloads of the events the server received
	toClient []wsMsg  // what the relay saw the server send
	// down, when set, replaces the server's messages as mutate does the
	// client's; clientEvents are the payloads of the events the client
	// received.
	down         func(i int, m wsMsg) []wsMsg
	clientEvents []string
}

func (r *relayed) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// channelPair derives both ends' channels of one handshake, as the
// gateway and Handshake do.
func channelPair(t testing.TB) (gw, cl *Channel) {
	t.Helper()
	gk, err := NewChannelKey()
	if err != nil {
		t.Fatal(err)
	}
	ck, err := NewChannelKey()
	if err != nil {
		t.Fatal(err)
	}
	tr := Transcript{GatewayKey: "gk", Nonce: NewNonce(), ClientNonce: NewNonce(), GatewayChannelKey: gk.Public, ClientChannelKey: ck.Public}
	if gw, err = gk.Channel(tr, true); err != nil {
		t.Fatal(err)
	}
	if cl, err = ck.Channel(tr, false); err != nil {
		t.Fatal(err)
	}
	return gw, cl
}

// relayPair joins a server and a client Conn through a relay goroutine,
// sealed or not.
func relayPair(t *testing.T, sealed bool, mutate func(i int, m wsMsg) []wsMsg) *relayed {
	return relayPairBoth(t, sealed, mutate, nil)
}

// relayPairBoth is relayPair with the server's messages passed through
// down (nil forwards them).
func relayPairBoth(t *testing.T, sealed bool, mutate, down func(i int, m wsMsg) []wsMsg) *relayed {
	t.Helper()
	r := &relayed{down: down}
	if r.down == nil {
		r.down = func(_ int, m wsMsg) []wsMsg { return []wsMsg{m} }
	}
	var gwCh, clCh *Channel
	if sealed {
		gwCh, clCh = channelPair(t)
	}
	got := make(chan *Conn, 1)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ws, err := websocket.Accept(w, req, nil)
		if err != nil {
			return
		}
		got <- NewConn(ws, Options{NoPing: true, Channel: gwCh, OnEvent: func(event string, payload json.RawMessage) {
			var s string
			_ = json.Unmarshal(payload, &s)
			r.mu.Lock()
			r.events = append(r.events, s)
			r.mu.Unlock()
		}})
	}))
	t.Cleanup(server.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		down, err := websocket.Accept(w, req, nil)
		if err != nil {
			return
		}
		defer down.CloseNow()
		up, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(server.URL, "http"), nil)
		if err != nil {
			return
		}
		defer up.CloseNow()
		down.SetReadLimit(-1)
		up.SetReadLimit(-1)
		go func() {
			for i := 0; ; i++ {
				typ, data, err := up.Read(ctx)
				if err != nil {
					down.CloseNow()
					return
				}
				r.mu.Lock()
				r.toClient = append(r.toClient, wsMsg{typ, data})
				r.mu.Unlock()
				for _, m := range r.down(i, wsMsg{typ, data}) {
					if down.Write(ctx, m.typ, m.data) != nil {
						return
					}
				}
			}
		}()
		for i := 0; ; i++ {
			typ, data, err := down.Read(ctx)
			if err != nil {
				return
			}
			for _, m := range mutate(i, wsMsg{typ, data}) {
				if up.Write(ctx, m.typ, m.data) != nil {
					return
				}
			}
		}
	}))
	t.Cleanup(relay.Close)
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(relay.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.cli = NewConn(ws, Options{NoPing: true, Channel: clCh, OnEvent: func(event string, payload json.RawMessage) {
		r.mu.Lock()
		r.clientEvents = append(r.clientEvents, event)
		r.mu.Unlock()
	}})
	select {
	case r.srv = <-got:
	case <-ctx.Done():
		t.Fatal("server never accepted")
	}
	t.Cleanup(func() { r.cli.Close("test done"); r.srv.Close("test done") })
	return r
}

// TestChannelRefusesAlteredFrames runs a relay that alters the client's
// frames — tampers with one, replays, reorders, drops, injects its own —
// against a sealed channel, which must close on the first altered frame
// having delivered nothing of it, and against a plain one (the control),
// where each attack goes through unnoticed.
func TestChannelRefusesAlteredFrames(t *testing.T) {
	var held wsMsg
	cases := []struct {
		name   string
		mutate func(i int, m wsMsg) []wsMsg
		plain  []string // what a plain server receives
	}{
		{"tampered", func(i int, m wsMsg) []wsMsg {
			if i == 1 {
				m.data = bytes.Clone(m.data)
				if j := bytes.Index(m.data, []byte(`"a1"`)); j >= 0 {
					m.data[j+1] = 'z' // plain: a well-formed change of meaning
				} else {
					m.data[len(m.data)/2] ^= 1
				}
			}
			return []wsMsg{m}
		}, []string{"a0", "z1", "a2"}},
		{"replayed", func(i int, m wsMsg) []wsMsg {
			if i == 0 {
				return []wsMsg{m, m}
			}
			return []wsMsg{m}
		}, []string{"a0", "a0", "a1", "a2"}},
		{"reordered", func(i int, m wsMsg) []wsMsg {
			switch i {
			case 0:
				held = m
				return nil
			case 1:
				return []wsMsg{m, held}
			}
			return []wsMsg{m}
		}, []string{"a1", "a0", "a2"}},
		{"dropped", func(i int, m wsMsg) []wsMsg {
			if i == 0 {
				return nil
			}
			return []wsMsg{m}
		}, []string{"a1", "a2"}},
		{"injected", func(i int, m wsMsg) []wsMsg {
			if i == 0 {
				return []wsMsg{{websocket.MessageText, []byte(`{"type":"event","payload":"evil","event":"e","seq":9}`)}, m}
			}
			return []wsMsg{m}
		}, []string{"evil", "a0", "a1", "a2"}},
		{"injected sealed-looking", func(i int, m wsMsg) []wsMsg {
			if i == 0 {
				return []wsMsg{{websocket.MessageBinary, bytes.Repeat([]byte{7}, 64)}, m}
			}
			return []wsMsg{m}
		}, nil}, // a plain server hangs up on binary garbage too
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, sealed := range []bool{true, false} {
				if !sealed && tc.plain == nil {
					continue
				}
				r := relayPair(t, sealed, tc.mutate)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				for _, s := range []string{"a0", "a1", "a2"} {
					_ = r.cli.Notify(ctx, "e", s)
				}
				if sealed {
					select {
					case <-r.srv.Done():
					case <-ctx.Done():
						t.Fatalf("sealed: the server kept the channel open after a %s frame (got %q)", tc.name, r.got())
					}
					if !errors.Is(r.srv.Err(), ErrChannel) {
						t.Fatalf("sealed: closed with %v, not a channel error", r.srv.Err())
					}
					for _, e := range r.got() {
						if e != "a0" {
							t.Fatalf("sealed: the server delivered %q (all: %q)", e, r.got())
						}
					}
				} else {
					// The control: the same relay on a plain channel.
					for len(r.got()) < len(tc.plain) && ctx.Err() == nil {
						time.Sleep(5 * time.Millisecond)
					}
					if got := r.got(); !slices.Equal(got, tc.plain) {
						t.Fatalf("plain control: the server received %q, want %q", got, tc.plain)
					}
				}
				cancel()
			}
		})
	}
}

// TestChannelConfidential: what a relay sees of a sealed channel is
// binary noise, not the frames (the control: on a plain channel it reads
// them).
func TestChannelConfidential(t *testing.T) {
	for _, sealed := range []bool{true, false} {
		r := relayPair(t, sealed, func(_ int, m wsMsg) []wsMsg { return []wsMsg{m} })
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := r.srv.Notify(ctx, "token", "ehn_secret_value"); err != nil {
			t.Fatal(err)
		}
		// A round trip the other way orders the relay's record.
		_ = r.cli.Notify(ctx, "e", "a0")
		for len(r.got()) < 1 && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		r.mu.Lock()
		seen := slices.Clone(r.toClient)
		r.mu.Unlock()
		leaked := false
		for _, m := range seen {
			leaked = leaked || bytes.Contains(m.data, []byte("ehn_secret_value"))
			if sealed && m.typ != websocket.MessageBinary {
				t.Errorf("sealed: a %v message on the wire", m.typ)
			}
		}
		if len(seen) == 0 {
			t.Fatal("the relay saw nothing")
		}
		if leaked == sealed {
			t.Fatalf("sealed=%v: the relay read the payload: %v", sealed, leaked)
		}
	}
}

// TestChannelWrongKeys: an end whose keys come from another handshake (a
// relay that ran its own exchange with each side) opens nothing.
func TestChannelWrongKeys(t *testing.T) {
	gw, _ := channelPair(t)
	_, cl := channelPair(t)
	bp := []byte(`{"type":"event","payload":"x","event":"e","seq":1}`)
	sealed := cl.seal.Seal(nil, seqNonce(0), bp, nil)
	if _, err := gw.openSealed(sealed); !errors.Is(err, ErrChannel) {
		t.Fatalf("a frame sealed under another handshake's keys opened: %v", err)
	}
	gw2, cl2 := channelPair(t)
	if out, err := gw2.openSealed(cl2.seal.Seal(nil, seqNonce(0), bp, nil)); err != nil || !bytes.Equal(out, bp) {
		t.Fatalf("control: the matching end did not open the frame: %v", err)
	}
}

// TestChannelRefusesInjectionTowardNode: the other direction, as a node
// sees it: a relay between the gateway and a node slips a
// node.invoke.request of its own in front of the gateway's next frame. The
// sealed node end closes without delivering it; the plain control hands
// it to the node's handler.
func TestChannelRefusesInjectionTowardNode(t *testing.T) {
	invoke := []byte(`{"type":"event","payload":{"id":"evil","nodeId":"n","command":"system.run","params":{"command":["/usr/bin/touch","/tmp/x"]}},"event":"` + EventInvokeRequest + `","seq":1}`)
	inject := func(i int, m wsMsg) []wsMsg {
		if i == 0 {
			return []wsMsg{{websocket.MessageText, invoke}, m}
		}
		return []wsMsg{m}
	}
	pass := func(_ int, m wsMsg) []wsMsg { return []wsMsg{m} }
	for _, sealed := range []bool{true, false} {
		r := relayPairBoth(t, sealed, pass, inject)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := r.srv.Notify(ctx, "gateway-event", "x"); err != nil {
			t.Fatal(err)
		}
		got := func() []string {
			r.mu.Lock()
			defer r.mu.Unlock()
			return slices.Clone(r.clientEvents)
		}
		if sealed {
			select {
			case <-r.cli.Done():
			case <-ctx.Done():
				t.Fatalf("sealed: the node end kept the channel open after an injected frame (got %q)", got())
			}
			if !errors.Is(r.cli.Err(), ErrChannel) || len(got()) != 0 {
				t.Fatalf("sealed: closed with %v, delivered %q", r.cli.Err(), got())
			}
		} else {
			for len(got()) < 2 && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			if g := got(); !slices.Equal(g, []string{EventInvokeRequest, "gateway-event"}) {
				t.Fatalf("plain control: the node end received %q", g)
			}
		}
		cancel()
	}
}
