package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/exechost/exechost/internal/testproc"
)

// pair returns two connected Conns over a real loopback WebSocket.
func pair(t testing.TB, server Options, client Options) (srv, cli *Conn) {
	t.Helper()
	got := make(chan *Conn, 1)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		got <- NewConn(ws, server)
	}))
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cli = NewConn(ws, client)
	select {
	case srv = <-got:
	case <-ctx.Done():
		t.Fatal("server never accepted")
	}
	t.Cleanup(func() { cli.Close("test done"); srv.Close("test done") })
	return srv, cli
}

func TestCallCorrelation(t *testing.T) {
	echo := func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		switch method {
		case "echo":
			var n int
			if err := json.Unmarshal(params, &n); err != nil {
				return nil, Errorf(CodeInvalidRequest, "bad params: %v", err)
			}
			// Answer out of order: larger numbers first.
			time.Sleep(time.Duration(50-n) * time.Millisecond)
			return n * 2, nil
		case "fail":
			return nil, Errorf(CodeDenied, "SYSTEM_RUN_DENIED: allowlist miss")
		}
		return nil, Errorf(CodeNotFound, "unknown method %q", method)
	}
	_, cli := pair(t, Options{OnRequest: echo}, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got int
			if err := cli.Call(ctx, "echo", i, &got); err != nil {
				t.Errorf("Call(echo %d): %v", i, err)
				return
			}
			if got != i*2 {
				t.Errorf("Call(echo %d) = %d, want %d", i, got, i*2)
			}
		}()
	}
	testproc.WaitGroup(t, &wg, "the concurrent calls")

	err := cli.Call(ctx, "fail", nil, nil)
	var we *Error
	if !errors.As(err, &we) || we.Code != CodeDenied || we.Message != "SYSTEM_RUN_DENIED: allowlist miss" {
		t.Errorf("Call(fail) = %v, want CodeDenied error", err)
	}
	err = cli.Call(ctx, "nope", nil, nil)
	if !errors.As(err, &we) || we.Code != CodeNotFound {
		t.Errorf("Call(nope) = %v, want CodeNotFound", err)
	}
}

func TestDropFailsPendingCalls(t *testing.T) {
	entered := make(chan struct{})
	block := func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		close(entered)
		<-ctx.Done() // never answers while the connection lives
		return nil, ctx.Err()
	}
	srv, cli := pair(t, Options{OnRequest: block}, Options{})
	errc := make(chan error, 1)
	go func() { errc <- cli.Call(context.Background(), "block", nil, nil) }()
	testproc.Recv(t, entered, "the blocking handler's start")
	srv.Close("node went away")
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("pending call failed with %v, want ErrClosed", err)
		}
		if !strings.Contains(err.Error(), "node went away") {
			t.Errorf("error %q does not carry the close reason", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("pending call still waiting 30s after the peer closed")
	}
	if err := cli.Call(context.Background(), "block", nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("call after close = %v, want ErrClosed", err)
	}
}

func TestEvents(t *testing.T) {
	got := make(chan string, 1)
	srv, _ := pair(t, Options{}, Options{OnEvent: func(ev string, payload json.RawMessage) {
		got <- ev + " " + string(payload)
	}})
	if err := srv.Notify(context.Background(), "node.invoke.request", map[string]string{"id": "x"}); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != `node.invoke.request {"id":"x"}` {
			t.Errorf("event = %q", s)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("event never arrived")
	}
}

func TestBadFrameCloses(t *testing.T) {
	done := make(chan error, 1)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		c := NewConn(ws, Options{OnClose: func(err error) { done <- err }})
		<-c.Done()
	}))
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"type":"bogus"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "bad frame") {
			t.Errorf("close reason = %v", err)
		}
	case <-ctx.Done():
		t.Fatal("server kept a connection that sent a bad frame")
	}
}

// TestCancelledCallersKeepConnection checks that callers giving up at any
// moment, including mid-write, never drop the shared connection.
func TestCancelledCallersKeepConnection(t *testing.T) {
	slow := func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		return "ok", nil
	}
	_, cli := pair(t, Options{OnRequest: slow}, Options{})
	big := strings.Repeat("x", 1<<20) // long enough for a write to be in flight
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%5)*100*time.Microsecond)
			defer cancel()
			_ = cli.Call(ctx, "echo", big, nil)
		}()
	}
	testproc.WaitGroup(t, &wg, "the cancelled calls")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got string
	if err := cli.Call(ctx, "echo", 1, &got); err != nil || got != "ok" {
		t.Fatalf("connection did not survive cancelled callers: %v (%q)", err, got)
	}
}

// TestCallDecodesResultInOnePass checks Call's one-pass decoding of a
// response into its result against what the general path gives: a struct
// result, a payload that does not fit the result (the general path's
// error), a null or missing payload (the result untouched), and a failure.
func TestCallDecodesResultInOnePass(t *testing.T) {
	type result struct {
		Stdout string `json:"stdout"`
		Code   int    `json:"code"`
	}
	srv := Options{OnRequest: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		switch method {
		case "struct":
			return result{Stdout: strings.Repeat("out\n", 1000) + "\u2028<&>", Code: 7}, nil
		case "string":
			return "not an object", nil
		case "null":
			return json.RawMessage(`null`), nil
		case "none":
			return nil, nil
		}
		return nil, Errorf(CodeDenied, "denied")
	}}
	_, cli := pair(t, srv, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var got result
	if err := cli.Call(ctx, "struct", nil, &got); err != nil {
		t.Fatal(err)
	}
	if got.Code != 7 || got.Stdout != strings.Repeat("out\n", 1000)+"\u2028<&>" {
		t.Errorf("struct result = %d, %d bytes", got.Code, len(got.Stdout))
	}
	if err := cli.Call(ctx, "string", nil, &got); err == nil || !strings.Contains(err.Error(), "decode result") {
		t.Errorf("payload that does not fit = %v, want the decode error", err)
	}
	for _, m := range []string{"null", "none"} {
		keep := result{Stdout: "kept", Code: 1}
		if err := cli.Call(ctx, m, nil, &keep); err != nil || keep.Stdout != "kept" || keep.Code != 1 {
			t.Errorf("%s payload: %v, result %+v; want it untouched", m, err, keep)
		}
	}
	var e *Error
	if err := cli.Call(ctx, "fail", nil, &got); !errors.As(err, &e) || e.Code != CodeDenied {
		t.Errorf("failed call = %v", err)
	}
	var n int
	if err := cli.Call(ctx, "struct", nil, n); err == nil {
		t.Error("a non-pointer result was accepted")
	}
}

// TestInlineRequests: a request Options.Inline names is answered on the
// read loop, before the next frame is read, so an event sent right after
// it finds its work done; other requests still run concurrently.
func TestInlineRequests(t *testing.T) {
	var mu sync.Mutex
	var done []string
	seen := make(chan []string, 1)
	srv := Options{
		Inline: func(method string) bool { return method == "fast" },
		OnRequest: func(_ context.Context, method string, _ json.RawMessage) (any, error) {
			mu.Lock()
			done = append(done, method)
			mu.Unlock()
			return "ok", nil
		},
		OnEvent: func(string, json.RawMessage) {
			mu.Lock()
			seen <- append([]string(nil), done...)
			mu.Unlock()
		},
	}
	_, cli := pair(t, srv, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The request and the event go out back to back, the event not
	// waiting for the answer: only a request answered before the next
	// frame is read is always done when the event arrives.
	f, err := NewRequest("1", "fast", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.write(ctx, f); err != nil {
		t.Fatal(err)
	}
	if err := cli.Notify(ctx, "after", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-seen:
		if len(got) != 1 || got[0] != "fast" {
			t.Errorf("when the next frame was read, handled %v, want [fast]", got)
		}
	case <-ctx.Done():
		t.Fatal("the event never arrived")
	}
}

// TestLargeFramesIntact sends results of sizes around and far past the
// pooled read and write buffers, one after another on one connection, so a
// buffer reused from the pool never leaks an earlier frame's bytes into a
// later (shorter) one.
func TestLargeFramesIntact(t *testing.T) {
	echo := func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		var s string
		if err := json.Unmarshal(params, &s); err != nil {
			return nil, err
		}
		return s + "!", nil
	}
	_, cli := pair(t, Options{OnRequest: echo}, Options{})
	// Only against a hang: 3 MB each way under -race on a loaded 2-core
	// machine once took longer than 10 s.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, n := range []int{3 << 20, 100, 32 << 10, 300_000, 1, keepFrameBuf + 1, 7} {
		want := strings.Repeat(string(rune('a'+i)), n)
		var got string
		if err := cli.Call(ctx, "echo", want, &got); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if got != want+"!" {
			t.Fatalf("%d bytes: got %d bytes back, not the string sent", n, len(got))
		}
	}
}

// TestOversizedFrameRefused: a message past MaxFrame ends the connection
// with an error instead of being read whole.
func TestOversizedFrameRefused(t *testing.T) {
	srv, cli := pair(t, Options{}, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	big := strings.Repeat("x", MaxFrame+1)
	_ = cli.Notify(ctx, "big", big) // the write may fail once the reader hangs up
	select {
	case <-srv.Done():
	case <-ctx.Done():
		t.Fatal("server still open after an oversized frame")
	}
	if srv.Err() == nil {
		t.Fatal("server closed without an error")
	}
}
