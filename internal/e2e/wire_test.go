package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/client"
	"github.com/exechost/exechost/internal/gateway"
	"github.com/exechost/exechost/internal/nodekey"
)

// squatter listens on a gateway's address while the gateway is down and
// records what connecting clients send. It shows showKey as its gateway
// key (a key of its own, or the real gateway's public key, which is no
// secret) and, when invoke is set, pushes a system.run at whoever answers
// its challenge, as a hostile gateway would.
type squatter struct {
	t       *testing.T
	showKey string
	invoke  *bridge.InvokeRequest

	mu      sync.Mutex
	frames  [][]byte // first frame of each connection (empty when nothing came)
	nonces  []string
	srv     *http.Server
	arrived chan struct{}
}

func newSquatter(t *testing.T, addr, showKey string, invoke *bridge.InvokeRequest) *squatter {
	t.Helper()
	s := &squatter{t: t, showKey: showKey, invoke: invoke, arrived: make(chan struct{}, 64)}
	var ln net.Listener
	// The gateway was just stopped: its port is free, but give the
	// kernel a bounded moment to release it.
	deadline := time.Now().Add(waitLong)
	for {
		var err error
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("squat %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(s.close)
	return s
}

func (s *squatter) close() { _ = s.srv.Close() }

func (s *squatter) serve(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	defer ws.CloseNow()
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	nonce := bridge.NewNonce()
	// A channel key of its own, as a gateway of this version offers.
	ck, err := bridge.NewChannelKey()
	if err != nil {
		return
	}
	ch, _ := bridge.NewEvent(bridge.EventConnectChallenge, bridge.ConnectChallenge{Nonce: nonce, GatewayKey: s.showKey, ChannelKey: ck.Public}, 0)
	if bridge.WriteFrame(ctx, ws, ch) != nil {
		return
	}
	_, data, _ := ws.Read(ctx)
	s.mu.Lock()
	s.frames = append(s.frames, data)
	s.nonces = append(s.nonces, nonce)
	s.mu.Unlock()
	if len(data) > 0 {
		f, err := bridge.DecodeFrame(data)
		var p bridge.ConnectParams
		if err == nil && bridge.Unmarshal(f.Params, &p) == nil {
			// Accept without a valid gateway signature (the squatter
			// has none) and give an order, both sealed on the channel
			// it shares with the client.
			t := bridge.Transcript{GatewayKey: s.showKey, Nonce: nonce, ClientNonce: p.ClientNonce, GatewayChannelKey: ck.Public, ClientChannelKey: p.ChannelKey}
			if sealed, err := ck.Channel(t, true); err == nil {
				ok, _ := bridge.NewResult(f.ID, bridge.ConnectResult{Protocol: bridge.ProtocolVersion, Role: bridge.RoleNode, Status: bridge.StatusPaired, GatewaySignature: "AAAA"})
				_ = sealed.WriteFrame(ctx, ws, ok)
				if s.invoke != nil {
					ev, _ := bridge.NewEvent(bridge.EventInvokeRequest, s.invoke, 1)
					_ = sealed.WriteFrame(ctx, ws, ev)
				}
			}
		}
	}
	select {
	case s.arrived <- struct{}{}:
	default:
	}
	// Hold the connection until the client gives up on it.
	_, _, _ = ws.Read(ctx)
}

func (s *squatter) recorded() ([][]byte, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.frames...), append([]string(nil), s.nonces...)
}

func (s *squatter) waitConnections(n int) {
	s.t.Helper()
	for range n {
		select {
		case <-s.arrived:
		case <-time.After(waitLong):
			s.t.Fatalf("the squatter saw fewer than %d connections in %s", n, waitLong)
		}
	}
}

// TestSquatterLearnsNothing is issue 32's first door: while the gateway is
// down, a process listening on its port (a) showing its own key receives
// nothing from the CLI, (b) showing the real gateway's key receives a
// proof it cannot replay to the real gateway and no token, and (c) cannot
// make the paired node run anything.
func TestSquatterLearnsNothing(t *testing.T) {
	c := newCluster(t, gatewayConfig)
	n := c.addNode("n1", "Node One", policyFull)
	tok := c.gatewayToken()
	gwKey, err := nodekey.Load(filepath.Join(c.gwDir, "gateway.key"))
	if err != nil {
		t.Fatal(err)
	}
	if got := readNodeJSON(t, n.dir); got.Gateway.PublicKey != gwKey.PublicKeyString() {
		t.Fatalf("the node pinned %q, want the gateway's key %q", got.Gateway.PublicKey, gwKey.PublicKeyString())
	}
	c.gw.kill(t)

	marker := filepath.Join(t.TempDir(), "squatter-ran")
	own, _ := nodekey.Generate()
	run := &bridge.InvokeRequest{ID: "evil", NodeID: n.id, Command: bridge.CmdSystemRun, TimeoutMs: 10000,
		Params: json.RawMessage(`{"command":["/usr/bin/touch","` + marker + `"],"rawCommand":"touch ` + marker + `"}`)}

	t.Run("own key: the CLI sends nothing, the node obeys nothing", func(t *testing.T) {
		s := newSquatter(t, c.addr, own.PublicKeyString(), run)
		defer s.close()
		r := c.cli("exec", "id")
		if r.code == 0 || !strings.Contains(r.stderr, "gateway identity check failed") || !strings.Contains(r.stderr, "nothing was sent") {
			t.Fatalf("exec against a squatter: %s", r)
		}
		// The node keeps retrying: two connections show it refused
		// the first and came back.
		s.waitConnections(3)
		frames, _ := s.recorded()
		for i, f := range frames {
			if len(f) != 0 {
				t.Errorf("connection %d sent %q to a server with another key", i, f)
			}
		}
		if !strings.Contains(n.p.Out.String(), "it is not this node's gateway") {
			t.Errorf("the node did not say why it refused the squatter:\n%s", n.p.Out)
		}
	})

	t.Run("real public key: a proof that cannot be replayed, no token", func(t *testing.T) {
		s := newSquatter(t, c.addr, gwKey.PublicKeyString(), run)
		defer s.close()
		r := c.cli("exec", "id")
		if r.code == 0 || !strings.Contains(r.stderr, "did not prove it holds gateway key") {
			t.Fatalf("exec against a squatter showing the real key: %s", r)
		}
		s.waitConnections(3) // the CLI's and the node's retries
		frames, _ := s.recorded()
		var connects [][]byte
		for _, f := range frames {
			if strings.Contains(string(f), tok) || strings.Contains(string(f), readNodeJSON(t, n.dir).Token) {
				t.Fatalf("a secret went on the wire: %s", f)
			}
			if len(f) > 0 {
				connects = append(connects, f)
			}
		}
		if len(connects) == 0 {
			t.Fatal("nothing to replay: no client answered the challenge")
		}
		if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the node ran the squatter's command (stat: %v)", err)
		}
		s.close()
		// The real gateway is back on its address: replay each
		// recorded connect verbatim on a fresh connection.
		c.startGateway(c.addr)
		for _, f := range connects {
			replayRefused(t, c.url, f)
		}
	})
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the node ran the squatter's command (stat: %v)", err)
	}
	// The node comes back to the real gateway once it is there.
	waitFor(t, "the node to reconnect to the real gateway", func() bool { return c.connected(n.id) })
}

// replayRefused sends a recorded connect frame to the real gateway and
// requires a refusal.
func replayRefused(t *testing.T, url string, frame []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if _, err := bridge.ReadFrame(ctx, ws); err != nil { // the challenge
		t.Fatal(err)
	}
	if err := ws.Write(ctx, websocket.MessageText, frame); err != nil {
		t.Fatal(err)
	}
	res, err := bridge.ReadFrame(ctx, ws)
	if err != nil {
		return // closed: refused
	}
	if res.OK == nil || *res.OK {
		t.Fatalf("the real gateway accepted a replayed connect %s: %+v", frame, res)
	}
	if res.Error == nil || res.Error.Code != bridge.CodeUnauthorized {
		t.Fatalf("replayed connect: %+v, want UNAUTHORIZED", res.Error)
	}
}

// credConn dials the cluster's gateway with an issued credential file.
func (c *cluster) credConn(path, role string) (*bridge.Conn, bridge.ConnectResult, error) {
	c.t.Helper()
	cf, err := bridge.ReadCredentialFile(path)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.credDial(cf, role)
}

// credDial dials the cluster's gateway with credential cf.
func (c *cluster) credDial(cf *bridge.CredentialFile, role string) (*bridge.Conn, bridge.ConnectResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	cl, err := client.Dial(ctx, c.url, client.Options{Role: role, Client: bridge.ClientInfo{Name: "e2e"},
		Auth: client.Auth{Credential: cf, GatewayKey: cf.GatewayKey}})
	if err != nil {
		return nil, bridge.ConnectResult{}, err
	}
	return cl.Conn(), cl.Connected(), nil
}

// TestAgentCredentialsSeparateAgents is issue 32's fourth door: with a
// credential per agent, the gateway takes the agent id from the
// credential, so agent a cannot drain agent b's events, read b's runs or
// connect as an operator; a revoked credential no longer connects.
func TestAgentCredentialsSeparateAgents(t *testing.T) {
	c := newCluster(t, gatewayConfig)
	c.addNode("n1", "Node One", policyFull)
	paths := map[string]string{}
	for _, a := range []string{"a", "b"} {
		r := c.cli("credentials", "issue", "agent-"+a, "--agent", a)
		if r.code != 0 {
			t.Fatalf("issue: %s", r)
		}
		paths[a] = filepath.Join(c.gwDir, "credentials", "agent-"+a+".json")
		fi, err := os.Stat(paths[a])
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("credential file %s: %v %v", paths[a], fi, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	b, res, err := c.credConn(paths["b"], bridge.RoleAgent)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close("done")
	if res.Agent != "b" {
		t.Fatalf("connect result agent %q, want b", res.Agent)
	}
	// b runs in the background; its run and events are b's.
	var started bridge.ExecResult
	if err := b.Call(ctx, bridge.MethodExec, bridge.ExecParams{Command: "echo secret-of-b", YieldMs: 1, Host: "node", SessionKey: "s"}, &started); err != nil {
		t.Fatal(err)
	}
	a, _, err := c.credConn(paths["a"], bridge.RoleAgent)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close("done")
	var be *bridge.Error
	err = a.Call(ctx, bridge.MethodSessionEvents, bridge.SessionParams{AgentID: "b", SessionKey: "s"}, &bridge.SessionEventsResult{})
	if !errors.As(err, &be) || be.Code != bridge.CodeForbidden {
		t.Fatalf("agent a draining b's events: %v, want FORBIDDEN", err)
	}
	err = a.Call(ctx, bridge.MethodExecStatus, bridge.ExecStatusParams{RunID: started.RunID, AgentID: "b", SessionKey: "s"}, &bridge.ExecStatusResult{})
	if !errors.As(err, &be) || be.Code != bridge.CodeForbidden {
		t.Fatalf("agent a reading b's run: %v, want FORBIDDEN", err)
	}
	// Without naming b, a's requests are a's: b's run is not there.
	var st bridge.ExecStatusResult
	if err := a.Call(ctx, bridge.MethodExecStatus, bridge.ExecStatusParams{RunID: started.RunID, SessionKey: "s"}, &st); err == nil {
		t.Fatalf("agent a read b's run %s: %+v", started.RunID, st)
	}
	// b still gets its own run.
	waitFor(t, "b's run to finish", func() bool {
		var st bridge.ExecStatusResult
		return b.Call(ctx, bridge.MethodExecStatus, bridge.ExecStatusParams{RunID: started.RunID, SessionKey: "s"}, &st) == nil && st.Status != "running"
	})
	if _, _, err := c.credConn(paths["a"], bridge.RoleOperator); !errors.As(err, &be) || be.Code != bridge.CodeForbidden {
		t.Fatalf("an agent credential connecting as operator: %v, want FORBIDDEN", err)
	}
	cfA, err := bridge.ReadCredentialFile(paths["a"])
	if err != nil {
		t.Fatal(err)
	}
	if r := run(t, c.gwDir, "credentials", "revoke", "agent-a"); r.code != 0 {
		t.Fatalf("revoke: %s", r)
	}
	if _, _, err := c.credDial(cfA, bridge.RoleAgent); !errors.As(err, &be) || be.Code != bridge.CodeUnauthorized {
		t.Fatalf("a revoked credential: %v, want UNAUTHORIZED", err)
	}
}

// tightenConfig configures agent "locked" with security=deny and agent
// "asker" with ask=always; the node's own file allows everything, so only
// the gateway's configuration stands between a call and a run.
const tightenConfig = `{
	"tools": {"exec": {"host": "node", "security": "full", "ask": "off"}},
	"agents": {"list": [
		{"id": "locked", "tools": {"exec": {"security": "deny"}}},
		{"id": "asker", "tools": {"exec": {"ask": "always"}}},
	]},
	"gateway": {"listen": "127.0.0.1:0"},
	"sandbox": {"backend": "none"},
}`

// TestPerCallSettingsOnlyTighten is issue 32's third door: a per-call
// security=full ask=off (the MCP tool's parameters) and a session /exec
// cannot loosen the agent's configured security or ask; /elevated is an
// operator's command, refused to agents and audited.
func TestPerCallSettingsOnlyTighten(t *testing.T) {
	c := newCluster(t, tightenConfig)
	c.addNode("n1", "Node One", policyFull)
	marker := filepath.Join(t.TempDir(), "ran")
	r := c.cli("exec", "--agent", "locked", "--security", "full", "--ask", "off", "touch "+marker)
	if r.code == 0 || !strings.Contains(r.stderr+r.stdout, "security=deny from the agent's tools.exec") {
		t.Fatalf("per-call security=full for a security=deny agent: %s", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	for _, a := range []struct{ name, role string }{{"an agent", bridge.RoleAgent}} {
		cf, _, err := gateway.IssueCredential(c.gwDir, gateway.IssueOptions{Name: "locked", Role: a.role, Agent: "locked", Out: "-"})
		if err != nil {
			t.Fatal(err)
		}
		conn, _, err := c.credDial(cf, a.role)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close("done")
		var res bridge.SessionCommandResult
		if err := conn.Call(ctx, bridge.MethodSessionCommand, bridge.SessionCommandParams{SessionKey: "s", Text: "/exec security=full ask=off"}, &res); err != nil {
			t.Fatalf("/exec: %v", err)
		}
		var be *bridge.Error
		err = conn.Call(ctx, bridge.MethodExec, bridge.ExecParams{Command: "touch " + marker, SessionKey: "s"}, &bridge.ExecResult{})
		if !errors.As(err, &be) || be.Code != bridge.CodeDenied {
			t.Fatalf("%s's /exec security=full against a security=deny agent: %v, want DENIED", a.name, err)
		}
		err = conn.Call(ctx, bridge.MethodSessionCommand, bridge.SessionCommandParams{SessionKey: "s", Text: "/elevated full"}, &res)
		if !errors.As(err, &be) || be.Code != bridge.CodeForbidden {
			t.Fatalf("%s's /elevated: %v, want FORBIDDEN", a.name, err)
		}
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the command ran (stat: %v)", err)
	}
	// An operator's /elevated loosens, and is recorded.
	op, _, _ := c.operatorConn("op") // the gateway token: an operator's credential
	defer op.Close("done")
	var res bridge.SessionCommandResult
	if err := op.Call(ctx, bridge.MethodSessionCommand, bridge.SessionCommandParams{AgentID: "locked", SessionKey: "op", Text: "/elevated full"}, &res); err != nil {
		t.Fatalf("operator /elevated: %v", err)
	}
	if !hasRecord(auditLog(t, c.gwDir), "session.elevated", "decision", "operator") {
		t.Error("the operator's /elevated was not audited")
	}
	// ask=always for "asker": ask=off per call still asks. With no
	// approver reachable the node's prompt falls back to its
	// askFallback (deny): the command does not run.
	r = c.cli("exec", "--agent", "asker", "--ask", "off", "touch "+marker)
	if r.code == 0 {
		t.Fatalf("per-call ask=off for an ask=always agent ran without asking: %s", r)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the command ran without a prompt (stat: %v)", err)
	}
}

// TestPlainWebSocketOnlyOnLoopback: a gateway refuses plain ws:// beyond
// loopback unless told (--insecure-plaintext, with a loud warning),
// clients refuse a remote ws:// URL, and `up --listen 0.0.0.0:0` works end
// to end (its own node reaches it on loopback).
func TestPlainWebSocketOnlyOnLoopback(t *testing.T) {
	dir := newStateDir(t, "gw")
	r := run(t, dir, "gateway", "--listen", "0.0.0.0:0")
	if r.code == 0 || !strings.Contains(r.stderr, "refusing to serve plain ws://") {
		t.Fatalf("gateway on 0.0.0.0 without TLS: %s", r)
	}
	r = run(t, dir, "nodes", "list", "--gateway", "ws://192.0.2.1:18789")
	if r.code == 0 || !strings.Contains(r.stderr, "refusing plain ws://") {
		t.Fatalf("client to a remote ws:// URL: %s", r)
	}
	u := startUp(t, newStateDir(t, "up"), "--listen", "0.0.0.0:0", "--insecure-plaintext")
	if !strings.Contains(u.p.Out.String(), "INSECURE") {
		t.Errorf("no loud warning for --insecure-plaintext:\n%s", u.p.Out)
	}
	if !strings.Contains(u.p.Out.String(), "\"--credential\"") {
		t.Errorf("up's MCP line does not pass the agent credential:\n%s", u.p.Out)
	}
	u.stop(t)
}

// TestJoinKeyNotInArgv: a node pairs with its join key read from a file,
// and the key is nowhere in its command line; the removed --join-key
// flag is refused with the fix.
func TestJoinKeyNotInArgv(t *testing.T) {
	c := newCluster(t, gatewayConfig)
	key := func() string {
		r := c.cli("gateway", "join-key", "--json")
		if r.code != 0 {
			t.Fatalf("join-key: %s", r)
		}
		var jk bridge.JoinKeyResult
		mustJSON(t, r.stdout, &jk)
		return jk.Key
	}
	k := key()
	f := filepath.Join(t.TempDir(), "join-key")
	writeFile(t, f, k+"\n")
	n := c.startNode("filed", "Filed", policyFull, "--join-key-file", f)
	waitFor(t, "the node to pair with its join key file", func() bool { return c.connected(n.id) })
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(n.p.Cmd.Process.Pid), "cmdline"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(cmdline), k) {
		t.Fatalf("the join key is in the node's argv: %q", cmdline)
	}
	// The removed flag is refused (exit 2) with what to use instead,
	// and the key it was given stays unused.
	k2 := key()
	r := c.cli("node", "run", "--gateway", c.url, "--join-key", k2)
	if r.code != 2 || !strings.Contains(r.stderr, "--join-key was removed") || !strings.Contains(r.stderr, "--join-key-file") {
		t.Errorf("--join-key: want exit 2 naming --join-key-file, got %s", r)
	}
	m := c.startNode("later", "Later", policyFull, "--join-key-file", keyFile(t, k2))
	waitFor(t, "the refused flag's key to still pair a node", func() bool { return c.connected(m.id) })
}
