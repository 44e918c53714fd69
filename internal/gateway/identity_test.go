package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/gateway"
	"github.com/exechost/exechost/internal/nodekey"
	"github.com/exechost/exechost/internal/testproc"
)

// dialNode connects as role node with key signing the challenge.
func dialNode(t *testing.T, url, nodeID string, auth bridge.Auth, key bridge.DeviceSigner) (*bridge.Conn, bridge.ConnectResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, res, err := bridge.Dial(ctx, url, bridge.ConnectParams{Role: bridge.RoleNode, Auth: auth,
		Node: &bridge.NodeInfo{NodeID: nodeID, DisplayName: "probe " + nodeID}}, nil, bridge.Options{Device: key})
	if err == nil {
		t.Cleanup(func() { c.Close("test done") })
	}
	return c, res, err
}

// waitPending polls nodes.pending (with a deadline) until it lists n
// entries (a hung-up node leaves the list once its close is read).
func waitPending(t *testing.T, op *bridge.Conn, n int) []bridge.NodeView {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := call[bridge.NodesResult](t, op, bridge.MethodNodesPending, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Nodes) == n {
			return res.Nodes
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending = %+v, want %d entries", res.Nodes, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func wantConnCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	var be *bridge.Error
	if !errors.As(err, &be) || be.Code != code {
		t.Fatalf("%s: %v, want code %s", what, err, code)
	}
}

// forgedSigner signs with one key while claiming another's public key, or
// signs a payload other than the canonical one.
type forgedSigner struct {
	claim, sign *nodekey.Key
	mangle      func(string) string
}

func (f forgedSigner) DeviceID() string        { return f.claim.DeviceID() }
func (f forgedSigner) PublicKeyString() string { return f.claim.PublicKeyString() }
func (f forgedSigner) Sign(msg []byte) string {
	m := string(msg)
	if f.mangle != nil {
		m = f.mangle(m)
	}
	return f.sign.Sign([]byte(m))
}

func TestNodeKeyProof(t *testing.T) {
	e := newEnv(t, fullConfig)
	a, _ := nodekey.Generate()
	b, _ := nodekey.Generate()
	cases := []struct {
		name string
		id   string
		key  bridge.DeviceSigner
	}{
		{"no key at all", a.DeviceID(), nil},
		{"signed by another key", a.DeviceID(), forgedSigner{claim: a, sign: b}},
		{"signature over another nonce (replay)", a.DeviceID(), forgedSigner{claim: a, sign: a, mangle: func(m string) string {
			i := strings.LastIndex(m, "|")
			return m[:i+1] + strings.Repeat("0", 64)
		}}},
		{"signature for another node id", a.DeviceID(), forgedSigner{claim: a, sign: a, mangle: func(m string) string {
			return strings.Replace(m, "|"+a.DeviceID()+"|node|", "|other|node|", 1)
		}}},
		{"new node whose id is not its key's", "my-chosen-id", a},
		{"new node claiming another key's id", b.DeviceID(), a},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := dialNode(t, e.url, tt.id, bridge.Auth{}, tt.key)
			wantConnCode(t, "connect", err, bridge.CodeUnauthorized)
		})
	}
	op := e.client(t, bridge.RoleOperator)
	waitPending(t, op, 0)
	// The genuine key pends, and shows its fingerprint.
	if _, res, err := dialNode(t, e.url, a.DeviceID(), bridge.Auth{}, a); err != nil || res.Status != bridge.StatusPending {
		t.Fatalf("genuine node: %+v, %v", res, err)
	}
	p := waitPending(t, op, 1)
	if p[0].Fingerprint != a.Fingerprint() || p[0].NodeID != a.DeviceID() {
		t.Fatalf("pending = %+v, want %s with fingerprint %s", p, a.DeviceID(), a.Fingerprint())
	}
}

// TestPendingPerAddress: one remote address cannot fill every pending
// slot; the same node reconnecting keeps its slot.
func TestPendingPerAddress(t *testing.T) {
	e := newEnv(t, fullConfig)
	op := e.client(t, bridge.RoleOperator)
	var keys []*nodekey.Key
	for i := range gateway.MaxPendingPerAddr {
		k, _ := nodekey.Generate()
		keys = append(keys, k)
		if _, res, err := dialNode(t, e.url, k.DeviceID(), bridge.Auth{}, k); err != nil || res.Status != bridge.StatusPending {
			t.Fatalf("pending #%d: %+v, %v", i, res, err)
		}
		waitPending(t, op, i+1)
	}
	extra, _ := nodekey.Generate()
	_, _, err := dialNode(t, e.url, extra.DeviceID(), bridge.Auth{}, extra)
	wantConnCode(t, "one pending too many from one address", err, bridge.CodeBusy)
	if _, res, err := dialNode(t, e.url, keys[0].DeviceID(), bridge.Auth{}, keys[0]); err != nil || res.Status != bridge.StatusPending {
		t.Fatalf("a pending node reconnecting: %+v, %v", res, err)
	}
}

// TestBrowserPolicy: the WebSocket endpoint refuses a DNS-rebinding
// request (a foreign name in Host, with or without a matching Origin) and
// any non-allowed Origin, and accepts loopback and configured ones.
func TestBrowserPolicy(t *testing.T) {
	e := newEnv(t, `{"gateway": {"allowedOrigins": ["https://ops.example"], "allowedHosts": ["gw.example"]}}`)
	port := e.url[strings.LastIndex(e.url, ":")+1:]
	cases := []struct {
		host, origin string
		ok           bool
	}{
		{"", "", true}, // a non-browser client on loopback
		{"", "http://127.0.0.1:3000", true},
		{"", "http://localhost:" + port, true},
		{"", "http://[::1]:8080", true},
		{"", "https://ops.example", true},
		{"gw.example:" + port, "", true},
		{"evil.example:" + port, "http://evil.example:" + port, false}, // DNS rebinding
		{"evil.example:" + port, "", false},
		{"", "http://evil.example:" + port, false},
		{"", "http://ops.example", false}, // scheme is part of an origin
		{"", "null", false},
	}
	for _, tt := range cases {
		t.Run(fmt.Sprintf("host=%s origin=%s", tt.host, tt.origin), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			h := http.Header{}
			if tt.origin != "" {
				h.Set("Origin", tt.origin)
			}
			ws, resp, err := websocket.Dial(ctx, e.url, &websocket.DialOptions{HTTPHeader: h, Host: tt.host})
			if tt.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				ws.CloseNow()
				return
			}
			if err == nil {
				ws.CloseNow()
				t.Fatal("accepted")
			}
			if resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Fatalf("refusal = %v, %v; want 403", resp, err)
			}
		})
	}
	t.Run("clients show why", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _, err := bridge.Dial(ctx, e.url, bridge.ConnectParams{Role: bridge.RoleAgent, Auth: bridge.Auth{Token: e.token}},
			&websocket.DialOptions{Host: "other.example:" + port}, bridge.Options{})
		if err == nil || !strings.Contains(err.Error(), "refused the connection") || !strings.Contains(err.Error(), "gateway.allowedHosts") {
			t.Fatalf("Dial with a foreign Host: %v", err)
		}
	})
}

// TestPendingLimitConcurrent: a burst of simultaneous pairing requests
// from one address never holds more than MaxPendingPerAddr slots (the
// limit is re-checked under the lock that files the entry).
func TestPendingLimitConcurrent(t *testing.T) {
	e := newEnv(t, fullConfig)
	op := e.client(t, bridge.RoleOperator)
	const burst = 4 * gateway.MaxPendingPerAddr
	conns := make(chan *bridge.Conn, burst)
	var wg sync.WaitGroup
	for range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, _ := nodekey.Generate()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, _, err := bridge.Dial(ctx, e.url, bridge.ConnectParams{Role: bridge.RoleNode,
				Node: &bridge.NodeInfo{NodeID: k.DeviceID()}}, nil, bridge.Options{Device: k})
			if err == nil {
				conns <- c
			}
		}()
	}
	testproc.WaitGroup(t, &wg, "the concurrent connects")
	close(conns)
	var accepted []*bridge.Conn
	for c := range conns {
		accepted = append(accepted, c)
		t.Cleanup(func() { c.Close("test done") })
	}
	// Every accepted connection ends up filed or closed; wait (with a
	// deadline) until that is settled, then count.
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := call[bridge.NodesResult](t, op, bridge.MethodNodesPending, nil)
		if err != nil {
			t.Fatal(err)
		}
		closed := 0
		for _, c := range accepted {
			if c.Err() != nil {
				closed++
			}
		}
		if len(res.Nodes)+closed == len(accepted) {
			if len(res.Nodes) > gateway.MaxPendingPerAddr {
				t.Fatalf("%d pending from one address, limit %d", len(res.Nodes), gateway.MaxPendingPerAddr)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pending + %d closed != %d accepted", len(res.Nodes), closed, len(accepted))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// dialNamed connects as a new node announcing display name name.
func dialNamed(t *testing.T, url string, key *nodekey.Key, name string) (*bridge.Conn, bridge.ConnectResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, res, err := bridge.Dial(ctx, url, bridge.ConnectParams{Role: bridge.RoleNode,
		Node: &bridge.NodeInfo{NodeID: key.DeviceID(), DisplayName: name}}, nil, bridge.Options{Device: key})
	if err == nil {
		t.Cleanup(func() { c.Close("test done") })
	}
	return c, res, err
}

// TestNodeListedWhenAnswered: the gateway files a node before it answers
// its connect, so whatever the node does once it has its answer (telling
// an agent it is up) finds it listed. Before, an exec sent at once could
// be refused as "not connected"; the loop gives the old order many
// chances to show.
func TestNodeListedWhenAnswered(t *testing.T) {
	e := newEnv(t, fullConfig)
	op := e.client(t, bridge.RoleOperator)
	for i := range 3 * gateway.MaxPendingPerAddr {
		k, _ := nodekey.Generate()
		c, res, err := dialNode(t, e.url, k.DeviceID(), bridge.Auth{}, k)
		if err != nil || res.Status != bridge.StatusPending {
			t.Fatalf("connect %d: %+v, %v", i, res, err)
		}
		got, err := call[bridge.NodesResult](t, op, bridge.MethodNodesPending, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Nodes) != 1 || got.Nodes[0].NodeID != k.DeviceID() {
			t.Fatalf("connect %d answered, nodes.pending = %+v, want just %s", i, got.Nodes, k.DeviceID())
		}
		// Hang up and wait until it is gone, so the next one is alone.
		c.Close("next")
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := call[bridge.NodesResult](t, op, bridge.MethodNodesPending, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Nodes) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d still pending after it hung up: %+v", i, got.Nodes)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
