package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/gateway"
)

// twoAgentsConfig: agent "main" may run anything on the gateway host,
// agent "ci" nothing.
const twoAgentsConfig = `{
	"tools": {"exec": {"host": "gateway", "security": "full", "ask": "off"}},
	"agents": {"list": [{"id": "ci", "tools": {"exec": {"security": "deny"}}}]},
}`

// memAudit keeps the gateway's records in memory.
type memAudit struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (m *memAudit) Record(r audit.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = append(m.recs, r)
	return nil
}

func (m *memAudit) find(pred func(audit.Record) bool) (audit.Record, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.recs {
		if pred(r) {
			return r, true
		}
	}
	return audit.Record{}, false
}

// agentConn dials with a credential issued for agent.
func agentConn(t *testing.T, e *env, dir, agent string) *bridge.Conn {
	t.Helper()
	cf, _, err := gateway.IssueCredential(dir, gateway.IssueOptions{Name: agent, Role: bridge.RoleAgent, Agent: agent, Out: "-"})
	if err != nil {
		t.Fatal(err)
	}
	return credConn(t, e, cf)
}

func credConn(t *testing.T, e *env, cf *bridge.CredentialFile) *bridge.Conn {
	t.Helper()
	c, err := credDial(e, cf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close("test done") })
	return c
}

func credDial(e *env, cf *bridge.CredentialFile) (*bridge.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := bridge.Dial(ctx, e.url, bridge.ConnectParams{Role: bridge.RoleAgent, Client: bridge.ClientInfo{Name: "test", Platform: runtime.GOOS}},
		nil, bridge.Options{Credential: cf, GatewayKey: e.g.PublicKey()})
	return c, err
}

// TestAgentCannotNameAnotherAgent is issue 40's first door, run over a
// real socket: agent ci's credential sends requests naming agent main
// in every spelling a loose decoder accepts (another case, a duplicate
// whose last value wins). Each is refused, recorded, and the command
// never runs. The control shows the door open without the defence: the
// same bytes read by encoding/json (the decoder before) name main, and
// main's configuration runs the command.
func TestAgentCannotNameAnotherAgent(t *testing.T) {
	rec := &memAudit{}
	var dir string
	e := newEnv(t, twoAgentsConfig, func(o *gateway.Options) { o.Audit = rec; dir = o.StateDir })
	ci, _, err := gateway.IssueCredential(dir, gateway.IssueOptions{Name: "ci", Role: bridge.RoleAgent, Agent: "ci", Out: "-"})
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := `"command":"touch ` + marker + `","sessionKey":"s"`
	attacks := map[string][]string{
		bridge.MethodExec: {
			`{"agentid":"main",` + cmd + `}`,
			`{"AgentId":"main",` + cmd + `}`,
			`{"agentId":"ci","agentId":"main",` + cmd + `}`,
			`{"agentId":"","agentid":"main",` + cmd + `}`,
			`{"agentId":"main",` + cmd + `}`,
		},
		bridge.MethodExecStatus:     {`{"agentid":"main","runId":"x"}`, `{"agentId":"ci","agentId":"main","runId":"x"}`},
		bridge.MethodSessionEvents:  {`{"AGENTID":"main"}`, `{"agentId":"","agentId":"main"}`},
		bridge.MethodSessionCommand: {`{"agentid":"main","text":"/exec security=full"}`, `{"agentId":"ci","agentId":"main","text":"/exec security=full"}`},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for method, list := range attacks {
		for _, params := range list {
			// A duplicate name is a malformed frame: the gateway closes
			// the connection saying so, so each attack gets its own.
			c, err := credDial(e, ci)
			if err != nil {
				t.Fatal(err)
			}
			err = c.Call(ctx, method, rawParams(params), nil)
			c.Close("next")
			var be *bridge.Error
			switch {
			case errors.As(err, &be) && (be.Code == bridge.CodeForbidden || be.Code == bridge.CodeInvalidRequest):
				if !strings.Contains(be.Message, "main") {
					t.Errorf("%s %s: the refusal %q does not say what was wrong", method, params, be.Message)
				}
			case err != nil && strings.Contains(err.Error(), "duplicate object member name"):
			default:
				t.Errorf("%s %s from agent ci = %v, want FORBIDDEN, INVALID_REQUEST or a closed connection naming the duplicate", method, params, err)
			}
		}
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("agent ci's command ran (as main): stat %v", err)
	}
	if _, ok := rec.find(func(r audit.Record) bool {
		return r.ReasonCode == audit.ReasonForbidden && strings.Contains(r.Reason, `not "main"`)
	}); !ok {
		t.Error("no audit record of ci naming main")
	}
	// ci's own requests still work: its credential decides the agent.
	var ev bridge.SessionEventsResult
	if err := credConn(t, e, ci).Call(ctx, bridge.MethodSessionEvents, json.RawMessage(`{"sessionKey":"s"}`), &ev); err != nil {
		t.Fatalf("ci's own session.events: %v", err)
	}

	// Control 1: the check and decoder before (an exact-key check on
	// encoding/json's map, then encoding/json's case-insensitive
	// decode) let the other spellings through as main.
	for _, params := range []string{attacks[bridge.MethodExec][0], attacks[bridge.MethodExec][3]} {
		if got := looseBind(t, params, "ci"); got != "main" {
			t.Errorf("control: the loose path reads %s as agent %q, not main: the attack would not have worked before", params, got)
		}
		var strict bridge.ExecParams
		if err := bridge.UnmarshalRequest([]byte(params), &strict); err == nil {
			t.Errorf("UnmarshalRequest accepted %s as agent %q", params, strict.AgentID)
		}
	}
	// Control 2: as main (an operator naming it), the command runs.
	op := e.client(t, bridge.RoleOperator)
	if err := op.Call(ctx, bridge.MethodExec, json.RawMessage(`{"agentId":"main",`+cmd+`}`), &bridge.ExecResult{}); err != nil {
		t.Fatalf("control: main's exec: %v", err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("control: main's command did not run: %v", err)
	}
}

// TestRequestsDecodedStrictly: an unknown field of a request is refused
// with an error that names it, for operators too.
func TestRequestsDecodedStrictly(t *testing.T) {
	e := newEnv(t, twoAgentsConfig)
	op := e.client(t, bridge.RoleOperator)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for params, field := range map[string]string{`{"command":"true","comand":"x"}`: `"comand"`, `{"command":"true","Command":"rm -rf /"}`: `"Command"`} {
		err := op.Call(ctx, bridge.MethodExec, rawParams(params), nil)
		var be *bridge.Error
		if !errors.As(err, &be) || be.Code != bridge.CodeInvalidRequest {
			t.Errorf("exec %s = %v, want INVALID_REQUEST", params, err)
			continue
		}
		if !strings.Contains(be.Message, field) {
			t.Errorf("exec %s: %q does not name the field %s", params, be.Message, field)
		}
	}
	// The connection still works: a bad request is answered, not fatal.
	if err := op.Call(ctx, bridge.MethodExec, bridge.ExecParams{Command: "true"}, &bridge.ExecResult{}); err != nil {
		t.Fatalf("a good request after bad ones: %v", err)
	}
}

// looseBind is the binding before issue 40: the exact key agentId checked
// in encoding/json's map, set to the credential's agent, and the result
// decoded by encoding/json, which matches names case-insensitively.
func looseBind(t *testing.T, params, agent string) string {
	t.Helper()
	m := map[string]json.RawMessage{}
	if err := json.Unmarshal([]byte(params), &m); err != nil {
		t.Fatal(err)
	}
	if raw, ok := m["agentId"]; ok && string(raw) != `""` && string(raw) != `"`+agent+`"` {
		return "refused"
	}
	m["agentId"], _ = json.Marshal(agent)
	b, _ := json.Marshal(m)
	var p bridge.ExecParams
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return p.AgentID
}

// rawParams is params sent as written, duplicates included (the client's
// own encoder refuses to send a duplicate; an attacker's need not).
type rawParams string

func (r rawParams) MarshalJSON() ([]byte, error) { return []byte(r), nil }
