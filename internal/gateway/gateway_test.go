package gateway_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/exechost/exechost/internal/bridge"
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
		{name: "requested deny is stricter", p: bridge.ExecParams{Command: "echo no", Host: "gateway", Security: "deny"}, wantCode: bridge.CodeDenied, wantMsg: "SYSTEM_RUN_DISABLED"},
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
	if _, err := call[bridge.NodesResult](t, agent, bridge.MethodNodesList, nil); err == nil {
		t.Error("an agent may list nodes; only operators should")
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
	wg.Wait()
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
	want := []string{
		"Exec started (node=" + id + ", id=" + res.RunID + ")",
		"Exec finished (node=" + id + ", id=" + res.RunID + ", code=0)",
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
