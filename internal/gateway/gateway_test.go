package gateway_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/nodekey"
	"github.com/exechost/exechost/internal/testproc"
)

const fullConfig = `{"tools": {"exec": {"security": "full", "ask": "off"}}}`

func TestExecInProcess(t *testing.T) {
	e := newEnv(t, fullConfig)
	ok := e.addNode(t, "ok", policyFull)
	denied := e.addNode(t, "denied", policyDeny)
	agent := e.client(t, bridge.RoleAgent)

	tests := []struct {
		name     string
		p        bridge.ExecParams
		wantOut  string
		wantNode string
		wantCode string
		wantMsg  string
	}{
		{name: "gateway", p: bridge.ExecParams{Command: "echo gw", Host: "gateway"}, wantOut: "gw\n"},
		{name: "node", p: bridge.ExecParams{Command: "echo nd", Host: "node", Node: "ok"}, wantOut: "nd\n", wantNode: ok},
		{name: "node denies", p: bridge.ExecParams{Command: "echo no", Host: "node", Node: denied}, wantCode: bridge.CodeDenied, wantMsg: "SYSTEM_RUN_DISABLED: security=deny"},
		{name: "node required", p: bridge.ExecParams{Command: "echo no", Host: "node"}, wantCode: bridge.CodeNodeRequired, wantMsg: "node required"},
		{name: "sandbox not configured", p: bridge.ExecParams{Command: "echo no", Host: "sandbox"}, wantCode: bridge.CodeUnavailable, wantMsg: "sandbox backend not configured"},
		{name: "invalid host", p: bridge.ExecParams{Command: "echo no", Host: "moon"}, wantCode: bridge.CodeInvalidRequest, wantMsg: "accepted: sandbox, gateway, node"},
		{name: "empty command", p: bridge.ExecParams{Command: "  ", Host: "gateway"}, wantCode: bridge.CodeInvalidRequest},
		{name: "requested deny is stricter", p: bridge.ExecParams{Command: "echo no", Host: "gateway", Security: "deny"}, wantCode: bridge.CodeDenied, wantMsg: "SYSTEM_RUN_DISABLED: security=deny (security=deny from the exec call; hint:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := call[bridge.ExecResult](t, agent, bridge.MethodExec, tt.p)
			if tt.wantCode != "" {
				var be *bridge.Error
				if !errors.As(err, &be) || be.Code != tt.wantCode || !strings.Contains(be.Message, tt.wantMsg) {
					t.Fatalf("exec = %+v, %v; want %s containing %q", res, err, tt.wantCode, tt.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Stdout != tt.wantOut || res.NodeID != tt.wantNode || res.Status != bridge.ExecCompleted {
				t.Fatalf("exec = %+v", res)
			}
		})
	}
	if nodes, err := call[bridge.NodesResult](t, agent, bridge.MethodNodesList, nil); err != nil || len(nodes.Nodes) != 2 {
		t.Errorf("agent nodes.list (unbound: every node) = %+v, %v", nodes, err)
	}
	if _, err := call[bridge.NodesResult](t, agent, bridge.MethodNodesPending, nil); err == nil {
		t.Error("an agent may list pending nodes; only operators should")
	}
	op := e.client(t, bridge.RoleOperator)
	nodes, err := call[bridge.NodesResult](t, op, bridge.MethodNodesList, nil)
	if err != nil || len(nodes.Nodes) != 2 {
		t.Fatalf("nodes.list = %+v, %v", nodes, err)
	}
}

// TestIdempotencyKey sends the same exec twice at once with one
// idempotency key: the node runs the command once and both callers get its
// result.
func TestIdempotencyKey(t *testing.T) {
	e := newEnv(t, fullConfig)
	e.addNode(t, "only", policyFull)
	agent := e.client(t, bridge.RoleAgent)
	marker := filepath.Join(t.TempDir(), "count")
	p := bridge.ExecParams{Command: "echo ran >> " + marker + "; sleep 0.2; cat " + marker, Host: "node", IdempotencyKey: "same-key"}
	var wg sync.WaitGroup
	outs := make([]string, 2)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := call[bridge.ExecResult](t, agent, bridge.MethodExec, p)
			if err != nil {
				t.Errorf("exec %d: %v", i, err)
				return
			}
			outs[i] = res.Stdout
		}()
	}
	testproc.WaitGroup(t, &wg, "the concurrent callers")
	data, err := os.ReadFile(marker)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(data), "ran"); got != 1 {
		t.Fatalf("command ran %d times for one idempotency key", got)
	}
	if outs[0] != outs[1] || outs[0] != "ran\n" {
		t.Errorf("results differ or are wrong: %q", outs)
	}
}

func TestSessionCommandAndEvents(t *testing.T) {
	e := newEnv(t, fullConfig)
	id := e.addNode(t, "n", policyFull)
	agent := e.client(t, bridge.RoleAgent)
	if _, err := call[bridge.SessionCommandResult](t, agent, bridge.MethodSessionCommand,
		bridge.SessionCommandParams{SessionKey: "s", Text: "/exec host=node"}); err != nil {
		t.Fatal(err)
	}
	res, err := call[bridge.ExecResult](t, agent, bridge.MethodExec, bridge.ExecParams{Command: "true", SessionKey: "s"})
	if err != nil || res.NodeID != id {
		t.Fatalf("exec after /exec host=node = %+v, %v", res, err)
	}
	// The node by the name --node takes ("n"), not its 64-hex id.
	want := []string{
		"Exec started (node=n, id=" + res.RunID + ")",
		"Exec finished (node=n, id=" + res.RunID + ", code=0)",
	}
	var got []string
	for _, ev := range res.Events {
		got = append(got, ev.Text)
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("events = %q, want %q", got, want)
	}
	evs, err := call[bridge.SessionEventsResult](t, agent, bridge.MethodSessionEvents, bridge.SessionParams{SessionKey: "s"})
	if err != nil || len(evs.Events) != 0 {
		t.Errorf("session.events after delivery = %+v, %v", evs, err)
	}
}

func TestConnectRefusals(t *testing.T) {
	e := newEnv(t, fullConfig)
	tests := []struct {
		name string
		p    bridge.ConnectParams
		code string
	}{
		{"no token", bridge.ConnectParams{Role: bridge.RoleAgent}, bridge.CodeUnauthorized},
		{"wrong token", bridge.ConnectParams{Role: bridge.RoleOperator, Auth: bridge.Auth{Token: e.token + "x"}}, bridge.CodeUnauthorized},
		{"unknown role", bridge.ConnectParams{Role: "root", Auth: bridge.Auth{Token: e.token}}, bridge.CodeInvalidRequest},
		{"node without info", bridge.ConnectParams{Role: bridge.RoleNode}, bridge.CodeInvalidRequest},
		{"node with a bad id", bridge.ConnectParams{Role: bridge.RoleNode, Node: &bridge.NodeInfo{NodeID: "../etc"}}, bridge.CodeInvalidRequest},
		{"node with a forged token", bridge.ConnectParams{Role: bridge.RoleNode, Auth: bridge.Auth{Token: "ehn_x"}, Node: &bridge.NodeInfo{NodeID: "n1"}}, bridge.CodeUnauthorized},
		{"node with a bad join key", bridge.ConnectParams{Role: bridge.RoleNode, Auth: bridge.Auth{JoinKey: "ehj_x"}, Node: &bridge.NodeInfo{NodeID: "n1"}}, bridge.CodeUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, _, err := bridge.Dial(ctx, e.url, tt.p, nil, bridge.Options{})
			if err == nil {
				c.Close("unexpected")
				t.Fatal("connect succeeded")
			}
			var be *bridge.Error
			if !errors.As(err, &be) || be.Code != tt.code {
				t.Fatalf("connect error = %v, want code %s", err, tt.code)
			}
		})
	}
	t.Run("first frame not connect", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ws, _, err := websocket.Dial(ctx, e.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		if ch, err := bridge.ReadFrame(ctx, ws); err != nil || ch.Event != bridge.EventConnectChallenge {
			t.Fatalf("first frame = %+v, %v; want the connect challenge", ch, err)
		}
		f, _ := bridge.NewRequest("1", bridge.MethodExec, bridge.ExecParams{Command: "id"})
		if err := bridge.WriteFrame(ctx, ws, f); err != nil {
			t.Fatal(err)
		}
		res, err := bridge.ReadFrame(ctx, ws)
		if err != nil || res.Type != bridge.TypeRes || *res.OK || res.Error.Code != bridge.CodeInvalidRequest {
			t.Fatalf("reply to exec before connect = %+v, %v", res, err)
		}
		if _, err := bridge.ReadFrame(ctx, ws); err == nil {
			t.Error("connection stayed open after a refused handshake")
		}
	})
	t.Run("pending node may not answer invokes", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		key, _ := nodekey.Generate()
		c, res, err := bridge.Dial(ctx, e.url, bridge.ConnectParams{Role: bridge.RoleNode, Node: &bridge.NodeInfo{NodeID: key.DeviceID()}}, nil, bridge.Options{Device: key})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close("done")
		if res.Status != bridge.StatusPending {
			t.Fatalf("status = %q, want pending", res.Status)
		}
		err = c.Call(ctx, bridge.MethodInvokeResult, bridge.InvokeResult{ID: "x", OK: true}, nil)
		var be *bridge.Error
		if !errors.As(err, &be) || be.Code != bridge.CodeForbidden {
			t.Fatalf("invoke result from a pending node = %v", err)
		}
	})
}

// TestDefaultsCrossNothing checks the spec's safe defaults: with no config
// at all, host=gateway and host=node are denied at the gateway and the
// message says the built-in default decided.
func TestDefaultsCrossNothing(t *testing.T) {
	e := newEnv(t, `{}`)
	e.addNode(t, "n", policyFull)
	agent := e.client(t, bridge.RoleAgent)
	for _, h := range []string{"gateway", "node"} {
		_, err := call[bridge.ExecResult](t, agent, bridge.MethodExec, bridge.ExecParams{Command: "true", Host: h})
		var be *bridge.Error
		if !errors.As(err, &be) || be.Code != bridge.CodeDenied || !strings.Contains(be.Message, "security=deny from the built-in default") {
			t.Errorf("host=%s with no config: %v", h, err)
		}
	}
	_, err := call[bridge.ExecResult](t, agent, bridge.MethodExec, bridge.ExecParams{Command: "true"})
	var be *bridge.Error
	if !errors.As(err, &be) || !strings.Contains(be.Message, "sandbox") {
		t.Errorf("default host is not sandbox: %v", err)
	}
}

// TestFinishedTailOnce: a run's exec.finished event comes with its own
// result without the output tail when the result ends with that text (the
// agent reads it there), and keeps it when the result does not (output
// past the cap, whose tail is the end of what was dropped).
func TestFinishedTailOnce(t *testing.T) {
	e := newEnv(t, fullConfig)
	id := e.addNode(t, "n", policyFull)
	agent := e.client(t, bridge.RoleAgent)
	finished := func(res bridge.ExecResult) string {
		t.Helper()
		for _, ev := range res.Events {
			if ev.Kind == bridge.EventExecFinished && ev.RunID == res.RunID {
				return ev.Text
			}
		}
		t.Fatalf("no exec.finished event for %s in %+v", res.RunID, res.Events)
		return ""
	}
	res, err := call[bridge.ExecResult](t, agent, bridge.MethodExec, bridge.ExecParams{Command: "printf 'out\\n'; printf 'err\\n' >&2", Host: "node", Node: id, SessionKey: "tail"})
	if err != nil || res.Stdout != "out\n" || res.Stderr != "err\n" {
		t.Fatalf("exec = %+v, %v", res, err)
	}
	if got, want := finished(res), "Exec finished (node=n, id="+res.RunID+", code=0)"; got != want {
		t.Errorf("finished event with its own result = %q, want %q", got, want)
	}
	res, err = call[bridge.ExecResult](t, agent, bridge.MethodExec, bridge.ExecParams{Command: "head -c 300000 /dev/zero | tr '\\0' a; echo END", Host: "node", Node: id, SessionKey: "tail"})
	if err != nil || !res.Truncated {
		t.Fatalf("flood = truncated %v, %d bytes, %v", res.Truncated, len(res.Stdout), err)
	}
	if got := finished(res); !strings.HasSuffix(got, "aaaaEND\n") || !strings.HasPrefix(got, "Exec finished (node=n, id="+res.RunID+", code=0)\n…") {
		t.Errorf("finished event of a truncated run lost its tail: %.80q … %q", got, got[max(0, len(got)-20):])
	}
}

// TestOutputInvalidUTF8: output that is not UTF-8 (and output with the
// characters the wire escapes) reaches the agent through node and
// gateway as it always has: each invalid byte as U+FFFD, the rest as
// it was.
func TestOutputInvalidUTF8(t *testing.T) {
	e := newEnv(t, fullConfig)
	id := e.addNode(t, "n", policyFull)
	agent := e.client(t, bridge.RoleAgent)
	res, err := call[bridge.ExecResult](t, agent, bridge.MethodExec, bridge.ExecParams{
		Command: `printf 'a\377b\342\202c<&>\t"\\\001\342\200\250\n'; printf '\355\240\200' >&2`, Host: "node", Node: id, SessionKey: "utf8"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "a\uFFFDb\uFFFD\uFFFDc<&>\t\"\\\x01\u2028\n"; res.Stdout != want {
		t.Errorf("stdout = %q, want %q", res.Stdout, want)
	}
	if want := "\uFFFD\uFFFD\uFFFD"; res.Stderr != want {
		t.Errorf("stderr = %q, want %q", res.Stderr, want)
	}
}
