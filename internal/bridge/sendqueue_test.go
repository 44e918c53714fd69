package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// stalledPeer returns the server side of a loopback WebSocket whose client
// never reads: once the socket buffers fill, every write to it blocks.
func stalledPeer(t *testing.T) *Conn {
	t.Helper()
	got := make(chan *Conn, 1)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		got <- NewConn(ws, Options{NoPing: true})
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
