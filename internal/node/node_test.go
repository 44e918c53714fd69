package node

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/bridge"
)

func TestIdentityRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	id, err := LoadIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	if id.NodeID == "" || id.Version != IdentityVersion {
		t.Fatalf("fresh identity = %+v", id)
	}
	if _, err := os.Stat(IdentityPath(dir)); !os.IsNotExist(err) {
		t.Fatalf("LoadIdentity wrote node.json: %v", err)
	}
	id.Token, id.Gateway.URL = "ehn_x", "ws://127.0.0.1:1"
	if err := id.Save(dir); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(IdentityPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("node.json mode %o, want 600", fi.Mode().Perm())
	}
	back, err := LoadIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(id, back); diff != "" {
		t.Errorf("reloaded identity (-want +got):\n%s", diff)
	}
}

func TestIdentityErrors(t *testing.T) {
	for name, content := range map[string]string{
		"bad json":    `{`,
		"bad version": `{"version":2,"nodeId":"x"}`,
		"no id":       `{"version":1}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(IdentityPath(dir), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadIdentity(dir); err == nil || !strings.Contains(err.Error(), "node.json") {
				t.Errorf("LoadIdentity(%s) = %v, want an error naming node.json", content, err)
			}
		})
	}
}

func TestNewGatewayChangeDropsToken(t *testing.T) {
	dir := t.TempDir()
	id := &Identity{Version: 1, NodeID: "abc", Token: "ehn_old", Gateway: IdentityGateway{URL: "ws://a", TLSFingerprint: "ff"}}
	if err := id.Save(dir); err != nil {
		t.Fatal(err)
	}
	r, err := New(Options{StateDir: dir, GatewayURL: "ws://b"})
	if err != nil {
		t.Fatal(err)
	}
	if r.id.Token != "" || r.id.Gateway.TLSFingerprint != "" || r.id.Gateway.URL != "ws://b" {
		t.Errorf("identity after a gateway change = %+v; a token belongs to the gateway that issued it", r.id)
	}
	if _, err := New(Options{StateDir: t.TempDir()}); err == nil {
		t.Error("New without any gateway URL succeeded")
	}
}

func TestIdemCache(t *testing.T) {
	c := newIdemCache(2)
	a, first := c.begin("a")
	if !first {
		t.Fatal("first begin(a) not first")
	}
	if again, first := c.begin("a"); first || again != a {
		t.Fatal("second begin(a) would run the command again")
	}
	// "a" is in flight: filling the cache must not forget it.
	b, _ := c.begin("b")
	c.finish(b, bridge.InvokeResult{OK: true})
	c.begin("c")
	c.begin("d")
	if _, first := c.begin("a"); first {
		t.Fatal("an in-flight entry was evicted")
	}
	c.finish(a, bridge.InvokeResult{OK: true, Payload: json.RawMessage(`1`)})
	if _, first := c.begin("b"); !first {
		t.Error("a finished entry beyond the bound was kept")
	}
}

func TestNormalizeFingerprint(t *testing.T) {
	for in, want := range map[string]string{
		"AB:CD:EF":      "abcdef",
		"sha256:ABCDEF": "abcdef",
		" abcdef ":      "abcdef",
	} {
		if got := normalizeFingerprint(in); got != want {
			t.Errorf("normalizeFingerprint(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestApprovalsGetSet(t *testing.T) {
	dir := t.TempDir()
	st := approvals.NewStore(dir)
	orig, err := st.Ensure()
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{opts: Options{StateDir: dir}}
	got := r.approvalsGet()
	if !got.OK {
		t.Fatalf("get: %+v", got.Error)
	}
	var view bridge.ApprovalsGetResult
	if err := json.Unmarshal(got.Payload, &view); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(view.File), orig.Socket.Token) {
		t.Fatal("get exposed the socket token")
	}
	set := func(file, base string) bridge.InvokeResult {
		p, _ := json.Marshal(bridge.ApprovalsSetParams{File: json.RawMessage(file), BaseHash: base})
		return r.approvalsSet(p)
	}
	evil := `{"version":1,"socket":{"path":"/tmp/evil.sock","token":"stolen"},"defaults":{"security":"full"}}`
	if res := set(evil, "not-the-hash"); res.OK || res.Error.Code != bridge.CodeStale {
		t.Fatalf("set with a wrong base hash = %+v", res)
	}
	if res := set(evil, view.Hash); !res.OK {
		t.Fatalf("set with the right base hash: %+v", res.Error)
	}
	now, err := st.Load()
	if err != nil {
		t.Fatal(err)
	}
	if now.Defaults.Security != "full" {
		t.Errorf("security = %q, want the sent value", now.Defaults.Security)
	}
	if now.Socket.Token != orig.Socket.Token || now.Socket.Path != orig.Socket.Path {
		t.Errorf("socket = %+v, want the node's own %+v", now.Socket, orig.Socket)
	}
	if res := set(`{"version":1,`, view.Hash); res.OK || res.Error.Code != bridge.CodeInvalidRequest {
		t.Errorf("set of a broken file = %+v", res)
	}
}
