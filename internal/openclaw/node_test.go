package openclaw

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/runner"
)

// testLimit bounds every wait in these tests (a deadline, not a timing
// assertion).
const testLimit = 30 * time.Second

func TestAuthPayloadV3(t *testing.T) {
	got := authPayloadV3("dev", "node-host", "node", "node", []string{"a", "b"}, 1737264000000, "tok", "n0nce", " Linux ", "Linux")
	want := "v3|dev|node-host|node|node|a,b|1737264000000|tok|n0nce|linux|linux"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// Only ASCII letters are lower-cased, as OpenClaw does.
	if got := normalizeMeta("İOS"); got != "İos" {
		t.Fatalf("normalizeMeta = %q", got)
	}
}

func TestIdentityFile(t *testing.T) {
	dir := t.TempDir()
	id, err := LoadOrCreateIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, IdentityFile)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("identity file mode %v err %v", fi.Mode(), err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(id.PublicKey())
	if err != nil || len(raw) != ed25519.PublicKeySize {
		t.Fatalf("public key %q: %v", id.PublicKey(), err)
	}
	sum := sha256.Sum256(raw)
	if id.DeviceID() != hex.EncodeToString(sum[:]) {
		t.Fatalf("device id %s is not sha256(raw public key)", id.DeviceID())
	}
	again, err := LoadOrCreateIdentity(dir)
	if err != nil || again.DeviceID() != id.DeviceID() {
		t.Fatalf("reload gave %v, %v", again, err)
	}
	sig, _ := base64.RawURLEncoding.DecodeString(id.Sign("x"))
	if !ed25519.Verify(raw, []byte("x"), sig) {
		t.Fatal("signature does not verify")
	}

	// A damaged file is reported and left alone: replacing it would
	// silently unpair the node.
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateIdentity(dir); err == nil || !strings.Contains(err.Error(), "hint:") {
		t.Fatalf("damaged file: err %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "{not json" {
		t.Fatalf("damaged file overwritten: %q", b)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateIdentity(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("readable file: err %v", err)
	}
}

// fakeGateway speaks the gateway side of the handshake; each accepted
// connection is handed to the next function in script.
type fakeGateway struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	script []func(c *gwConn)
	conns  int
}

type gwConn struct {
	t       *testing.T
	ws      *websocket.Conn
	connect map[string]any
	ctx     context.Context
}

func newFakeGateway(t *testing.T, script ...func(c *gwConn)) *fakeGateway {
	g := &fakeGateway{t: t, script: script}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		g.mu.Lock()
		i := g.conns
		g.conns++
		g.mu.Unlock()
		if i >= len(g.script) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), testLimit)
		defer cancel()
		c := &gwConn{t: t, ws: ws, ctx: ctx}
		g.script[i](c)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *fakeGateway) url() string { return "ws" + strings.TrimPrefix(g.srv.URL, "http") }

func (c *gwConn) send(v any) {
	b, _ := json.Marshal(v)
	if err := c.ws.Write(c.ctx, websocket.MessageText, b); err != nil {
		c.t.Errorf("gateway write: %v", err)
	}
}

func (c *gwConn) read() map[string]any {
	_, b, err := c.ws.Read(c.ctx)
	if err != nil {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		c.t.Errorf("gateway read: %v", err)
	}
	return m
}

const testToken = "shared-token"

// handshake sends the challenge, reads connect, checks the device proof
// and answers with reply (nil: hello-ok).
func (c *gwConn) handshake(reply map[string]any) {
	c.send(map[string]any{"type": "event", "event": "connect.challenge", "payload": map[string]any{"nonce": "n-123", "ts": 1737264000000}})
	req := c.read()
	if req == nil || req["method"] != "connect" {
		c.t.Errorf("want connect, got %v", req)
		return
	}
	p := req["params"].(map[string]any)
	c.connect = p
	dev := p["device"].(map[string]any)
	client := p["client"].(map[string]any)
	pub, _ := base64.RawURLEncoding.DecodeString(dev["publicKey"].(string))
	sum := sha256.Sum256(pub)
	if dev["id"] != hex.EncodeToString(sum[:]) {
		c.t.Errorf("device id %v is not sha256 of the public key", dev["id"])
	}
	if dev["nonce"] != "n-123" || dev["signedAt"] != float64(1737264000000) {
		c.t.Errorf("device proof does not use the challenge: %v", dev)
	}
	signed := authPayloadV3(dev["id"].(string), client["id"].(string), client["mode"].(string), p["role"].(string), nil,
		1737264000000, testToken, "n-123", client["platform"].(string), fmt.Sprint(client["deviceFamily"]))
	sig, _ := base64.RawURLEncoding.DecodeString(dev["signature"].(string))
	if !ed25519.Verify(pub, []byte(signed), sig) {
		c.t.Errorf("signature does not verify over %q", signed)
	}
	if reply == nil {
		reply = map[string]any{"type": "res", "id": req["id"], "ok": true, "payload": map[string]any{
			"type": "hello-ok", "protocol": 4, "server": map[string]any{"version": "fake", "connId": "c1"},
			"features": map[string]any{}, "snapshot": map[string]any{}, "auth": map[string]any{"role": "node", "scopes": []string{}},
			"policy": map[string]any{"maxPayload": 26214400, "tickIntervalMs": 15000},
		}}
	}
	reply["id"] = req["id"]
	c.send(reply)
}

// invoke sends a node.invoke.request and returns the node.invoke.result
// params (after answering the call), skipping node.event calls, which it
// collects in events.
func (c *gwConn) invoke(id, command string, params any, events *[]map[string]any) map[string]any {
	pj, _ := json.Marshal(params)
	c.send(map[string]any{"type": "event", "event": "node.invoke.request", "payload": map[string]any{
		"id": id, "nodeId": "n", "command": command, "paramsJSON": string(pj), "timeoutMs": 20000,
	}})
	for {
		m := c.read()
		if m == nil {
			c.t.Error("connection closed before node.invoke.result")
			return nil
		}
		c.send(map[string]any{"type": "res", "id": m["id"], "ok": true, "payload": map[string]any{}})
		p, _ := m["params"].(map[string]any)
		switch m["method"] {
		case MethodNodeEvent:
			if events != nil {
				*events = append(*events, p)
			}
		case MethodInvokeResult:
			return p
		}
	}
}

// fakeRunner returns a fixed result or error and records requests.
type fakeRunner struct {
	mu    sync.Mutex
	reqs  []host.Request
	res   host.Result
	err   error
	block bool // wait for ctx to end
	ended chan error
}

func (r *fakeRunner) Run(ctx context.Context, req host.Request) (host.Result, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	if r.block {
		<-ctx.Done()
		r.ended <- ctx.Err()
		return host.Result{Result: runner.Result{ExitCode: -1, Error: "canceled"}}, nil
	}
	return r.res, r.err
}

func (r *fakeRunner) Plan(req host.Request) (Plan, error) { return Plan{Argv: req.Argv}, nil }

// runNode runs a node against g until stop is called, recording sleeps.
type runningNode struct {
	n      *Node
	stderr *bytes.Buffer
	sleeps []time.Duration
	done   chan error
	cancel context.CancelFunc
}

func startNode(t *testing.T, g *fakeGateway, r Runner, onConnected func(), setup ...func(*Node)) *runningNode {
	t.Helper()
	rn := &runningNode{stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), testLimit)
	rn.cancel = cancel
	var mu sync.Mutex
	n, err := New(Options{
		GatewayURL: g.url(), Token: testToken, StateDir: t.TempDir(), DisplayName: "t", Version: "test",
		Runner: r, Stderr: &lockedWriter{mu: &mu, w: rn.stderr},
		Sleep: func(ctx context.Context, d time.Duration) error {
			mu.Lock()
			rn.sleeps = append(rn.sleeps, d)
			mu.Unlock()
			return ctx.Err()
		},
		Jitter:      func(d time.Duration) time.Duration { return d },
		OnConnected: onConnected,
		// No node.host.stats unless a test asks (TestHostStats): the
		// scripts read the node's frames in order.
		SampleHostStats: func() (HostStats, error) { return HostStats{}, errors.New("off in this test") },
	})
	if err != nil {
		t.Fatal(err)
	}
	rn.n = n
	for _, f := range setup {
		f(n)
	}
	go func() { rn.done <- n.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-rn.done })
	return rn
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (rn *runningNode) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-rn.done:
		rn.done <- err
		return err
	case <-time.After(testLimit):
		t.Fatal("node did not stop")
		return nil
	}
}

func TestHandshakeAndSystemRun(t *testing.T) {
	fr := &fakeRunner{res: host.Result{Result: runner.Result{ExitCode: 0, Success: true, Stdout: "hi\n"}}}
	got := make(chan map[string]any, 1)
	g := newFakeGateway(t, func(c *gwConn) {
		c.handshake(nil)
		p := c.connect
		client := p["client"].(map[string]any)
		if client["id"] != "node-host" || client["mode"] != "node" || p["role"] != "node" || p["minProtocol"] != float64(4) || p["maxProtocol"] != float64(4) {
			t.Errorf("connect params %v", p)
		}
		if diff := cmp.Diff([]any{"system.execApprovals.get", "system.execApprovals.set", "system.run", "system.run.prepare", "system.which"}, p["commands"]); diff != "" {
			t.Errorf("commands (-want +got):\n%s", diff)
		}
		if p["auth"].(map[string]any)["token"] != testToken {
			t.Errorf("auth %v", p["auth"])
		}
		got <- c.invoke("inv-1", "system.run", map[string]any{
			"command": []string{"echo", "hi"}, "cwd": "/tmp", "timeoutMs": 5000, "sessionKey": "s1", "runId": "r1",
			"security": "allowlist", "ask": "bogus", "approved": true, "approvalDecision": "allow-always",
		}, nil)
	})
	startNode(t, g, fr, nil)
	var res map[string]any
	select {
	case res = <-got:
	case <-time.After(testLimit):
		t.Fatal("no node.invoke.result")
	}
	if res["id"] != "inv-1" || res["ok"] != true {
		t.Fatalf("result %v", res)
	}
	var payload bridge.SystemRunResult
	if err := json.Unmarshal([]byte(res["payloadJSON"].(string)), &payload); err != nil || payload.Stdout != "hi\n" || !payload.Success {
		t.Fatalf("payload %v (%v)", res["payloadJSON"], err)
	}
	fr.mu.Lock()
	defer fr.mu.Unlock()
	want := host.Request{Argv: []string{"echo", "hi"}, Cwd: "/tmp", TimeoutMs: 5000, SessionKey: "s1", RunID: "r1",
		Security: policy.SecurityAllowlist, Ask: policy.AskAlways}
	// approvalDecision is never forwarded: this host decides itself, and an
	// unknown ask tightens to always.
	if diff := cmp.Diff([]host.Request{want}, fr.reqs); diff != "" {
		t.Fatalf("engine request (-want +got):\n%s", diff)
	}
}

func TestDenialsUseOpenClawTexts(t *testing.T) {
	for _, tc := range []struct {
		err        error
		code, text string
	}{
		{fmt.Errorf("%w: /usr/bin/id matched no pattern", policy.ErrAllowlistMiss), "SYSTEM_RUN_DENIED", "SYSTEM_RUN_DENIED: allowlist miss"},
		{policy.ErrDisabled, "SYSTEM_RUN_DENIED", "SYSTEM_RUN_DISABLED: security=deny"},
		{policy.ErrUserDenied, "SYSTEM_RUN_DENIED", "SYSTEM_RUN_DENIED: user denied"},
		{fmt.Errorf("%w: env LD_PRELOAD cannot be set", runner.ErrDangerousEnv), "INVALID_REQUEST", "SYSTEM_RUN_DENIED: environment override rejected"},
		{errors.New("empty command"), "INVALID_REQUEST", "empty command"},
	} {
		r := runFailure(tc.err)
		if r.OK || r.Error.Code != tc.code || !strings.HasPrefix(r.Error.Message, tc.text) || strings.Count(r.Error.Message, "SYSTEM_RUN_") > 1 {
			t.Errorf("%v: got %+v", tc.err, r.Error)
		}
	}
}

func TestCancelEndsTheCommand(t *testing.T) {
	fr := &fakeRunner{block: true, ended: make(chan error, 1)}
	result := make(chan map[string]any, 1)
	g := newFakeGateway(t, func(c *gwConn) {
		c.handshake(nil)
		pj, _ := json.Marshal(map[string]any{"command": []string{"sleep", "100"}})
		c.send(map[string]any{"type": "event", "event": "node.invoke.request", "payload": map[string]any{
			"id": "inv-9", "nodeId": "n", "command": "system.run", "paramsJSON": string(pj), "timeoutMs": 600000}})
		// Cancel once the engine has the request.
		for {
			fr.mu.Lock()
			n := len(fr.reqs)
			fr.mu.Unlock()
			if n > 0 {
				break
			}
			select {
			case <-c.ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		c.send(map[string]any{"type": "event", "event": "node.invoke.cancel", "payload": map[string]any{"invokeId": "inv-9", "nodeId": "n"}})
		for {
			m := c.read()
			if m == nil {
				return
			}
			c.send(map[string]any{"type": "res", "id": m["id"], "ok": true, "payload": map[string]any{}})
			if m["method"] == MethodInvokeResult {
				result <- m["params"].(map[string]any)
				return
			}
		}
	})
	startNode(t, g, fr, nil)
	select {
	case err := <-fr.ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("command ended with %v, want canceled", err)
		}
	case <-time.After(testLimit):
		t.Fatal("node.invoke.cancel did not end the command")
	}
	select {
	case r := <-result:
		if r["id"] != "inv-9" {
			t.Fatalf("result %v", r)
		}
	case <-time.After(testLimit):
		t.Fatal("no result after cancel")
	}
}

func TestProtocolMismatchStops(t *testing.T) {
	g := newFakeGateway(t, func(c *gwConn) {
		c.handshake(map[string]any{"type": "res", "ok": false, "error": map[string]any{
			"code": "INVALID_REQUEST", "message": "protocol mismatch",
			"details": map[string]any{"code": "PROTOCOL_MISMATCH", "expectedProtocol": 5}}})
	})
	rn := startNode(t, g, &fakeRunner{}, nil)
	err := rn.wait(t)
	if !errors.Is(err, ErrProtocolMismatch) || !strings.Contains(err.Error(), "v4") {
		t.Fatalf("Run = %v, want a protocol mismatch naming v4", err)
	}
	if len(rn.sleeps) != 0 {
		t.Fatalf("retried a mismatch: %v", rn.sleeps)
	}
}

func TestPairingRequiredThenBackoffThenConnect(t *testing.T) {
	connected := make(chan struct{})
	pairing := func(c *gwConn) {
		c.handshake(map[string]any{"type": "res", "ok": false, "error": map[string]any{
			"code": "NOT_PAIRED", "message": "pairing required",
			"details": map[string]any{"code": "PAIRING_REQUIRED", "requestId": "req-42"}}})
	}
	drop := func(c *gwConn) {} // accept and close: the gateway restarting
	g := newFakeGateway(t, pairing, pairing, drop, drop, func(c *gwConn) {
		c.handshake(nil)
		<-c.ctx.Done()
	})
	var once sync.Once
	rn := startNode(t, g, &fakeRunner{}, func() { once.Do(func() { close(connected) }) })
	select {
	case <-connected:
	case <-time.After(testLimit):
		t.Fatal("never connected")
	}
	rn.cancel()
	rn.wait(t)
	if diff := cmp.Diff([]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}, rn.sleeps); diff != "" {
		t.Errorf("backoff (-want +got):\n%s", diff)
	}
	out := rn.stderr.String()
	if !strings.Contains(out, "openclaw devices approve req-42") || !strings.Contains(out, "openclaw nodes approve") {
		t.Errorf("pairing hint missing:\n%s", out)
	}
	if strings.Count(out, "has not paired") != 1 {
		t.Errorf("pairing hint repeated for the same request:\n%s", out)
	}
}

func TestApprovalsGetSet(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "exec-approvals.json"), []byte(`{"version":1,"socket":{"path":"/x.sock","token":"secret"},"defaults":{"security":"allowlist"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	n := newTestNode(t, Options{StateDir: dir, AllowRemoteWidening: true})
	get := n.approvalsGet()
	var snap approvalsSnapshot
	if !get.OK || json.Unmarshal([]byte(*get.PayloadJSON), &snap) != nil || strings.Contains(string(snap.File), "secret") {
		t.Fatalf("get: %+v", get)
	}
	set := func(file, base string) invokeResult {
		pj, _ := json.Marshal(map[string]any{"file": json.RawMessage(file), "baseHash": base})
		s := string(pj)
		return n.approvalsSet(context.Background(), invokeRequest{ParamsJSON: &s})
	}
	// The sent socket section never replaces the host's own.
	r := set(`{"version":1,"socket":{"path":"/evil.sock","token":"mine"},"defaults":{"security":"full"}}`, snap.Hash)
	if !r.OK {
		t.Fatalf("set: %+v", r.Error)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "exec-approvals.json"))
	if !strings.Contains(string(data), `"secret"`) || strings.Contains(string(data), "evil") || !strings.Contains(string(data), `"full"`) {
		t.Fatalf("file after set:\n%s", data)
	}
	if r := set(`{"version":1}`, snap.Hash); r.OK || !strings.Contains(r.Error.Message, "changed") {
		t.Fatalf("stale set: %+v", r)
	}
	if r := set(`{"version":1}`, ""); r.OK || !strings.Contains(r.Error.Message, "base hash") {
		t.Fatalf("set without baseHash: %+v", r)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "exec-approvals.json"))
	if r := set(`{"version":1,"defaults":{"security":`, "x"); r.OK || r.Error.Code != CodeInvalidRequest {
		t.Fatalf("malformed set: %+v", r)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "exec-approvals.json")); !bytes.Equal(before, after) {
		t.Fatal("a malformed set changed the file")
	}
}

// TestApprovalsTwoViews: OpenClaw's gateway gets exactly OpenClaw's
// schema (its closed schema refuses anything else), and an edit it sends
// back keeps every exechost-only member of the file: confine, envAllowlist,
// an entry's sha256 pin, unknown members. A document carrying exechost-only
// members is refused naming them, and nothing is written.
func TestApprovalsTwoViews(t *testing.T) {
	dir := t.TempDir()
	const file = `{"version":1,"defaults":{"security":"allowlist","ask":"on-miss","askFallback":"deny","envAllowlist":["GOFLAGS"],"confine":{"network":"none"}},
		"agents":{"*":{"allowlist":[{"id":"E1","pattern":"/usr/bin/echo","sha256":"abc"},{"id":"E2","pattern":"/usr/bin/id"}]},"ci":{"confine":{"network":"loopback"},"grants":["x"]}},"future":true}`
	if err := os.WriteFile(filepath.Join(dir, "exec-approvals.json"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	n := newTestNode(t, Options{StateDir: dir})
	var snap approvalsSnapshot
	if get := n.approvalsGet(); !get.OK || json.Unmarshal([]byte(*get.PayloadJSON), &snap) != nil {
		t.Fatalf("get: %+v", get)
	}
	for _, leak := range []string{"confine", "envAllowlist", "sha256", "grants", "future"} {
		if strings.Contains(string(snap.File), leak) {
			t.Errorf("OpenClaw's view has %s:\n%s", leak, snap.File)
		}
	}
	// OpenClaw's edit: drop the id entry (a tightening) and the ci agent.
	var doc map[string]any
	if err := json.Unmarshal(snap.File, &doc); err != nil {
		t.Fatal(err)
	}
	agents := doc["agents"].(map[string]any)
	star := agents["*"].(map[string]any)
	star["allowlist"] = star["allowlist"].([]any)[:1]
	delete(agents, "ci")
	edit, _ := json.Marshal(doc)
	pj, _ := json.Marshal(map[string]any{"file": json.RawMessage(edit), "baseHash": snap.Hash})
	ps := string(pj)
	if r := n.approvalsSet(context.Background(), invokeRequest{ParamsJSON: &ps}); !r.OK {
		t.Fatalf("set: %+v", r.Error)
	}
	f, err := approvals.NewStore(dir).Load()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := approvals.ExechostOnly(f), []string{"defaults.envAllowlist", "defaults.confine", "agents.*.allowlist[0].sha256", "agents.ci.confine", "agents.ci.grants", "future"}; !slices.Equal(got, want) {
		t.Errorf("exechost-only members after OpenClaw's edit: %v, want %v", got, want)
	}
	if a := f.Agents["*"].Allowlist; len(a) != 1 || a[0].Pattern != "/usr/bin/echo" {
		t.Errorf("OpenClaw's edit not applied: %+v", a)
	}

	before, _ := os.ReadFile(filepath.Join(dir, "exec-approvals.json"))
	var again approvalsSnapshot
	_ = json.Unmarshal([]byte(*n.approvalsGet().PayloadJSON), &again)
	pj, _ = json.Marshal(map[string]any{"file": json.RawMessage(`{"version":1,"defaults":{"security":"deny","confine":{"network":"all"}}}`), "baseHash": again.Hash})
	ps = string(pj)
	if r := n.approvalsSet(context.Background(), invokeRequest{ParamsJSON: &ps}); r.OK || !strings.Contains(r.Error.Message, "defaults.confine") {
		t.Fatalf("a document with exechost-only members: %+v", r)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "exec-approvals.json")); !bytes.Equal(before, after) {
		t.Fatal("a refused set changed the file")
	}
}

// newTestNode is a Node that is not connected, with its device key in
// opts.StateDir.
func newTestNode(t *testing.T, opts Options) *Node {
	t.Helper()
	opts.GatewayURL = "ws://127.0.0.1:1"
	n, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestApprovalsSetAsOpenClawMeansIt: a document from OpenClaw is read
// with OpenClaw's meaning (a missing ask is off, a missing security full),
// invalid values are refused with where they are, and the result is still
// only written when it does not widen this host's policy or the host
// consented.
func TestApprovalsSetAsOpenClawMeansIt(t *testing.T) {
	const start = `{"version":1,"defaults":{"security":"full","ask":"on-miss","askFallback":"deny"},"agents":{"*":{"allowlist":[{"pattern":"/usr/bin/git"}]}}}`
	tests := []struct {
		name    string
		allow   bool
		doc     string
		want    string // the defaults written, "" when refused
		wantErr []string
	}{
		{name: "a plain allowlist: ask off, as OpenClaw reads it",
			doc:  `{"version":1,"defaults":{"security":"allowlist"},"agents":{"*":{"allowlist":[{"pattern":"/usr/bin/git"}]}}}`,
			want: "allowlist off deny"},
		{name: "no defaults at all: OpenClaw's full, off, deny",
			doc:  `{"version":1,"agents":{"*":{"allowlist":[{"pattern":"/usr/bin/git"}]}}}`,
			want: "full off deny"},
		{name: "invalid values are refused, each named",
			doc:     `{"version":1,"defaults":{"security":"allowlist","ask":"sometimes"},"agents":{"ci":{"askFallback":"maybe","allowlist":[{"pattern":" "}]}}}`,
			wantErr: []string{`defaults.ask: invalid value: ask "sometimes" (accepted: off, on-miss, always)`, `agents.ci.askFallback: invalid value`, "agents.ci.allowlist[0].pattern: empty"}},
		{name: "a widening is refused without consent",
			doc:     `{"version":1,"defaults":{"security":"full","ask":"off"},"agents":{"*":{"allowlist":[{"pattern":"/usr/bin/git"},{"pattern":"/usr/bin/curl"}]}}}`,
			wantErr: []string{"may only tighten", `agents.*.allowlist +"/usr/bin/curl"`, "--allow-remote-widening"}},
		{name: "a widening with the node opted in", allow: true,
			doc:  `{"version":1,"defaults":{"ask":"off","askFallback":"full"}}`,
			want: "full off full"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "exec-approvals.json")
			if err := os.WriteFile(path, []byte(start), 0o600); err != nil {
				t.Fatal(err)
			}
			n := newTestNode(t, Options{StateDir: dir, AllowRemoteWidening: tt.allow})
			var snap approvalsSnapshot
			if get := n.approvalsGet(); !get.OK || json.Unmarshal([]byte(*get.PayloadJSON), &snap) != nil {
				t.Fatalf("get: %+v", get)
			}
			before, _ := os.ReadFile(path)
			pj, _ := json.Marshal(map[string]any{"file": json.RawMessage(tt.doc), "baseHash": snap.Hash})
			ps := string(pj)
			r := n.approvalsSet(context.Background(), invokeRequest{ParamsJSON: &ps})
			if tt.want == "" {
				if r.OK || r.Error.Code != CodeInvalidRequest {
					t.Fatalf("set = %+v, want INVALID_REQUEST", r)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(r.Error.Message, w) {
						t.Errorf("error %q does not say %q", r.Error.Message, w)
					}
				}
				if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
					t.Errorf("a refused set changed the file:\n%s", after)
				}
				return
			}
			if !r.OK {
				t.Fatalf("set: %+v", r.Error)
			}
			f, err := approvals.NewStore(dir).Load()
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Defaults.Security + " " + f.Defaults.Ask + " " + f.Defaults.AskFallback; got != tt.want {
				t.Errorf("defaults written = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPrepareWithRealEngine(t *testing.T) {
	dir, work := t.TempDir(), t.TempDir() // no run works in the state directory
	if err := os.WriteFile(filepath.Join(dir, "exec-approvals.json"), []byte(`{"version":1,"defaults":{"security":"allowlist","ask":"off"},"agents":{"*":{"allowlist":[{"pattern":"/bin/echo"},{"pattern":"/usr/bin/echo"}]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	eng := host.NewEngine(dir, policy.HostNode, "n")
	n := &Node{opts: Options{StateDir: dir, Runner: EngineRunner(eng)}}
	pj, _ := json.Marshal(map[string]any{"command": []string{"/bin/sh", "-c", "echo a && echo b"}, "rawCommand": "echo a && echo b", "cwd": work, "agentId": "main"})
	s := string(pj)
	r := n.prepare(invokeRequest{ParamsJSON: &s})
	if !r.OK {
		t.Fatalf("prepare: %+v", r.Error)
	}
	var out prepareResult
	if err := json.Unmarshal([]byte(*r.PayloadJSON), &out); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"/bin/sh", "-c", "echo a && echo b"}, out.Plan.Argv); diff != "" {
		t.Errorf("plan argv (-want +got):\n%s", diff)
	}
	if str(out.Plan.Cwd) != work || out.Plan.CommandText != "echo a && echo b" || str(out.Plan.AgentID) != "main" {
		t.Errorf("plan %+v", out.Plan)
	}
	// The exec tool's Linux wrapper (a login shell) becomes the plain
	// shell the engine analyses: the plan never carries -l.
	pj, _ = json.Marshal(map[string]any{"command": []string{"/bin/sh", "-lc", "echo a"}, "rawCommand": "echo a", "cwd": work})
	s = string(pj)
	r = n.prepare(invokeRequest{ParamsJSON: &s})
	if !r.OK || json.Unmarshal([]byte(*r.PayloadJSON), &out) != nil {
		t.Fatalf("prepare -lc: %+v", r.Error)
	}
	if diff := cmp.Diff([]string{"/bin/sh", "-c", "echo a"}, out.Plan.Argv); diff != "" {
		t.Errorf("plan argv for sh -lc (-want +got):\n%s", diff)
	}
	if out.ExecPolicy != (execPolicy{Security: "allowlist", Ask: "off"}) || out.AllowAlwaysCoverage.Complete {
		t.Errorf("policy %+v coverage %+v", out.ExecPolicy, out.AllowAlwaysCoverage)
	}
}

// TestEventsAndResultsAsOpenClawSendsThem runs the real engine and checks
// each system.run's result and the node.events the gateway receives
// before it against what OpenClaw's own node host sends: no exec.started,
// suppressNotifyOnExit carried, sessionKey "node" when the request names
// none, its denial reason codes, exit code 124 on timeout, no exit code
// for a program that never started or a signal, a bad cwd as a failed
// result, and a rejected env name refused once-prefixed before anything
// runs.
func TestEventsAndResultsAsOpenClawSendsThem(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "exec-approvals.json"), []byte(`{"version":1,"defaults":{"security":"allowlist","ask":"off"},
		"agents":{"*":{"allowlist":[{"pattern":"/bin/echo"},{"pattern":"/usr/bin/echo"},{"pattern":"/bin/sleep"},{"pattern":"/usr/bin/sleep"}]},"full":{"security":"full"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	eng := host.NewEngine(dir, policy.HostNode, "n")
	defer eng.Close()
	type call struct {
		name   string
		params map[string]any
		result map[string]any // the invoke result
		events []map[string]any
	}
	calls := []*call{
		{name: "allowed, suppressed", params: map[string]any{"command": []string{"echo", "x"}, "sessionKey": "s", "runId": "r1", "suppressNotifyOnExit": true}},
		{name: "miss without a session", params: map[string]any{"command": []string{"id"}, "runId": "r2"}},
		{name: "bad cwd", params: map[string]any{"command": []string{"echo", "x"}, "cwd": filepath.Join(dir, "missing"), "runId": "r3"}},
		{name: "timeout", params: map[string]any{"command": []string{"sleep", "60"}, "timeoutMs": 300, "runId": "r4"}},
		{name: "missing program", params: map[string]any{"command": []string{filepath.Join(dir, "no-such-program")}, "agentId": "full", "runId": "r5"}},
		{name: "signal", params: map[string]any{"command": []string{"/bin/sh", "-c", "kill -9 $$"}, "agentId": "full", "runId": "r6"}},
		{name: "dangerous env", params: map[string]any{"command": []string{"echo", "x"}, "env": map[string]string{"LD_PRELOAD": "/x.so"}, "runId": "r7"}},
		{name: "relative cwd", params: map[string]any{"command": []string{"echo", "x"}, "cwd": "rel/dir", "runId": "r8"}},
		{name: "env under a shell wrapper", params: map[string]any{"command": []string{"/bin/sh", "-lc", `echo "$FOO|$LANG"`},
			"env": map[string]string{"FOO": "1", "LANG": "C"}, "agentId": "full", "runId": "r9"}},
		{name: "env with argv", params: map[string]any{"command": []string{"printenv", "FOO"}, "env": map[string]string{"FOO": "1"}, "agentId": "full", "runId": "r10"}},
		{name: "truncated", params: map[string]any{"command": []string{"/bin/sh", "-c", "head -c 30000 /dev/zero | tr '\\0' a; echo; echo END"}, "agentId": "full", "runId": "r11"}},
	}
	done := make(chan struct{})
	g := newFakeGateway(t, func(c *gwConn) {
		defer close(done)
		c.handshake(nil)
		for i, cl := range calls {
			cl.result = c.invoke(fmt.Sprintf("i%d", i), "system.run", cl.params, &cl.events)
		}
	})
	startNode(t, g, EngineRunner(eng), nil, func(n *Node) { eng.OnEvent = n.HostEvent })
	select {
	case <-done:
	case <-time.After(testLimit):
		t.Fatal("calls did not finish")
	}
	payload := func(m map[string]any, key string) map[string]any {
		var p map[string]any
		if s, ok := m[key].(string); ok {
			_ = json.Unmarshal([]byte(s), &p)
		}
		return p
	}
	type ev struct {
		Event   string
		Payload map[string]any
	}
	events := func(cl *call) []ev {
		var out []ev
		for _, e := range cl.events {
			out = append(out, ev{e["event"].(string), payload(e, "payloadJSON")})
		}
		return out
	}
	byName := map[string]*call{}
	for _, cl := range calls {
		byName[cl.name] = cl
		for _, e := range events(cl) {
			if e.Event == "exec.started" {
				t.Errorf("%s: exec.started sent; OpenClaw's node host never sends it", cl.name)
			}
		}
	}

	cl := byName["allowed, suppressed"]
	if diff := cmp.Diff([]ev{{"exec.finished", map[string]any{"sessionKey": "s", "runId": "r1", "host": "node", "command": "echo x",
		"exitCode": float64(0), "timedOut": false, "success": true, "output": "x", "suppressNotifyOnExit": true}}}, events(cl)); diff != "" {
		t.Errorf("allowed run's events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"exitCode": float64(0), "timedOut": false, "success": true, "stdout": "x\n", "stderr": "", "error": nil},
		payload(cl.result, "payloadJSON")); diff != "" {
		t.Errorf("allowed run's result (-want +got):\n%s", diff)
	}

	cl = byName["miss without a session"]
	if e := events(cl); len(e) != 1 || e[0].Event != "exec.denied" || e[0].Payload["reason"] != "allowlist-miss" ||
		e[0].Payload["sessionKey"] != "node" || e[0].Payload["suppressNotifyOnExit"] != false || e[0].Payload["runId"] != "r2" {
		t.Errorf("denied run's events: %+v", e)
	}
	if cl.result["ok"] != false || cl.result["error"].(map[string]any)["code"] != CodeDenied {
		t.Errorf("denied run's result: %v", cl.result)
	}

	for _, name := range []string{"bad cwd", "missing program", "signal", "relative cwd"} {
		cl := byName[name]
		res := payload(cl.result, "payloadJSON")
		if cl.result["ok"] != true || res["success"] != false || res["error"] == nil || res["exitCode"] != nil {
			t.Errorf("%s: result %v, want ok with success=false, an error and no exitCode", name, cl.result)
		}
		if e := events(cl); len(e) != 1 || e[0].Event != "exec.finished" || e[0].Payload["exitCode"] != nil || e[0].Payload["success"] != false ||
			!strings.Contains(fmt.Sprint(e[0].Payload["output"]), fmt.Sprint(res["error"])) {
			t.Errorf("%s: events %+v", name, e)
		}
	}
	if res := payload(byName["bad cwd"].result, "payloadJSON"); !strings.Contains(fmt.Sprint(res["error"]), "working directory does not exist on the node host") {
		t.Errorf("bad cwd error: %v", res["error"])
	}

	if res := payload(byName["relative cwd"].result, "payloadJSON"); !strings.Contains(fmt.Sprint(res["error"]), "working directory is not an absolute path on the node host: rel/dir") {
		t.Errorf("relative cwd error: %v", res["error"])
	}

	// OpenClaw's host reports a timeout without an error text: its exec
	// tool would print it as one more line after "Command timed out."
	cl = byName["timeout"]
	if res := payload(cl.result, "payloadJSON"); res["exitCode"] != float64(124) || res["timedOut"] != true || res["success"] != false || res["error"] != nil {
		t.Errorf("timeout result %v", res)
	}
	if e := events(cl); len(e) != 1 || e[0].Payload["exitCode"] != float64(124) || e[0].Payload["timedOut"] != true || e[0].Payload["output"] != "" {
		t.Errorf("timeout events %+v", e)
	}

	// Under sh -c, only locale and colour variables pass, as OpenClaw's
	// host filters them; an argv run gets its env.
	if res := payload(byName["env under a shell wrapper"].result, "payloadJSON"); res["stdout"] != "|C\n" {
		t.Errorf("env under a shell wrapper: %v %v", res, byName["env under a shell wrapper"].result)
	}
	if res := payload(byName["env with argv"].result, "payloadJSON"); res["stdout"] != "1\n" {
		t.Errorf("env with argv: %v", res)
	}

	// The event carries the output's last 20,000 bytes, marked as cut the
	// way OpenClaw's host marks it.
	if e := events(byName["truncated"]); len(e) != 1 || !strings.HasPrefix(fmt.Sprint(e[0].Payload["output"]), "... (truncated) aaa") ||
		!strings.HasSuffix(fmt.Sprint(e[0].Payload["output"]), "\nEND") || len(fmt.Sprint(e[0].Payload["output"])) > 20_000+len("... (truncated) ") {
		t.Errorf("truncated run's event output: %.80q… (%d bytes)", fmt.Sprint(e[0].Payload["output"]), len(fmt.Sprint(e[0].Payload["output"])))
	}

	cl = byName["dangerous env"]
	e, _ := cl.result["error"].(map[string]any)
	if cl.result["ok"] != false || e["code"] != CodeInvalidRequest || e["message"] != "SYSTEM_RUN_DENIED: environment override rejected (blocked override keys: LD_PRELOAD)" || len(cl.events) != 0 {
		t.Errorf("dangerous env: %v, events %v", cl.result, cl.events)
	}
}

// FuzzRunParams feeds arbitrary system.run params through decoding and the
// mapping to an engine request: no panic, and a security or ask value this
// version does not know always tightens.
func FuzzRunParams(f *testing.F) {
	f.Add(`{"command":["echo","hi"],"security":"full","ask":"off"}`)
	f.Add(`{"command":[],"systemRunPlan":{"argv":["x"],"cwd":"/"},"security":"FULL"}`)
	f.Add(`{"rawCommand":null,"timeoutMs":-5,"env":{"A":"b"}}`)
	f.Fuzz(func(t *testing.T, s string) {
		var p runParams
		if json.Unmarshal([]byte(s), &p) != nil {
			return
		}
		req := p.request(1000)
		if p.Security != "" && !req.Security.Valid() {
			t.Fatalf("security %q mapped to %q", p.Security, req.Security)
		}
		if _, err := policy.ParseSecurity(p.Security); p.Security != "" && err != nil && req.Security != policy.SecurityDeny {
			t.Fatalf("unknown security %q mapped to %q", p.Security, req.Security)
		}
		if req.TimeoutMs <= 0 && req.TimeoutMs != 1000 {
			t.Fatalf("timeout %d", req.TimeoutMs)
		}
	})
}

// FuzzHandshakeFrame feeds arbitrary gateway frames through the handshake
// decoding and the refusal classification: no panic, and a refusal is
// never classified as two things at once.
func FuzzHandshakeFrame(f *testing.F) {
	f.Add(`{"type":"res","id":"connect-1","ok":false,"error":{"code":"NOT_PAIRED","message":"pairing required","details":{"code":"PAIRING_REQUIRED","requestId":"r"}}}`)
	f.Add(`{"type":"res","ok":false,"error":{"code":"INVALID_REQUEST","message":"protocol mismatch","details":{"code":7}}}`)
	f.Add(`{"type":"event","event":"connect.challenge","payload":{"nonce":"n","ts":1.5}}`)
	f.Fuzz(func(t *testing.T, s string) {
		var fr rawFrame
		if json.Unmarshal([]byte(s), &fr) != nil {
			return
		}
		var ch challenge
		_ = json.Unmarshal(fr.Payload, &ch)
		if fr.Error == nil {
			return
		}
		_ = fr.Error.Error()
		n := 0
		for _, e := range []error{ErrPairingRequired, ErrProtocolMismatch, ErrAuth} {
			if errors.Is(fr.Error, e) {
				n++
			}
		}
		if n > 1 {
			t.Fatalf("%s classified %d ways", s, n)
		}
	})
}

// TestBusyInvokes: with MaxInvokes invokes in flight the next is refused
// at once with UNAVAILABLE "BUSY: …" (it never reaches the runner), and a
// finished invoke frees its slot for the next.
func TestBusyInvokes(t *testing.T) {
	fr := &fakeRunner{block: true, ended: make(chan error, 8)}
	reqsSeen := func(want int, c *gwConn) bool {
		for {
			fr.mu.Lock()
			n := len(fr.reqs)
			fr.mu.Unlock()
			if n >= want {
				return true
			}
			select {
			case <-c.ctx.Done():
				return false
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	start := func(c *gwConn, id string) {
		pj, _ := json.Marshal(map[string]any{"command": []string{"sleep", "100"}})
		c.send(map[string]any{"type": "event", "event": "node.invoke.request", "payload": map[string]any{
			"id": id, "nodeId": "n", "command": "system.run", "paramsJSON": string(pj), "timeoutMs": 600000}})
	}
	result := func(c *gwConn) map[string]any {
		for {
			m := c.read()
			if m == nil {
				return nil
			}
			c.send(map[string]any{"type": "res", "id": m["id"], "ok": true, "payload": map[string]any{}})
			if m["method"] == MethodInvokeResult {
				return m["params"].(map[string]any)
			}
		}
	}
	cancelInv := func(c *gwConn, id string) {
		c.send(map[string]any{"type": "event", "event": "node.invoke.cancel", "payload": map[string]any{"invokeId": id, "nodeId": "n"}})
	}
	done := make(chan struct{})
	var node *Node // set before the node connects, so before the script runs
	g := newFakeGateway(t, func(c *gwConn) {
		defer close(done)
		c.handshake(nil)
		start(c, "inv-1")
		start(c, "inv-2")
		if !reqsSeen(2, c) {
			t.Error("the first two invokes did not reach the runner")
			return
		}
		start(c, "inv-3")
		r := result(c)
		errObj, _ := r["error"].(map[string]any)
		if r["id"] != "inv-3" || r["ok"] != false || errObj["code"] != CodeUnavailable || !strings.HasPrefix(fmt.Sprint(errObj["message"]), "BUSY: ") ||
			!strings.Contains(fmt.Sprint(errObj["message"]), "--max-runs") {
			t.Errorf("third invoke: %v, want UNAVAILABLE BUSY naming --max-runs", r)
		}
		cancelInv(c, "inv-1")
		if r := result(c); r["id"] != "inv-1" {
			t.Errorf("after cancel: %v", r)
		}
		// inv-1 holds its slot until its result is delivered: wait for
		// the release that follows the reply just sent.
		for {
			if held, _ := node.invokes.InFlight(""); held == 1 {
				break
			}
			select {
			case <-c.ctx.Done():
				t.Error("inv-1's slot was never released")
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
		start(c, "inv-4")
		if !reqsSeen(3, c) {
			t.Error("a freed slot was not reused")
		}
		cancelInv(c, "inv-2")
		cancelInv(c, "inv-4")
		for range 2 {
			result(c)
		}
	})
	startNode(t, g, fr, nil, func(n *Node) { n.opts.MaxInvokes = 2; node = n })
	select {
	case <-done:
	case <-time.After(testLimit):
		t.Fatal("script did not finish")
	}
	fr.mu.Lock()
	defer fr.mu.Unlock()
	if len(fr.reqs) != 3 {
		t.Errorf("runner saw %d requests, want 3 (the refused one must not run)", len(fr.reqs))
	}
}

// TestCommandsHintOnlyUntilServed: the hint that a new node's commands
// wait for an operator's approval is printed until the gateway has sent
// this node an invoke, not on every start.
func TestCommandsHintOnlyUntilServed(t *testing.T) {
	const hint = "commands wait for approval"
	served := make(chan struct{})
	g := newFakeGateway(t, func(c *gwConn) {
		c.handshake(nil)
		c.invoke("i1", "system.which", map[string]any{"bins": []string{"sh"}}, nil)
		close(served)
		<-c.ctx.Done()
	}, func(c *gwConn) {
		c.handshake(nil)
		<-c.ctx.Done()
	})
	first := startNode(t, g, &fakeRunner{}, nil)
	select {
	case <-served:
	case <-time.After(testLimit):
		t.Fatal("no invoke served")
	}
	first.cancel()
	first.wait(t)
	if !strings.Contains(first.stderr.String(), hint) {
		t.Fatalf("first start printed no hint:\n%s", first.stderr)
	}
	connected := make(chan struct{})
	var once sync.Once
	second := startNode(t, g, &fakeRunner{}, func() { once.Do(func() { close(connected) }) },
		func(n *Node) { n.opts.StateDir = first.n.opts.StateDir })
	select {
	case <-connected:
	case <-time.After(testLimit):
		t.Fatal("second start never connected")
	}
	second.cancel()
	second.wait(t)
	if out := second.stderr.String(); strings.Contains(out, hint) || !strings.Contains(out, "connected to OpenClaw gateway") {
		t.Errorf("restart after the gateway served this node:\n%s", out)
	}
}

// TestGatewayApprovalsBoundToThePreparedPlan runs the real engine behind
// a node that accepts approvals through the OpenClaw gateway: an
// operator's allow-once runs exactly the plan the node prepared, once,
// and is in the audit with who approved; other text, cwd or environment,
// a replay, or a plan the node never prepared is refused; allow-always
// adds nothing to the allowlist unless the node lets its gateway widen
// its policy; a node that does not accept gateway approvals says how to.
func TestGatewayApprovalsBoundToThePreparedPlan(t *testing.T) {
	const file = `{"version":1,"defaults":{"security":"allowlist","ask":"on-miss","askFallback":"deny"},"agents":{"*":{"allowlist":[{"pattern":"/bin/echo"},{"pattern":"/usr/bin/echo"}]}}}`
	type node struct {
		n     *Node
		dir   string // the node's state directory
		work  string // where its runs work: no run reaches dir
		audit []host.AuditRecord
		mu    sync.Mutex
	}
	newNodeWith := func(t *testing.T, opts Options, file string) *node {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "exec-approvals.json"), []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		eng := host.NewEngine(dir, policy.HostNode, "n")
		t.Cleanup(func() { eng.Close() })
		nd := &node{dir: dir, work: t.TempDir()}
		eng.OnAudit = func(r host.AuditRecord) {
			nd.mu.Lock()
			nd.audit = append(nd.audit, r)
			nd.mu.Unlock()
		}
		opts.StateDir, opts.Runner = dir, EngineRunner(eng)
		nd.n = newTestNode(t, opts)
		eng.Prompter = nd.n.ApprovalPrompter(nil)
		eng.OnEvent = nd.n.HostEvent
		return nd
	}
	newNode := func(t *testing.T, opts Options) *node { return newNodeWith(t, opts, file) }
	invoke := func(t *testing.T, call func(invokeRequest) invokeResult, params map[string]any) invokeResult {
		t.Helper()
		pj, _ := json.Marshal(params)
		s := string(pj)
		return call(invokeRequest{ParamsJSON: &s})
	}
	// prepare asks the node for a plan and returns the system.run params
	// OpenClaw's gateway forwards after an operator approved it.
	var prepared int
	prepareCmd := func(t *testing.T, nd *node, cwd string, argv []string, raw string, env map[string]string, decision string) map[string]any {
		t.Helper()
		params := map[string]any{"command": argv, "cwd": cwd, "agentId": "main", "sessionKey": "s", "env": env}
		if raw != "" {
			params["rawCommand"] = raw
		}
		r := invoke(t, nd.n.prepare, params)
		if !r.OK {
			t.Fatalf("prepare: %+v", r.Error)
		}
		var out prepareResult
		if err := json.Unmarshal([]byte(*r.PayloadJSON), &out); err != nil {
			t.Fatal(err)
		}
		prepared++
		return map[string]any{"command": out.Plan.Argv, "rawCommand": out.Plan.CommandText, "cwd": str(out.Plan.Cwd),
			"agentId": "main", "sessionKey": "s", "env": env, "runId": fmt.Sprintf("approval-%d", prepared), "systemRunPlan": out.Plan,
			"approved": true, "approvalDecision": decision}
	}
	prepare := func(t *testing.T, nd *node, env map[string]string, decision string) map[string]any {
		t.Helper()
		return prepareCmd(t, nd, nd.work, []string{"/bin/sh", "-lc", "id -u"}, "id -u", env, decision)
	}
	run := func(t *testing.T, nd *node, params map[string]any) invokeResult {
		t.Helper()
		return invoke(t, func(r invokeRequest) invokeResult { return nd.n.systemRun(context.Background(), r) }, params)
	}
	denied := func(t *testing.T, r invokeResult, want string) {
		t.Helper()
		if r.OK || r.Error.Code != CodeDenied || !strings.Contains(r.Error.Message, want) {
			t.Fatalf("want SYSTEM_RUN_DENIED containing %q, got %+v", want, r)
		}
	}

	t.Run("allow-once runs the prepared plan once, audited with who approved", func(t *testing.T) {
		nd := newNode(t, Options{GatewayApprovals: true})
		params := prepare(t, nd, nil, "allow-once")
		r := run(t, nd, params)
		if !r.OK {
			t.Fatalf("approved run: %+v", r.Error)
		}
		var res runResult
		if err := json.Unmarshal([]byte(*r.PayloadJSON), &res); err != nil || !res.Success || strings.TrimSpace(res.Stdout) != fmt.Sprint(os.Getuid()) {
			t.Fatalf("approved run's result %+v %v (%v)", res, str(res.Error), err)
		}
		nd.mu.Lock()
		var by []string
		for _, a := range nd.audit {
			if a.Approval != "" && a.Event == "decision" {
				by = append(by, string(a.Approval)+" "+a.DecidedBy)
			}
		}
		nd.mu.Unlock()
		if diff := cmp.Diff([]string{"allow-once OpenClaw gateway operator (approval " + params["runId"].(string) + ")"}, by); diff != "" {
			t.Errorf("audited approvals (-want +got):\n%s", diff)
		}
		denied(t, run(t, nd, params), "execution plan mismatch")
	})

	t.Run("other text, cwd or environment is refused", func(t *testing.T) {
		nd := newNode(t, Options{GatewayApprovals: true})
		for name, change := range map[string]func(p map[string]any){
			"text": func(p map[string]any) {
				pl := p["systemRunPlan"].(runPlan)
				pl.CommandText, pl.Argv = "id -u; touch x", []string{"/bin/sh", "-c", "id -u; touch x"}
				p["systemRunPlan"], p["command"], p["rawCommand"] = pl, pl.Argv, pl.CommandText
			},
			"cwd": func(p map[string]any) {
				pl := p["systemRunPlan"].(runPlan)
				other := t.TempDir()
				pl.Cwd = &other
				p["systemRunPlan"], p["cwd"] = pl, other
			},
			"loose cwd": func(p map[string]any) { p["cwd"] = "/" },
			// LANG: a shell wrapper keeps it (shellEnv), unlike most names.
			"env": func(p map[string]any) { p["env"] = map[string]string{"LANG": "POSIX"} },
		} {
			t.Run(name, func(t *testing.T) {
				params := prepare(t, nd, map[string]string{"LANG": "C"}, "allow-once")
				change(params)
				denied(t, run(t, nd, params), "execution plan mismatch")
			})
		}
		if b, _ := os.ReadFile(filepath.Join(nd.work, "x")); b != nil {
			t.Fatal("the changed text ran")
		}
	})

	t.Run("allow-always adds nothing unless the node allows remote widening", func(t *testing.T) {
		for _, widen := range []bool{false, true} {
			nd := newNode(t, Options{GatewayApprovals: true, AllowRemoteWidening: widen})
			if r := run(t, nd, prepare(t, nd, nil, "allow-always")); !r.OK {
				t.Fatalf("widen=%v: approved run: %+v", widen, r.Error)
			}
			data, _ := os.ReadFile(filepath.Join(nd.dir, "exec-approvals.json"))
			if got := strings.Contains(string(data), "/id"); got != widen {
				t.Errorf("widen=%v: id allowlisted = %v:\n%s", widen, got, data)
			}
		}
	})

	stdout := func(t *testing.T, r invokeResult) string {
		t.Helper()
		if !r.OK {
			t.Fatalf("approved run refused: %+v", r.Error)
		}
		var res runResult
		if err := json.Unmarshal([]byte(*r.PayloadJSON), &res); err != nil {
			t.Fatal(err)
		}
		if !res.Success {
			t.Errorf("approved run failed: %+v", res)
		}
		return res.Stdout
	}
	write := func(t *testing.T, path, content string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}

	// The operator approved `sh x.sh` as it was; rewritten before the run,
	// it is refused with OpenClaw's text and nothing runs. Control: the
	// same approval with the file left alone runs it.
	t.Run("a script operand changed after the approval is refused", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			argv []string
			raw  string
			full bool // security=full: the engine never asks, so only the check before the run sees it
			good string
			evil string
		}{
			{"sh under the exec tool's wrapper", []string{"/bin/sh", "-lc", "sh x.sh"}, "sh x.sh", false, "echo GOOD\n", "echo EVIL > pwned\n"},
			{"bash with an option, argv", []string{"bash", "-e", "x.sh"}, "", false, "echo GOOD\n", "echo EVIL > pwned\n"},
			{"python3 under security=full", []string{"/bin/sh", "-lc", "python3 -u x.sh"}, "python3 -u x.sh", true, "print('GOOD')\n", "open('pwned', 'w')\n"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				nd := newNode(t, Options{GatewayApprovals: true})
				if tc.full {
					nd = newNodeWith(t, Options{GatewayApprovals: true}, `{"version":1,"defaults":{"security":"full","ask":"off","askFallback":"deny"}}`)
				}
				work := t.TempDir() // the state directory is hidden from runs
				script, pwned := filepath.Join(work, "x.sh"), filepath.Join(work, "pwned")
				write(t, script, tc.good, 0o644)
				params := prepareCmd(t, nd, work, tc.argv, tc.raw, nil, "allow-once")
				preview := str(params["systemRunPlan"].(runPlan).CommandPreview)
				if !strings.Contains(preview, "script "+script+" (sha256 ") {
					t.Errorf("the plan's commandPreview does not name the bound script: %q", preview)
				}
				control := prepareCmd(t, nd, work, tc.argv, tc.raw, nil, "allow-once")
				write(t, script, tc.evil, 0o644)
				denied(t, run(t, nd, params), "SYSTEM_RUN_DENIED: approval script operand changed before execution")
				if _, err := os.Stat(pwned); err == nil {
					t.Fatal("the changed script ran")
				}
				// Control: prepared (and approved) after the change, it runs.
				write(t, script, tc.good, 0o644)
				if got := stdout(t, run(t, nd, control)); got != "GOOD\n" {
					t.Errorf("unchanged script: stdout %q", got)
				}
			})
		}
	})

	t.Run("an executable changed or a missing script created after the approval is refused", func(t *testing.T) {
		nd := newNode(t, Options{GatewayApprovals: true})
		work := t.TempDir()
		prog := filepath.Join(work, "prog")
		write(t, prog, "#!/bin/sh\necho v1\n", 0o755)
		params := prepareCmd(t, nd, work, []string{prog}, "", nil, "allow-once")
		write(t, prog, "#!/bin/sh\necho v2\n", 0o755)
		denied(t, run(t, nd, params), "executable "+prog)

		params = prepareCmd(t, nd, work, []string{"/bin/sh", "-lc", "sh later.sh"}, "sh later.sh", nil, "allow-once")
		write(t, filepath.Join(work, "later.sh"), "echo EVIL\n", 0o644)
		denied(t, run(t, nd, params), "script "+filepath.Join(work, "later.sh"))
	})

	// OpenClaw's node host runs each approval; exechost used to keep one
	// plan per identical request, so the second approved run was refused.
	t.Run("each approval is its own run, also at once", func(t *testing.T) {
		nd := newNode(t, Options{GatewayApprovals: true})
		first := prepare(t, nd, nil, "allow-once")
		second := prepare(t, nd, nil, "allow-once")
		results := make([]invokeResult, 2)
		var wg sync.WaitGroup
		for i, p := range []map[string]any{first, second} {
			wg.Add(1)
			go func() { defer wg.Done(); results[i] = run(t, nd, p) }()
		}
		wg.Wait()
		for i, r := range results {
			if got := strings.TrimSpace(stdout(t, r)); got != fmt.Sprint(os.Getuid()) {
				t.Errorf("run %d: stdout %q", i, got)
			}
		}
		// Two approvals, two runs: a third is not covered.
		denied(t, run(t, nd, first), "execution plan mismatch")
	})

	// With the node on allowlist and ask=off, a miss is denied before any
	// prompt: the operator's approval cannot change that, and the hint says
	// the node's policy decides instead of "ask a human to approve".
	t.Run("the hint names the node's policy when it denies before any prompt", func(t *testing.T) {
		nd := newNodeWith(t, Options{GatewayApprovals: true}, strings.Replace(file, `"on-miss"`, `"off"`, 1))
		r := run(t, nd, prepare(t, nd, nil, "allow-once"))
		denied(t, r, "allowlist miss")
		for _, want := range []string{"security=allowlist ask=off", "never overrides it"} {
			if !strings.Contains(r.Error.Message, want) {
				t.Errorf("hint lacks %q: %s", want, r.Error.Message)
			}
		}
		if strings.Contains(r.Error.Message, "ask a human to approve") {
			t.Errorf("hint still says to ask a human: %s", r.Error.Message)
		}
	})

	t.Run("a node that does not accept gateway approvals says how", func(t *testing.T) {
		nd := newNode(t, Options{})
		r := run(t, nd, prepare(t, nd, nil, "allow-once"))
		denied(t, r, "--approvals-route both")
	})
}

// TestHostStats: node.host.stats goes out once the handshake is done and
// again on every tick, in OpenClaw's schema (free within total, the disk
// pair together or not at all, no all-zero load).
func TestHostStats(t *testing.T) {
	total, avail := uint64(500), uint64(900)
	samples := []HostStats{
		{CPUCount: 2, LoadAverage: &[3]float64{1.5, 0.5, 0.25}, MemoryTotalBytes: 1000, MemoryFreeBytes: 400, DiskTotalBytes: &total, DiskAvailableBytes: &avail},
		{CPUCount: 0, LoadAverage: &[3]float64{}, MemoryTotalBytes: 1000, MemoryFreeBytes: 2000, DiskTotalBytes: &total},
	}
	want := []map[string]any{
		{"cpuCount": float64(2), "loadAverage": []any{1.5, 0.5, 0.25}, "memoryTotalBytes": float64(1000), "memoryFreeBytes": float64(400),
			"diskTotalBytes": float64(500), "diskAvailableBytes": float64(500)},
		{"cpuCount": float64(1), "memoryTotalBytes": float64(1000), "memoryFreeBytes": float64(1000)},
	}
	tick := make(chan time.Time)
	got := make(chan map[string]any, len(want))
	g := newFakeGateway(t, func(c *gwConn) {
		c.handshake(nil)
		for i := range want {
			m := c.read()
			if m == nil {
				return
			}
			c.send(map[string]any{"type": "res", "id": m["id"], "ok": true, "payload": map[string]any{}})
			p, _ := m["params"].(map[string]any)
			if m["method"] != MethodNodeEvent || p["event"] != EventHostStats {
				t.Errorf("want node.event %s, got %v", EventHostStats, m)
				return
			}
			var payload map[string]any
			_ = json.Unmarshal([]byte(p["payloadJSON"].(string)), &payload)
			got <- payload
			if i < len(want)-1 {
				tick <- time.Time{}
			}
		}
		for c.read() != nil {
		}
	})
	var mu sync.Mutex
	next := 0
	startNode(t, g, &fakeRunner{}, nil, func(n *Node) {
		n.opts.HostStatsTick = tick
		n.opts.SampleHostStats = func() (HostStats, error) {
			mu.Lock()
			defer mu.Unlock()
			s := samples[min(next, len(samples)-1)]
			next++
			return s, nil
		}
	})
	for i, w := range want {
		select {
		case p := <-got:
			if diff := cmp.Diff(w, p); diff != "" {
				t.Errorf("node.host.stats %d (-want +got):\n%s", i, diff)
			}
		case <-time.After(testLimit):
			t.Fatalf("node.host.stats %d never arrived", i)
		}
	}
}

// TestSampleHostStats: this machine's sample is one OpenClaw's gateway
// accepts.
func TestSampleHostStats(t *testing.T) {
	s, err := SampleHostStats()
	if runtime.GOOS != "linux" {
		if err == nil {
			t.Fatal("a sample where none is implemented")
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if s.CPUCount < 1 || s.MemoryTotalBytes == 0 || s.MemoryFreeBytes > s.MemoryTotalBytes {
		t.Errorf("sample %+v", s)
	}
	if (s.DiskTotalBytes == nil) != (s.DiskAvailableBytes == nil) || (s.DiskTotalBytes != nil && *s.DiskAvailableBytes > *s.DiskTotalBytes) {
		t.Errorf("disk %v/%v", s.DiskAvailableBytes, s.DiskTotalBytes)
	}
}
