package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// stalledPeer returns the server side of a loopback WebSocket whose client
// never reads: once the socket buffers fill, every write to it blocks.
func stalledPeer(t *testing.T) *Conn {
	t.Helper()
	return stalledPeerOptions(t, Options{NoPing: true})
}

// stalledPeerOptions is stalledPeer with the server Conn's options.
func stalledPeerOptions(t *testing.T, opts Options) *Conn {
	t.Helper()
	got := make(chan *Conn, 1)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		got <- NewConn(ws, opts)
	}))
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	select {
	case c := <-got:
		t.Cleanup(func() { c.Close("test done") })
		return c
	case <-ctx.Done():
		t.Fatal("server never accepted")
		return nil
	}
}

// TestSendQueueSlowPeer fans events out to a peer that never reads and to
// one that does: the reading peer gets every event, in order, while the
// other is stuck; Enqueue never blocks; and the stuck peer is dropped, with
// a reason, once its queue is full.
func TestSendQueueSlowPeer(t *testing.T) {
	slow := stalledPeer(t)
	type ev struct{ N int }
	got := make(chan int, 1)
	fastSrv, _ := pair(t, Options{}, Options{OnEvent: func(_ string, payload json.RawMessage) {
		var e struct{ N int }
		_ = json.Unmarshal(payload, &e)
		got <- e.N
	}})
	const depth = 4
	slowQ, fastQ := NewSendQueue(slow, depth), NewSendQueue(fastSrv, 0)
	big := strings.Repeat("x", 64<<10) // fills the stalled socket's buffers quickly

	deadline := time.After(60 * time.Second)
	var slowErr error
	sent := 0
	for n := 0; slowErr == nil; n++ {
		if n == 100000 {
			t.Fatal("the stalled peer was never dropped")
		}
		slowErr = slowQ.Enqueue("test.big", map[string]any{"N": n, "pad": big})
		if err := fastQ.Enqueue("test.seq", ev{N: n}); err != nil {
			t.Fatalf("enqueue to the reading peer: %v", err)
		}
		sent++
		// Pace the loop by the reading peer: each event is received
		// before the next is sent, so the stalled peer's queue fills
		// because its writes block, not because a burst outran a
		// healthy writer.
		select {
		case m := <-got:
			if m != n {
				t.Fatalf("reading peer got event %d, want %d (out of order or lost)", m, n)
			}
		case <-deadline:
			t.Fatalf("reading peer got %d of %d events while the other peer was stuck", n, sent)
		}
	}
	t.Logf("stalled peer dropped after %d events", sent)
	if !errors.Is(slowErr, ErrClosed) || !errors.Is(slowErr, ErrSlowPeer) || !strings.Contains(slowErr.Error(), "fell 4 events behind") {
		t.Errorf("full queue error = %v, want ErrClosed saying the peer fell behind", slowErr)
	}
	select {
	case <-slow.Done():
	case <-deadline:
		t.Fatal("the stalled peer's connection was not closed")
	}
	if err := slowQ.Enqueue("test.big", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("enqueue after drop = %v, want ErrClosed", err)
	}
}

// TestKeepaliveEndsStuckWrite writes to a peer that never reads until a
// write blocks on the full socket, and checks that the next keepalive probe
// then drops the connection and fails that write (conn.go, PingInterval):
// no write stays stuck, although no write carries a timer of its own. The
// test makes the probe due only once a write is blocked in the socket,
// which it sees in the goroutine dump, so nothing depends on timing; the
// deadline only bounds a hang.
func TestKeepaliveEndsStuckWrite(t *testing.T) {
	ticks := make(chan time.Time)
	c := stalledPeerOptions(t, Options{pingTicks: ticks, pingTimeout: 100 * time.Millisecond})
	big := strings.Repeat("x", 256<<10)
	writeErr := make(chan error, 1)
	go func() {
		for {
			if err := c.Notify(context.Background(), "test.big", big); err != nil {
				writeErr <- err
				return
			}
		}
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !writeBlocked() {
		if time.Now().After(deadline) {
			t.Fatal("no write blocked on the stalled peer within 60 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case ticks <- time.Now(): // a probe is due
	case err := <-writeErr:
		t.Fatalf("the write failed before any probe: %v", err)
	}
	select {
	case err := <-writeErr:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("stuck write failed with %v; want ErrClosed", err)
		}
		if cerr := c.Err(); cerr == nil || !strings.Contains(cerr.Error(), "keepalive") {
			t.Errorf("connection closed with %v; want the keepalive's reason", cerr)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the write was still stuck 60 s after a keepalive probe was due")
	}
}

// writeBlocked reports whether some goroutine waits in a socket write.
func writeBlocked() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "[IO wait") && strings.Contains(g, "net.(*conn).Write") {
			return true
		}
	}
	return false
}
