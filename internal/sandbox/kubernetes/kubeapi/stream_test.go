package kubeapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// channelServer speaks the exec/attach channel protocol as the API
// server does, offering protos: it echoes stdin to stdout, says "ready"
// on stderr, and at the end of stdin (v5's close message, or the
// connection's end on v4) reports status on the error channel and closes.
func channelServer(t *testing.T, protos []string, status string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"kind":"Status","status":"Failure","reason":"Forbidden","message":"pods \"p\" is forbidden: cannot create resource \"pods/attach\"","code":403}`)
			return
		}
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: protos})
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(1 << 24)
		ctx := r.Context()
		if c.Subprotocol() == "" {
			c.Close(websocket.StatusProtocolError, "no protocol")
			return
		}
		// The server opens each channel with an empty message.
		for _, ch := range []byte{chanStdout, chanStderr, chanError} {
			_ = c.Write(ctx, websocket.MessageBinary, []byte{ch})
		}
		_ = c.Write(ctx, websocket.MessageBinary, append([]byte{chanStderr}, "ready\n"...))
		for {
			_, msg, err := c.Read(ctx)
			if err != nil {
				return
			}
			switch {
			case msg[0] == chanStdin:
				_ = c.Write(ctx, websocket.MessageBinary, append([]byte{chanStdout}, msg[1:]...))
			case msg[0] == chanClose && len(msg) == 2 && msg[1] == chanStdin:
				_ = c.Write(ctx, websocket.MessageBinary, append([]byte{chanError}, status...))
				c.Close(websocket.StatusNormalClosure, "")
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// syncBuf is a buffer safe for the stream's reader and the test.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func waitDone(t *testing.T, s *Stream) {
	t.Helper()
	select {
	case <-s.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the stream did not end within 30 s")
	}
}

// TestStreamV5: stdin in, stdout and stderr out (a message larger than
// the WebSocket library's default read limit included), the end of
// stdin as v5's close message, and the server's Success status.
func TestStreamV5(t *testing.T) {
	srv := channelServer(t, []string{ProtocolV5, ProtocolV4}, `{"metadata":{},"status":"Success"}`)
	c, _ := New(&Config{Host: srv.URL, Token: "tok"})
	var out, errb syncBuf
	s, err := c.Stream(context.Background(), "/api/v1/namespaces/n/pods/p/attach", nil, StreamOptions{Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	if s.Protocol() != ProtocolV5 {
		t.Errorf("protocol = %q", s.Protocol())
	}
	big := strings.Repeat("x", 100<<10)
	for _, in := range []string{"hello ", big} {
		if _, err := s.Write([]byte(in)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, s)
	if err := s.Err(); err != nil {
		t.Errorf("Err = %v, want a normal end", err)
	}
	if out.String() != "hello "+big || errb.String() != "ready\n" {
		t.Errorf("stdout %d bytes (want %d), stderr %q", len(out.String()), len("hello "+big), errb.String())
	}
	if _, err := s.Write([]byte("late")); err == nil {
		t.Error("Write after CloseStdin succeeded")
	}
}

// TestStreamV4: a server without v5 is spoken to in v4; the end of stdin
// is the connection's end.
func TestStreamV4(t *testing.T) {
	srv := channelServer(t, []string{ProtocolV4}, "")
	c, _ := New(&Config{Host: srv.URL, Token: "tok"})
	var out syncBuf
	s, err := c.Stream(context.Background(), "/attach", nil, StreamOptions{Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if s.Protocol() != ProtocolV4 {
		t.Fatalf("protocol = %q", s.Protocol())
	}
	if _, err := s.Write([]byte("v4")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for out.String() != "v4" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if out.String() != "v4" {
		t.Fatalf("stdout = %q", out.String())
	}
	_ = s.CloseStdin()
	waitDone(t, s)
}

// TestStreamFailure: a failure status on the error channel is the
// stream's error; a refused upgrade is the server's Status.
func TestStreamFailure(t *testing.T) {
	srv := channelServer(t, []string{ProtocolV5}, `{"status":"Failure","reason":"InternalError","message":"container sandbox not found"}`)
	c, _ := New(&Config{Host: srv.URL, Token: "tok"})
	s, err := c.Stream(context.Background(), "/attach", nil, StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.CloseStdin()
	waitDone(t, s)
	var se *StatusError
	if err := s.Err(); !errors.As(err, &se) || !strings.Contains(err.Error(), "container sandbox not found") {
		t.Errorf("Err = %v, want the server's failure", err)
	}
	c2, _ := New(&Config{Host: srv.URL, Token: "wrong"})
	if _, err := c2.Stream(context.Background(), "/attach", nil, StreamOptions{}); !IsForbidden(err) || !strings.Contains(err.Error(), "pods/attach") {
		t.Errorf("refused upgrade: %v, want Forbidden naming pods/attach", err)
	}
}
