package gateway_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/gateway"
	"github.com/exechost/exechost/internal/metrics"
	"github.com/exechost/exechost/internal/nodekey"
)

// rawDial opens a WebSocket to the gateway from local address from ("" for
// any) and reads the challenge.
func rawDial(t *testing.T, url, from string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var opts *websocket.DialOptions
	if from != "" {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		opts = &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}}
	}
	ws, resp, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		return nil, resp, err
	}
	t.Cleanup(func() { ws.CloseNow() })
	if f, err := bridge.ReadFrame(ctx, ws); err != nil || f.Event != bridge.EventConnectChallenge {
		t.Fatalf("first frame %+v, %v", f, err)
	}
	return ws, resp, nil
}

// TestConnectFrameLimit: before it has authenticated a peer may send
// only a small connect frame; a big one closes the connection without
// being buffered and decoded (150 of them at the 4 MiB limit used to
// take a gigabyte).
func TestConnectFrameLimit(t *testing.T) {
	e := newEnv(t, fullConfig)
	ws, _, err := rawDial(t, e.url, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	big := `{"type":"req","id":"c","method":"connect","params":{"role":"agent","client":{"name":"` + strings.Repeat("x", 2*gateway.MaxConnectFrame) + `"}}}`
	_ = ws.Write(ctx, websocket.MessageText, []byte(big))
	// The gateway may answer with a refusal before the close.
	for range 3 {
		if _, _, err = ws.Read(ctx); err != nil {
			break
		}
	}
	if websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Fatalf("after a %d-byte connect frame: %v, want close %v", len(big), err, websocket.StatusMessageTooBig)
	}
	// An authenticated connection still takes big frames.
	c := e.client(t, bridge.RoleAgent)
	var res bridge.ExecResult
	if err := c.Call(ctx, bridge.MethodExec, bridge.ExecParams{Command: "echo " + strings.Repeat("y", 64<<10) + " >/dev/null", Host: "gateway"}, &res); err != nil {
		t.Fatalf("a 64 KiB exec once authenticated: %v", err)
	}
}

// TestHandshakeLimitPerSource: one source cannot hold more than
// MaxHandshakesPerSource connections in their handshake; the next is
// refused 503 before the upgrade, and every loopback address is the same
// source.
func TestHandshakeLimitPerSource(t *testing.T) {
	m := metrics.New()
	e := newEnv(t, fullConfig, func(o *gateway.Options) { o.Metrics = m })
	for i := range gateway.MaxHandshakesPerSource {
		from := "127.0.0." + string(rune('1'+i%8))
		if _, _, err := rawDial(t, e.url, from); err != nil {
			t.Fatalf("handshake #%d from %s: %v", i, from, err)
		}
	}
	for range 3 {
		_, resp, err := rawDial(t, e.url, "127.0.0.9")
		if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("one handshake too many: %v %v, want 503", resp, err)
		}
	}
	// Counted every time (and recorded once per source and minute).
	busy := m.DecisionsCounted(audit.ActionClientConnect, audit.ReasonBusy)
	if busy != 3 {
		t.Errorf("counted %v refused handshakes, want 3", busy)
	}
}

// TestPendingPerSourceLoopback: several 127.0.0.x addresses are one
// source for pending pairing slots.
func TestPendingPerSourceLoopback(t *testing.T) {
	e := newEnv(t, fullConfig)
	dial := func(i int) error {
		k, _ := nodekey.Generate()
		from := "127.0.0." + string(rune('2'+i))
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, _, err := bridge.Dial(ctx, e.url, bridge.ConnectParams{Role: bridge.RoleNode, Node: &bridge.NodeInfo{NodeID: k.DeviceID(), DisplayName: "n" + from}},
			&websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}}, bridge.Options{Device: k})
		if err == nil {
			t.Cleanup(func() { c.Close("done") })
		}
		return err
	}
	op := e.client(t, bridge.RoleOperator)
	for i := range gateway.MaxPendingPerAddr {
		if err := dial(i); err != nil {
			t.Fatalf("pending #%d: %v", i, err)
		}
		waitPending(t, op, i+1)
	}
	wantConnCode(t, "one pending too many from another loopback address", dial(gateway.MaxPendingPerAddr), bridge.CodeBusy)
}
