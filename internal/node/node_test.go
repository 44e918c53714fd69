package node

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/nodekey"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
)

func TestIdentityRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	id, err := LoadIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A fresh identity has no id yet: New derives it from the key.
	if id.NodeID != "" || id.Version != IdentityVersion {
		t.Fatalf("fresh identity = %+v", id)
	}
	if _, err := os.Stat(IdentityPath(dir)); !os.IsNotExist(err) {
		t.Fatalf("LoadIdentity wrote node.json: %v", err)
	}
	id.NodeID, id.Token, id.Gateway.URL = "n1", "ehn_x", "ws://127.0.0.1:1"
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
	r, err := New(Options{StateDir: dir, GatewayURL: "ws://127.0.0.1:1", AllowRemoteWidening: true})
	if err != nil {
		t.Fatal(err)
	}
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
		return r.approvalsSet(context.Background(), p)
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

// TestApprovalsSetOnlyTightens: the gateway may tighten a node's policy,
// but a change that allows more is written only with the node's consent
// (AllowRemoteWidening, or its approver confirming), and the refusal
// names each widening and how to apply it; nothing is written.
func TestApprovalsSetOnlyTightens(t *testing.T) {
	const (
		start   = `{"version":1,"defaults":{"security":"allowlist","ask":"on-miss","askFallback":"deny"},"agents":{"*":{"allowlist":[{"pattern":"/usr/bin/git"}]}}}`
		tighter = `{"version":1,"defaults":{"security":"allowlist","ask":"always","askFallback":"deny"},"agents":{}}`
		wider   = `{"version":1,"defaults":{"security":"full","ask":"on-miss","askFallback":"deny"},"agents":{"*":{"allowlist":[{"pattern":"/usr/bin/git"},{"pattern":"/usr/bin/curl"}]}}}`
	)
	type asked struct{ req prompt.Request }
	tests := []struct {
		name     string
		allow    bool
		answer   policy.Approval // "" = no approver; "unreachable" = it cannot be asked
		file     string
		wantOK   bool
		wantText []string
		wantAsk  bool
	}{
		{name: "tighten", file: tighter, wantOK: true},
		{name: "widen without consent", file: wider, wantText: []string{
			"may only tighten", "agents.*.security allowlist→full", `agents.*.allowlist +"/usr/bin/curl"`,
			"--allow-remote-widening", "exechost approvals set --file F", "exechost approver"}},
		{name: "widen, node opted in", allow: true, file: wider, wantOK: true},
		{name: "widen, approver confirms", answer: policy.AllowOnce, file: wider, wantOK: true, wantAsk: true},
		{name: "widen, approver denies", answer: policy.Reject, file: wider, wantAsk: true, wantText: []string{"denied it", "approver (tui)"}},
		{name: "widen, approver unreachable", answer: "unreachable", file: wider, wantAsk: true, wantText: []string{"could not confirm", "no approver", "--allow-remote-widening"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			st := approvals.NewStore(dir)
			if _, err := st.Ensure(); err != nil {
				t.Fatal(err)
			}
			base, err := st.Update(func(f *approvals.File) error {
				next, err := approvals.Parse("start", []byte(start))
				f.Replace(next)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			var got []asked
			opts := Options{StateDir: dir, GatewayURL: "ws://127.0.0.1:1", AllowRemoteWidening: tt.allow}
			if tt.answer != "" {
				opts.ConfirmWidening = func(_ context.Context, req prompt.Request) (policy.Approval, string, error) {
					got = append(got, asked{req})
					if tt.answer == "unreachable" {
						return "", "", errors.New("no approver on the socket")
					}
					return tt.answer, "tui", nil
				}
			}
			r, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			p, _ := json.Marshal(bridge.ApprovalsSetParams{File: json.RawMessage(tt.file), BaseHash: base.Hash()})
			res := r.approvalsSet(context.Background(), p)
			if res.OK != tt.wantOK {
				t.Fatalf("ok = %v, want %v: %+v", res.OK, tt.wantOK, res.Error)
			}
			now, err := st.Load()
			if err != nil {
				t.Fatal(err)
			}
			if !tt.wantOK {
				if res.Error.Code != bridge.CodeForbidden {
					t.Errorf("code = %s, want %s", res.Error.Code, bridge.CodeForbidden)
				}
				for _, w := range tt.wantText {
					if !strings.Contains(res.Error.Message, w) {
						t.Errorf("refusal %q does not say %q", res.Error.Message, w)
					}
				}
				if now.Hash() != base.Hash() {
					t.Error("a refused change was written")
				}
			} else if now.Hash() == base.Hash() {
				t.Error("an accepted change was not written")
			}
			if (len(got) > 0) != tt.wantAsk {
				t.Fatalf("approver asked %d times, want asked=%v", len(got), tt.wantAsk)
			}
			if tt.wantAsk {
				req := got[0].req
				if req.Reason != approvals.ReasonPolicyWidening || !strings.Contains(req.Command, "agents.*.security allowlist→full") ||
					!slices.Equal(req.Choices, []string{"allow-once", "deny"}) {
					t.Errorf("prompt = %+v", req)
				}
			}
		})
	}
}

// TestNodeIDFromKey: an unpaired node's id is its key's device id (so it
// can only ever claim an id it can prove); a node paired before keys
// existed keeps its id and token, and gets a key to bind on its next
// connect; the key survives restarts.
func TestNodeIDFromKey(t *testing.T) {
	t.Run("new node", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "state")
		r, err := New(Options{StateDir: dir, GatewayURL: "ws://127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		k, created, err := nodekey.LoadOrCreate(dir)
		if err != nil || created {
			t.Fatalf("node.key not created by New: created=%v err=%v", created, err)
		}
		if r.NodeID() != k.DeviceID() || r.Fingerprint() != k.Fingerprint() {
			t.Fatalf("node id %s, fingerprint %s; key %s %s", r.NodeID(), r.Fingerprint(), k.DeviceID(), k.Fingerprint())
		}
		again, err := New(Options{StateDir: dir})
		if err != nil || again.NodeID() != r.NodeID() {
			t.Fatalf("restart changed the id: %v %v", again, err)
		}
	})
	t.Run("legacy paired node keeps its id", func(t *testing.T) {
		dir := t.TempDir()
		legacy := `{"version":1,"nodeId":"0a1b2c3d4e5f60718293a4b5","token":"ehn_old","displayName":"old","gateway":{"url":"ws://127.0.0.1:1"}}`
		if err := os.WriteFile(IdentityPath(dir), []byte(legacy), 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := New(Options{StateDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if r.NodeID() != "0a1b2c3d4e5f60718293a4b5" {
			t.Fatalf("legacy id replaced by %s", r.NodeID())
		}
		id, err := LoadIdentity(dir)
		if err != nil || id.Token != "ehn_old" {
			t.Fatalf("legacy token lost: %+v %v", id, err)
		}
		if _, err := os.Stat(nodekey.Path(dir)); err != nil {
			t.Fatalf("no key generated for the legacy node: %v", err)
		}
	})
	t.Run("legacy unpaired node takes its key's id", func(t *testing.T) {
		dir := t.TempDir()
		legacy := `{"version":1,"nodeId":"0a1b2c3d4e5f60718293a4b5","displayName":"old","gateway":{"url":"ws://127.0.0.1:1"}}`
		if err := os.WriteFile(IdentityPath(dir), []byte(legacy), 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := New(Options{StateDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		k, _, _ := nodekey.LoadOrCreate(dir)
		if r.NodeID() != k.DeviceID() {
			t.Fatalf("unpaired legacy node id %s, want its device id %s", r.NodeID(), k.DeviceID())
		}
	})
	t.Run("damaged key is an error, never replaced", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(nodekey.Path(dir), []byte("junk"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := New(Options{StateDir: dir, GatewayURL: "ws://127.0.0.1:1"}); err == nil || !strings.Contains(err.Error(), "node.key") {
			t.Fatalf("New with a damaged key: %v", err)
		}
		if b, _ := os.ReadFile(nodekey.Path(dir)); string(b) != "junk" {
			t.Fatal("damaged key overwritten")
		}
	})
}
