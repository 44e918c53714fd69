package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/client"
	"github.com/exechost/exechost/internal/gateway"
)

func TestPairingRejectJoinKeyRevoke(t *testing.T) {
	c := newCluster(t, gatewayConfig)

	t.Run("reject", func(t *testing.T) {
		n := c.startNode("rej", "Rejected", policyFull)
		waitFor(t, "pending", func() bool { return c.isPending(n.id) })
		// The node chose its display name; approving by it is refused.
		if r := c.cli("nodes", "approve", "Rejected"); r.code != 1 || !strings.Contains(r.stderr, "no pending node") {
			t.Fatalf("approve by display name: %s", r)
		}
		if r := c.cli("nodes", "reject", n.id[:8]); r.code != 0 {
			t.Fatalf("reject: %s", r)
		}
		err := n.p.wait(t, "rejected node")
		if err == nil || !strings.Contains(n.p.Out.String(), "rejected") {
			t.Fatalf("rejected node: err=%v output:\n%s", err, n.p.Out)
		}
		if readNodeJSON(t, n.dir).Token != "" {
			t.Error("rejected node got a token")
		}
		if len(c.nodesList("list")) != 0 {
			t.Errorf("paired nodes after reject: %+v", c.nodesList("list"))
		}
	})

	t.Run("approve unknown", func(t *testing.T) {
		if r := c.cli("nodes", "approve", "nosuchnode"); r.code != 1 || !strings.Contains(r.stderr, "no pending node") {
			t.Fatalf("approve unknown: %s", r)
		}
	})

	var joined *node
	t.Run("join key pairs once", func(t *testing.T) {
		r := c.cli("gateway", "join-key", "--ttl", "10m", "--json")
		if r.code != 0 {
			t.Fatalf("join-key: %s", r)
		}
		var jk bridge.JoinKeyResult
		mustJSON(t, r.stdout, &jk)
		joined = c.startNode("joined", "Headless", policyFull, "--join-key-file", keyFile(t, jk.Key))
		waitFor(t, "joined node to connect", func() bool { return c.connected(joined.id) })
		// Listed before it has read its answer: the token follows.
		waitFor(t, "join key pairing to save a token", func() bool { return readNodeJSON(t, joined.dir).Token != "" })
		tok := readNodeJSON(t, joined.dir).Token
		// Tokens are stored hashed on the gateway.
		reg, err := os.ReadFile(filepath.Join(c.gwDir, gateway.RegistryFile))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(reg), tok) || strings.Contains(string(reg), jk.Key) {
			t.Error("the registry holds a token or join key in clear")
		}
		again := c.startNode("again", "Second", policyFull, "--join-key-file", keyFile(t, jk.Key))
		if err := again.p.wait(t, "node reusing a join key"); err == nil || !strings.Contains(again.p.Out.String(), "join key") {
			t.Fatalf("reused join key: err=%v output:\n%s", err, again.p.Out)
		}
		res, r2 := c.execJSON("--host", "node", "--node", "headless", "echo joined")
		if r2.code != 0 || res.NodeID != joined.id {
			t.Fatalf("exec on joined node: %+v\n%s", res, r2)
		}
	})

	t.Run("remove revokes at once", func(t *testing.T) {
		if r := c.cli("nodes", "remove", joined.id); r.code != 0 {
			t.Fatalf("remove: %s", r)
		}
		err := joined.p.wait(t, "removed node")
		if err == nil || !strings.Contains(joined.p.Out.String(), "token") {
			t.Fatalf("removed node: err=%v output:\n%s", err, joined.p.Out)
		}
		_, r := c.execJSON("--host", "node", "--node", joined.id, "echo gone")
		if r.code != 1 || !strings.Contains(r.stderr, "no node matches") {
			t.Fatalf("exec on removed node: %s", r)
		}
		// The old token no longer connects, even by hand.
		p := start(t, joined.dir, "node", "run")
		if err := p.wait(t, "node with a revoked token"); err == nil {
			t.Fatalf("node with a revoked token kept running:\n%s", p.Out)
		}
	})

	t.Run("bad gateway token", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		for _, role := range []string{bridge.RoleAgent, bridge.RoleOperator} {
			_, _, err := bridge.Dial(ctx, c.url, bridge.ConnectParams{Role: role, Auth: bridge.Auth{Token: "ehg_wrong"}}, nil, bridge.Options{})
			var be *bridge.Error
			if !errors.As(err, &be) || be.Code != bridge.CodeUnauthorized {
				t.Errorf("role %s with a wrong token: %v", role, err)
			}
		}
		// A paired-but-pending node may not call node methods.
		_, _, err := bridge.Dial(ctx, c.url, bridge.ConnectParams{Role: "admin"}, nil, bridge.Options{})
		if err == nil {
			t.Error("unknown role accepted")
		}
	})

	t.Run("cross-origin browser refused", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		h := http.Header{}
		h.Set("Origin", "https://evil.example")
		_, resp, err := websocket.Dial(ctx, c.url, &websocket.DialOptions{HTTPHeader: h})
		if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("cross-origin upgrade: err=%v resp=%v", err, resp)
		}
	})
}

func TestBindingReloadRestartApprovals(t *testing.T) {
	c := newCluster(t, gatewayConfig)
	build := c.addNode("n1", "Build Box", policyFull)
	laptop := c.addNode("n2", "Laptop", policyAllowlist)

	t.Run("binding via SIGHUP reload", func(t *testing.T) {
		writeFile(t, filepath.Join(c.gwDir, "exechost.json"), `{
			"tools": {"exec": {"security": "full", "ask": "off"}},
			"sandbox": {"backend": "none"},
			"agents": {"list": [{"id": "bound", "tools": {"exec": {"host": "node", "node": "build-box"}}}]},
		}`)
		c.gw.signal(syscall.SIGHUP)
		waitFor(t, "reload", func() bool { return strings.Contains(c.gw.Out.String(), "configuration reloaded") })
		res, r := c.execJSON("--agent", "bound", "echo bound")
		if r.code != 0 || res.NodeID != build.id {
			t.Fatalf("bound agent without node: %+v\n%s", res, r)
		}
		res, r = c.execJSON("--agent", "bound", "--node", build.id[:6], "echo same")
		if r.code != 0 || res.NodeID != build.id {
			t.Fatalf("bound agent naming its node by prefix: %+v\n%s", res, r)
		}
		_, r = c.execJSON("--agent", "bound", "--node", "laptop", "echo other")
		if r.code != 126 || !strings.Contains(r.stderr, "is bound to node "+build.id) {
			t.Fatalf("bound agent asking for another node: %s", r)
		}
	})

	t.Run("bad reload keeps the old config", func(t *testing.T) {
		writeFile(t, filepath.Join(c.gwDir, "exechost.json"), `{"tools": {"exec": {"hots": "node"}}}`)
		c.gw.signal(syscall.SIGHUP)
		waitFor(t, "reload failure", func() bool { return strings.Contains(c.gw.Out.String(), "tools.exec.hots: unknown key") })
		res, r := c.execJSON("--agent", "bound", "echo still-bound")
		if r.code != 0 || res.NodeID != build.id {
			t.Fatalf("after a bad reload: %+v\n%s", res, r)
		}
	})

	t.Run("approvals get/set on a node with a stale base hash", func(t *testing.T) {
		r := c.cli("approvals", "get", "--node", "laptop", "--json")
		if r.code != 0 {
			t.Fatalf("approvals get --node: %s", r)
		}
		var view struct {
			Hash string `json:"hash"`
		}
		mustJSON(t, r.stdout, &view)
		if view.Hash == "" {
			t.Fatalf("no hash in %s", r.stdout)
		}
		localToken := localSocketToken(t, laptop.dir)
		if strings.Contains(r.stdout, localToken) {
			t.Fatal("remote get exposed the socket token")
		}
		// A local edit on the node after the remote read.
		if r := run(t, laptop.dir, "approvals", "allowlist", "add", "/usr/bin/id"); r.code != 0 {
			t.Fatalf("local allowlist add: %s", r)
		}
		conn := dialOperator(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		next := []byte(policyDeny)
		if _, err := bridge.NodeApprovalsSet(ctx, conn, "laptop", next, view.Hash); !errors.Is(err, bridge.ErrStaleApprovals) {
			t.Fatalf("set with a stale base hash: %v", err)
		}
		cur, err := bridge.NodeApprovalsGet(ctx, conn, "laptop")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(cur.File), "/usr/bin/id") {
			t.Fatalf("the local edit was lost: %s", cur.File)
		}
		if _, err := bridge.NodeApprovalsSet(ctx, conn, "laptop", next, cur.Hash); err != nil {
			t.Fatalf("set with the current hash: %v", err)
		}
		_, r = c.execJSON("--host", "node", "--node", "laptop", "/usr/bin/true")
		if r.code != 126 || !strings.Contains(r.stderr, "SYSTEM_RUN_DISABLED") {
			t.Fatalf("exec after remote set to deny: %s", r)
		}
		if got := localSocketToken(t, laptop.dir); got != localToken {
			t.Error("remote set changed the node's socket token")
		}
		// The CLI path (base = the node's current file): the gateway may
		// not widen the node's policy back (the node did not opt in and
		// has no approver to confirm); the node itself may.
		f := filepath.Join(t.TempDir(), "p.json")
		writeFile(t, f, policyAllowlist)
		r = c.cli("approvals", "set", "--node", "laptop", "--file", f)
		if r.code == 0 || !strings.Contains(r.stderr, "may only tighten") || !strings.Contains(r.stderr, "agents.*.security deny→allowlist") ||
			!strings.Contains(r.stderr, "--allow-remote-widening") {
			t.Fatalf("approvals set --node that widens: %s", r)
		}
		if r := c.cli("approvals", "get", "--node", "laptop", "--json"); !strings.Contains(r.stdout, `"deny"`) || strings.Contains(r.stdout, "/usr/bin/true") {
			t.Fatalf("a refused widening changed the node's file: %s", r)
		}
		if _, r := c.execJSON("--host", "node", "--node", "laptop", "/usr/bin/true"); r.code != 126 {
			t.Fatalf("exec after a refused widening: %s", r)
		}
		if r := run(t, laptop.dir, "approvals", "set", "--file", f); r.code != 0 {
			t.Fatalf("approvals set on the node itself: %s", r)
		}
		if _, r := c.execJSON("--host", "node", "--node", "laptop", "/usr/bin/true"); r.code != 0 {
			t.Fatalf("exec after approvals set --node: %s", r)
		}
	})

	t.Run("gateway restart: nodes come back", func(t *testing.T) {
		addr := c.addr
		c.gw.kill(t)
		// The bad file from the previous step would (rightly) stop the
		// gateway from starting at all.
		writeFile(t, filepath.Join(c.gwDir, "exechost.json"), gatewayConfig)
		c.startGateway(addr)
		for _, n := range []*node{build, laptop} {
			waitFor(t, n.name+" to reconnect", func() bool { return c.connected(n.id) })
		}
		res, r := c.execJSON("--host", "node", "--node", "build box", "echo back")
		if r.code != 0 || res.NodeID != build.id {
			t.Fatalf("exec after restart: %+v\n%s", res, r)
		}
	})
}

func localSocketToken(t *testing.T, dir string) string {
	t.Helper()
	f, err := approvals.NewStore(dir).Load()
	if err != nil {
		t.Fatal(err)
	}
	return f.Socket.Token
}

func dialOperator(t *testing.T, c *cluster) *bridge.Conn {
	t.Helper()
	auth, err := client.StateDirAuth(c.gwDir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	cl, err := client.Dial(ctx, c.url, client.Options{Role: bridge.RoleOperator, Auth: auth,
		Client: bridge.ClientInfo{Name: "e2e", Platform: runtime.GOOS}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close("test done") })
	return cl.Conn()
}

func TestTLSPinning(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM, fp := selfSigned(t)
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeFile(t, cert, string(certPEM))
	writeFile(t, key, string(keyPEM))
	cfg := `{"tools": {"exec": {"security": "full", "ask": "off"}}, "sandbox": {"backend": "none"},
		"gateway": {"listen": "127.0.0.1:0", "tls": {"cert": "` + cert + `", "key": "` + key + `"}}}`
	c := newCluster(t, cfg)
	if !strings.HasPrefix(c.url, "wss://") {
		t.Fatalf("gateway url %s, want wss://", c.url)
	}
	r := c.cli("gateway", "join-key", "--json")
	if r.code == 0 {
		// The CLI verifies certificates normally; a self-signed one is
		// refused, which is the safe default for clients.
		t.Fatalf("join-key over wss with an untrusted certificate succeeded: %s", r)
	}
	t.Setenv("EXECHOST_TLS_FINGERPRINT", fp)
	if r := run(t, c.gwDir, "nodes", "list", "--json", "--gateway", c.url); r.code != 0 {
		t.Fatalf("nodes list with %s pinned: %s", fp, r)
	}
	n := c.startNode("tls", "TLS Node", policyFull)
	waitFor(t, "pending over wss", func() bool { return strings.Contains(c.gw.Out.String(), "node waiting for approval") })
	waitFor(t, "the node to pin the fingerprint", func() bool { return readNodeJSON(t, n.dir).Gateway.TLSFingerprint != "" })
	if got := readNodeJSON(t, n.dir).Gateway.TLSFingerprint; got != fp {
		t.Fatalf("pinned fingerprint %q, want %q", got, fp)
	}
	n.p.kill(t)
	// A wrong pin refuses to connect and stops.
	bad := newStateDir(t, "badpin")
	p := start(t, bad, "node", "run", "--gateway", c.url, "--tls-fingerprint", strings.Repeat("ab", 32))
	if err := p.wait(t, "node with a wrong pin"); err == nil || !strings.Contains(p.Out.String(), "pinned") {
		t.Fatalf("wrong pin: err=%v output:\n%s", err, p.Out)
	}
}

func selfSigned(t *testing.T) (certPEM, keyPEM []byte, fingerprint string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "exechost test gateway"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(der)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}),
		hex.EncodeToString(sum[:])
}
