package bridge

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestFrameLen reads frame headers of every length encoding, masked and
// not, and incomplete ones.
func TestFrameLen(t *testing.T) {
	for _, tc := range []struct {
		hdr  []byte
		want int
	}{
		{[]byte{0x81}, 0},
		{[]byte{0x81, 5}, 2 + 5},
		{[]byte{0x81, 0x80 | 5}, 2 + 4 + 5},
		{[]byte{0x89, 0x80}, 2 + 4}, // a masked empty ping
		{[]byte{0x82, 126, 0x01}, 0},
		{[]byte{0x82, 126, 0x01, 0x00}, 4 + 256},
		{[]byte{0x82, 0x80 | 126, 0xff, 0xff}, 4 + 4 + 65535},
		{[]byte{0x82, 127, 0, 0, 0, 0, 0, 1, 0}, 0},
		{[]byte{0x82, 0x80 | 127, 0, 0, 0, 0, 0, 1, 0, 0}, 10 + 4 + 65536},
		{[]byte{0x82, 127, 0, 0, 0, 0, 0x10, 0, 0, 0}, -1}, // 256 MiB: never batched
	} {
		if got := frameLen(tc.hdr); got != tc.want {
			t.Errorf("frameLen(% x) = %d, want %d", tc.hdr, got, tc.want)
		}
	}
}

// countingConn counts the writes that reach the socket.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestBatchingClient sends messages of every size around the library's
// 4 KiB buffer and the frame length encodings through a real WebSocket
// client and server, with pings both ways while it does: every message
// arrives whole, each goes to the socket in one write, and no control
// frame waits behind anything.
func TestBatchingClient(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "ws", true: "wss"}[useTLS], func(t *testing.T) {
			got := make(chan []byte, 64)
			srvConn := make(chan *websocket.Conn, 1)
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ws, err := websocket.Accept(w, r, nil)
				if err != nil {
					return
				}
				ws.SetReadLimit(8 << 20)
				srvConn <- ws
				for {
					_, data, err := ws.Read(context.Background())
					if err != nil {
						return
					}
					got <- data
				}
			})
			var srv *httptest.Server
			if useTLS {
				srv = httptest.NewTLSServer(h)
			} else {
				srv = httptest.NewServer(h)
			}
			defer srv.Close()
			var writes atomic.Int64
			base := http.DefaultTransport.(*http.Transport).Clone()
			base.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
			base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return countingConn{c, &writes}, nil
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			url := "ws" + strings.TrimPrefix(srv.URL, "http")
			ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: BatchingClient(base)})
			if err != nil {
				t.Fatal(err)
			}
			defer ws.CloseNow()
			ws.SetReadLimit(8 << 20)
			server := <-srvConn
			// The client must answer the server's pings, and the server
			// its: read on both sides.
			go func() { _, _, _ = ws.Read(ctx) }()
			sizes := []int{0, 1, 125, 126, 127, 4084, 4085, 4090, 4096, 4100, 8192, 12280, 65535, 65536, 100_000, 1 << 20}
			send := func(n int, oneWrite bool) {
				t.Helper()
				msg := bytes.Repeat([]byte{'a' + byte(n%26)}, n)
				before := writes.Load()
				if err := ws.Write(ctx, websocket.MessageText, msg); err != nil {
					t.Fatalf("write %d bytes: %v", n, err)
				}
				if w := writes.Load() - before; oneWrite && w != 1 {
					t.Errorf("a %d-byte message took %d socket writes, want 1", n, w)
				}
				select {
				case data := <-got:
					if !bytes.Equal(data, msg) {
						t.Fatalf("a %d-byte message arrived as %d bytes", n, len(data))
					}
				case <-ctx.Done():
					t.Fatalf("a %d-byte message never arrived", n)
				}
				if err := ws.Ping(ctx); err != nil {
					t.Fatalf("client ping after %d bytes: %v", n, err)
				}
			}
			// Alone, each message is one write (under TLS each record is
			// a write of its own, so only delivery counts there).
			for _, n := range sizes {
				send(n, !useTLS)
			}
			// With the server pinging all along, the client's pongs go
			// out between its messages, and nothing waits.
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 50 && ctx.Err() == nil; i++ {
					if err := server.Ping(ctx); err != nil {
						t.Errorf("server ping %d: %v", i, err)
						return
					}
				}
			}()
			for _, n := range sizes {
				send(n, false)
			}
			wg.Wait()
		})
	}
}
