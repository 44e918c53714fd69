package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/gateway"
	"github.com/exechost/exechost/internal/nodekey"
)

// impostor connects over the real wire as role node, as an attacker on
// the machine could: any node id, any credential it holds, its own key.
func (c *cluster) impostor(nodeID string, auth bridge.Auth, key *nodekey.Key) (*bridge.Conn, bridge.ConnectResult, error) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	conn, res, err := bridge.Dial(ctx, c.url, bridge.ConnectParams{
		Role: bridge.RoleNode, Auth: auth,
		Client: bridge.ClientInfo{Name: "impostor", Platform: runtime.GOOS},
		Node:   &bridge.NodeInfo{NodeID: nodeID, DisplayName: "impostor " + nodeID, Commands: bridge.NodeCommands},
	}, nil, bridge.Options{Device: key})
	if err == nil {
		c.t.Cleanup(func() { conn.Close("test done") })
	}
	return conn, res, err
}

func refusedWith(t *testing.T, what string, err error, code string) {
	t.Helper()
	var be *bridge.Error
	if !errors.As(err, &be) || be.Code != code {
		t.Fatalf("%s: got %v, want a refusal with code %s", what, err, code)
	}
}

// stillServes checks that the real node is connected and exec reaches it.
func (c *cluster) stillServes(t *testing.T, n *node) {
	t.Helper()
	if !c.connected(n.id) {
		t.Fatalf("%s is no longer connected", n.name)
	}
	res, r := c.execJSON("--host", "node", "--node", n.id, "echo still-"+n.name)
	if r.code != 0 || res.NodeID != n.id || !strings.Contains(res.Stdout, "still-"+n.name) {
		t.Fatalf("exec no longer reaches the real %s: %+v\n%s", n.name, res, r)
	}
	if readNodeJSON(t, n.dir).Token == "" {
		t.Fatalf("%s lost its token", n.name)
	}
}

// TestNodeIdentity drives every node-identity door with a real gateway,
// real node processes and an impostor speaking the real wire protocol.
func TestNodeIdentity(t *testing.T) {
	c := newCluster(t, gatewayConfig)

	// Interactive pairing shows the key's fingerprint on both sides.
	real := c.startNode("real", "Real", policyFull)
	waitFor(t, "real to be pending", func() bool { return c.isPending(real.id) })
	key, err := nodekey.Load(nodekey.Path(real.dir))
	if err != nil {
		t.Fatal(err)
	}
	if real.id != key.DeviceID() {
		t.Fatalf("new node id %s is not its key's device id %s", real.id, key.DeviceID())
	}
	fp := key.Fingerprint()
	waitFor(t, "the node to print its fingerprint", func() bool { return strings.Contains(real.p.Out.String(), "key fingerprint "+fp) })
	if r := c.cli("nodes", "pending"); r.code != 0 || !strings.Contains(r.stdout, fp) || !strings.Contains(r.stdout, real.id) {
		t.Fatalf("nodes pending does not show %s's fingerprint %s: %s", real.id, fp, r)
	}
	// A short id prefix could be matched by a key ground for it, so it
	// does not approve; the fingerprint the node printed does.
	if r := c.cli("nodes", "approve", real.id[:8]); r.code != 1 || !strings.Contains(r.stderr, "too short to approve") {
		t.Fatalf("approve by an 8-character prefix: %s", r)
	}
	if r := c.cli("nodes", "approve", fp); r.code != 0 || !strings.Contains(r.stdout, fp) {
		t.Fatalf("approve by fingerprint: %s", r)
	}
	waitFor(t, "real to connect", func() bool { return c.connected(real.id) })
	if l := c.nodesList("list"); len(l) != 1 || l[0].Fingerprint != fp {
		t.Fatalf("nodes list = %+v, want the fingerprint %s", l, fp)
	}
	evil, _ := nodekey.Generate()

	t.Run("join key cannot take over a paired id", func(t *testing.T) {
		r := c.cli("gateway", "join-key", "--json")
		if r.code != 0 {
			t.Fatalf("join-key: %s", r)
		}
		var jk bridge.JoinKeyResult
		mustJSON(t, r.stdout, &jk)
		_, _, err := c.impostor(real.id, bridge.Auth{JoinKey: jk.Key}, evil)
		refusedWith(t, "join key for the paired id", err, bridge.CodeUnauthorized)
		c.stillServes(t, real)
		// The refused attempt did not use up the key: a genuinely new
		// node still pairs with it.
		fresh := c.startNode("fresh", "Fresh", policyFull, "--join-key-file", keyFile(t, jk.Key))
		waitFor(t, "fresh to connect", func() bool { return c.connected(fresh.id) })
		if fresh.id == real.id {
			t.Fatal("two nodes share an id")
		}
		c.stillServes(t, real)
	})

	t.Run("valid token with the wrong key", func(t *testing.T) {
		tok := readNodeJSON(t, real.dir).Token
		_, _, err := c.impostor(real.id, bridge.Auth{Token: tok}, evil)
		refusedWith(t, "stolen token, other key", err, bridge.CodeUnauthorized)
		c.stillServes(t, real)
		if !strings.Contains(c.gw.Out.String(), "key does not match its pairing") {
			t.Errorf("the gateway did not log the mismatch:\n%s", c.gw.Out)
		}
	})

	t.Run("pending node cannot be hijacked", func(t *testing.T) {
		victim := c.startNode("victim", "Victim", policyFull)
		waitFor(t, "victim to be pending", func() bool { return c.isPending(victim.id) })
		// Same id, another key, no credential: refused, and the pending
		// entry is still the victim's.
		_, _, err := c.impostor(victim.id, bridge.Auth{}, evil)
		refusedWith(t, "pending id with another key", err, bridge.CodeUnauthorized)
		vkey, err := nodekey.Load(nodekey.Path(victim.dir))
		if err != nil {
			t.Fatal(err)
		}
		var listed bool
		for _, n := range c.nodesList("pending") {
			if n.NodeID == victim.id {
				listed = n.Fingerprint == vkey.Fingerprint()
			}
		}
		if !listed {
			t.Fatalf("pending entry for %s is gone or shows another key: %+v", victim.id, c.nodesList("pending"))
		}
		if r := c.cli("nodes", "approve", victim.id); r.code != 0 {
			t.Fatalf("approve victim: %s", r)
		}
		// The token went to the real victim process.
		waitFor(t, "victim to save its token", func() bool { return readNodeJSON(t, victim.dir).Token != "" })
		waitFor(t, "victim to connect", func() bool { return c.connected(victim.id) })
		c.stillServes(t, victim)
	})

	t.Run("unpaired impostor cannot name a paired id", func(t *testing.T) {
		_, _, err := c.impostor(real.id, bridge.Auth{}, evil)
		refusedWith(t, "pending request for a paired id", err, bridge.CodeUnauthorized)
		c.stillServes(t, real)
	})
}

// TestNodeKeyMigration: a node paired before keys existed (node.json and
// the registry without a key) keeps working; its first connect binds a
// new key, after which that key is required.
func TestNodeKeyMigration(t *testing.T) {
	c := newCluster(t, gatewayConfig)
	const legacyID = "0a1b2c3d4e5f60718293a4b5" // the old random id format
	tok := "ehn_legacy-token-for-the-migration-test-000000"
	sum := sha256.Sum256([]byte(tok))
	addr := c.addr
	c.gw.kill(t)
	reg, _ := json.Marshal(map[string]any{"version": 1, "nodes": []map[string]any{{
		"nodeId": legacyID, "displayName": "Legacy", "tokenHash": hex.EncodeToString(sum[:]), "pairedAt": 1,
	}}})
	writeFile(t, filepath.Join(c.gwDir, gateway.RegistryFile), string(reg))
	c.startGateway(addr)

	n := &node{name: "legacy", dir: newStateDir(t, "legacy")}
	writeFile(t, filepath.Join(n.dir, "exec-approvals.json"), policyFull)
	writeFile(t, filepath.Join(n.dir, "node.json"), `{"version":1,"nodeId":"`+legacyID+`","token":"`+tok+`","displayName":"Legacy","gateway":{"url":"`+c.url+`"}}`)
	n.p = start(t, n.dir, "node", "run", "--log-level", "debug")
	n.id = legacyID
	waitFor(t, "the legacy node to connect", func() bool { return c.connected(legacyID) })
	c.stillServes(t, n)
	if id := readNodeJSON(t, n.dir); id.NodeID != legacyID || id.Token != tok {
		t.Fatalf("node.json changed id or token: %+v", id)
	}
	key, err := nodekey.Load(nodekey.Path(n.dir))
	if err != nil {
		t.Fatalf("the node created no usable key: %v", err)
	}
	fi, err := os.Stat(nodekey.Path(n.dir))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("node.key: %v mode %v", err, fi.Mode())
	}
	raw, err := os.ReadFile(filepath.Join(c.gwDir, gateway.RegistryFile))
	if err != nil || !strings.Contains(string(raw), key.PublicKeyString()) {
		t.Fatalf("the registry did not bind the key: %s %v", raw, err)
	}
	// Now the key is required: the same valid token with another key is
	// refused, and the real node keeps serving.
	evil, _ := nodekey.Generate()
	_, _, err = c.impostor(legacyID, bridge.Auth{Token: tok}, evil)
	refusedWith(t, "legacy token with another key after migration", err, bridge.CodeUnauthorized)
	c.stillServes(t, n)
	// And a restart of the node (same key) still connects.
	n.p.kill(t)
	n.p = start(t, n.dir, "node", "run", "--log-level", "debug")
	waitFor(t, "the migrated node to reconnect", func() bool { return c.connected(legacyID) })
	c.stillServes(t, n)
}

// TestPendingLimitPerAddress: one address cannot fill the pending slots.
// A real node arriving while they are full is refused (and retries); once
// the operator clears a slot it gets in.
func TestPendingLimitPerAddress(t *testing.T) {
	c := newCluster(t, gatewayConfig)
	var first string
	for i := range gateway.MaxPendingPerAddr {
		k, _ := nodekey.Generate()
		if _, res, err := c.impostor(k.DeviceID(), bridge.Auth{}, k); err != nil || res.Status != bridge.StatusPending {
			t.Fatalf("pending #%d: %+v %v", i, res, err)
		}
		if i == 0 {
			first = k.DeviceID()
		}
		waitFor(t, "the gateway to file it", func() bool { return len(c.nodesList("pending")) == i+1 })
	}
	k, _ := nodekey.Generate()
	_, _, err := c.impostor(k.DeviceID(), bridge.Auth{}, k)
	refusedWith(t, "one pending node too many from one address", err, bridge.CodeBusy)

	real := c.startNode("late", "Late", policyFull)
	waitFor(t, "the real node to be told the slots are full", func() bool { return strings.Contains(real.p.Out.String(), "too many nodes") })
	if got := len(c.nodesList("pending")); got != gateway.MaxPendingPerAddr {
		t.Fatalf("%d pending, want the limit %d", got, gateway.MaxPendingPerAddr)
	}
	if r := c.cli("nodes", "reject", first); r.code != 0 {
		t.Fatalf("reject: %s", r)
	}
	waitFor(t, "the real node to get the freed slot", func() bool { return c.isPending(real.id) })
}

// TestGatewayOriginPolicy: a DNS-rebinding page (its own name in Host, a
// matching Origin) is refused before the upgrade; a page on a loopback
// origin is allowed (it still needs credentials for anything but a
// pending slot).
func TestGatewayOriginPolicy(t *testing.T) {
	c := newCluster(t, gatewayConfig)
	port := c.addr[strings.LastIndex(c.addr, ":")+1:]
	dial := func(host, origin string) (*websocket.Conn, *http.Response, error) {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		h := http.Header{}
		h.Set("Origin", origin)
		return websocket.Dial(ctx, c.url, &websocket.DialOptions{HTTPHeader: h, Host: host})
	}
	for _, tt := range []struct{ name, host, origin string }{
		{"rebinding: Origin equals Host", "rebind.example:" + port, "http://rebind.example:" + port},
		{"foreign origin", "", "http://rebind.example:" + port},
	} {
		ws, resp, err := dial(tt.host, tt.origin)
		if err == nil {
			ws.CloseNow()
			t.Fatalf("%s: upgrade accepted", tt.name)
		}
		if resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("%s: %v %v, want 403", tt.name, resp, err)
		}
	}
	ws, _, err := dial("", "http://127.0.0.1:3000")
	if err != nil {
		t.Fatalf("loopback origin refused: %v", err)
	}
	defer ws.CloseNow()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if f, err := bridge.ReadFrame(ctx, ws); err != nil || f.Event != bridge.EventConnectChallenge {
		t.Fatalf("loopback origin: first frame %+v, %v", f, err)
	}
	if !strings.Contains(c.gw.Out.String(), "refused websocket upgrade") {
		t.Error("the gateway did not log the refusals")
	}
}
