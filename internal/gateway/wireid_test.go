package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/exechost/exechost/internal/nodekey"
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

// TestOversizedCommandDoesNotDropTheNode is issue 40's "one agent drops
// the node for all": a command larger than the node reads, sent while
// another caller's run is going on that node. The gateway refuses it and
// the other run finishes. Control: with the check off, the same command
// makes the node drop its connection and the other run ends UNAVAILABLE.
func TestOversizedCommandDoesNotDropTheNode(t *testing.T) {
	for _, defended := range []bool{true, false} {
		t.Run(map[bool]string{true: "defended", false: "control"}[defended], func(t *testing.T) {
			e := newEnv(t, `{"tools": {"exec": {"host": "node", "security": "full", "ask": "off"}}}`)
			if !defended {
				gateway.SetNodeFrameLimit(e.g, -1)
			}
			e.addNode(t, "n1", policyFull)
			victim, attacker := e.client(t, bridge.RoleAgent), e.client(t, bridge.RoleAgent)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			// The victim's run lasts until the attack was answered (or
			// 60 s): it is running on the node whatever the attack costs.
			release := filepath.Join(t.TempDir(), "release")
			var started bridge.ExecResult
			if err := victim.Call(ctx, bridge.MethodExec, bridge.ExecParams{Command: "for i in $(seq 600); do [ -e " + release + " ] && break; sleep 0.1; done; echo done", AgentID: "victim", YieldMs: 300}, &started); err != nil || started.Status != bridge.ExecRunning {
				t.Fatalf("victim's run: %+v, %v", started, err)
			}
			big := "echo " + strings.Repeat("x", bridge.MaxFrame-20<<10)
			err := attacker.Call(ctx, bridge.MethodExec, bridge.ExecParams{Command: big, AgentID: "attacker"}, &bridge.ExecResult{})
			var be *bridge.Error
			if defended && (!errors.As(err, &be) || be.Code != bridge.CodeInvalidRequest || !strings.Contains(be.Message, "reads at most")) {
				t.Fatalf("oversized command = %v, want INVALID_REQUEST saying the node's limit", err)
			}
			if err := os.WriteFile(release, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			var st bridge.ExecStatusResult
			for st.Status != bridge.ExecCompleted && st.Error == nil {
				if ctx.Err() != nil {
					t.Fatalf("victim's run never ended: %+v", st)
				}
				time.Sleep(50 * time.Millisecond)
				if err := victim.Call(ctx, bridge.MethodExecStatus, bridge.ExecStatusParams{RunID: started.RunID, AgentID: "victim"}, &st); err != nil {
					t.Fatal(err)
				}
			}
			ok := st.Error == nil && st.Result != nil && strings.TrimSpace(st.Result.Stdout) == "done"
			if defended && !ok {
				t.Fatalf("victim's run after the refused command: %+v (error %v)", st, st.Error)
			}
			if !defended && (ok || st.Error == nil || st.Error.Code != bridge.CodeUnavailable) {
				t.Fatalf("control: the victim's run survived an oversized command with the check off (%+v, %v): the test shows nothing", st, st.Error)
			}
		})
	}
}

// TestCallerBounds: one credential's connections and requests in flight
// are bounded; another credential is not affected by them.
func TestCallerBounds(t *testing.T) {
	var dir string
	e := newEnv(t, twoAgentsConfig, func(o *gateway.Options) { dir = o.StateDir })
	gateway.SetCallerLimits(e.g, 3, 2, 0)
	issue := func(name string) *bridge.CredentialFile {
		cf, _, err := gateway.IssueCredential(dir, gateway.IssueOptions{Name: name, Role: bridge.RoleAgent, Agent: name, Out: "-"})
		if err != nil {
			t.Fatal(err)
		}
		return cf
	}
	hog, other := issue("hog"), issue("other")
	var conns []*bridge.Conn
	for range 3 {
		conns = append(conns, credConn(t, e, hog))
	}
	_, err := credDial(e, hog)
	if err == nil || !strings.Contains(err.Error(), "connections open") {
		t.Fatalf("a fourth connection of one credential = %v, want refused", err)
	}
	otherConn := credConn(t, e, other)
	// Two slow requests fill hog's pending slots: a third is BUSY,
	// while other's requests are answered.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	slow := make(chan error, 2)
	for i := range 2 {
		go func() {
			slow <- conns[i].Call(ctx, bridge.MethodExec, bridge.ExecParams{Command: "sleep 3", AgentID: "hog"}, &bridge.ExecResult{})
		}()
	}
	var be *bridge.Error
	deadline := time.Now().Add(30 * time.Second)
	for {
		err = conns[2].Call(ctx, bridge.MethodSessionEvents, bridge.SessionParams{}, &bridge.SessionEventsResult{})
		if errors.As(err, &be) && be.Code == bridge.CodeBusy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hog's third request in flight = %v, want BUSY", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := otherConn.Call(ctx, bridge.MethodSessionEvents, bridge.SessionParams{}, &bridge.SessionEventsResult{}); err != nil {
		t.Fatalf("another credential's request while hog is full: %v", err)
	}
	for range 2 {
		if err := testRecv(t, slow); err != nil {
			t.Fatalf("hog's slow exec: %v", err)
		}
	}
	// Closing a connection gives its slot back.
	conns[0].Close("done")
	deadline = time.Now().Add(30 * time.Second)
	for {
		c, err := credDial(e, hog)
		if err == nil {
			c.Close("done")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hog's slot never came back: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testRecv(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("no answer within 60s")
		return nil
	}
}

// TestAgentRequestLimit: an issued agent credential's connection reads
// frames of at most MaxAgentRequest, so its stalled partial frames hold
// at most MaxConnsPerCredential × MaxAgentRequest of gateway memory; a
// larger request closes that connection only. Control: the same request
// on a gateway-token connection is read (and answered).
func TestAgentRequestLimit(t *testing.T) {
	var dir string
	e := newEnv(t, twoAgentsConfig, func(o *gateway.Options) { dir = o.StateDir })
	cf, _, err := gateway.IssueCredential(dir, gateway.IssueOptions{Name: "big", Role: bridge.RoleAgent, Agent: "big", Out: "-"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	params := bridge.ExecParams{Command: "true #" + strings.Repeat("x", gateway.MaxAgentRequest), AgentID: "big"}
	err = credConn(t, e, cf).Call(ctx, bridge.MethodExec, params, &bridge.ExecResult{})
	if err == nil || !strings.Contains(err.Error(), "read limit") {
		t.Fatalf("a %d byte request from an agent credential = %v, want the connection closed at the read limit", gateway.MaxAgentRequest, err)
	}
	// Its other connections and the credential go on working.
	if err := credConn(t, e, cf).Call(ctx, bridge.MethodSessionEvents, bridge.SessionParams{}, &bridge.SessionEventsResult{}); err != nil {
		t.Fatal(err)
	}
	params.AgentID = ""
	if err := e.client(t, bridge.RoleOperator).Call(ctx, bridge.MethodExec, params, &bridge.ExecResult{}); err != nil {
		t.Fatalf("control: the same request on a token connection: %v", err)
	}
}

// TestRevocationCutsOpenConnections: a revoked credential's open
// connection stops working within a second, and the cut is recorded.
// Control: with the cut off the same connection goes on working after
// the revocation, as it did before issue 40.
func TestRevocationCutsOpenConnections(t *testing.T) {
	for _, defended := range []bool{true, false} {
		t.Run(map[bool]string{true: "defended", false: "control"}[defended], func(t *testing.T) {
			rec := &memAudit{}
			var dir string
			e := newEnv(t, twoAgentsConfig, func(o *gateway.Options) { o.Audit = rec; dir = o.StateDir })
			gateway.SetRevocationCut(e.g, defended)
			keep := agentConn(t, e, dir, "keep")
			gone := agentConn(t, e, dir, "gone")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := gone.Call(ctx, bridge.MethodSessionEvents, bridge.SessionParams{}, &bridge.SessionEventsResult{}); err != nil {
				t.Fatal(err)
			}
			if _, err := gateway.RevokeCredential(dir, "gone"); err != nil {
				t.Fatal(err)
			}
			revoked := time.Now()
			select {
			case <-gone.Done():
				if !defended {
					t.Fatal("control: the connection closed with the cut off")
				}
				if took := time.Since(revoked); took > time.Second {
					t.Errorf("cut after %s, want within a second", took)
				}
			case <-time.After(3 * time.Second):
				if defended {
					t.Fatal("the revoked credential's connection is still open after 3s")
				}
			}
			err := gone.Call(ctx, bridge.MethodSessionEvents, bridge.SessionParams{}, &bridge.SessionEventsResult{})
			if defended == (err == nil) {
				t.Fatalf("a call on the revoked connection = %v (defended %v)", err, defended)
			}
			if err := keep.Call(ctx, bridge.MethodSessionEvents, bridge.SessionParams{}, &bridge.SessionEventsResult{}); err != nil {
				t.Fatalf("another credential's connection: %v", err)
			}
			if _, ok := rec.find(func(r audit.Record) bool { return r.Action == audit.ActionCredentialRevoke }); ok != defended {
				t.Errorf("cut recorded = %v, want %v", ok, defended)
			}
		})
	}
}

// logRecorder records into a real audit log.
type logRecorder struct{ l *audit.Log }

func (r logRecorder) Record(rec audit.Record) error { return r.l.Append(rec) }

// TestRefusalsCannotFlushTheAudit is issue 40's "an agent erases the
// audit history by being refused", on a real log rotated at 32 KiB with
// two rotated files: an operator's join key record, then 1,500 refused
// requests of one agent credential over its socket. The operator's record
// stays in the log and one record counts the refusals left out. Control:
// with aggregation off the same refusals rotate the operator's record out
// of every file, and rotation keeps it in the security file and says what
// it removed.
func TestRefusalsCannotFlushTheAudit(t *testing.T) {
	for _, defended := range []bool{true, false} {
		t.Run(map[bool]string{true: "defended", false: "control"}[defended], func(t *testing.T) {
			logPath := filepath.Join(t.TempDir(), "audit.jsonl")
			l, err := audit.OpenOptions(logPath, audit.Options{MaxBytes: 32 << 10, Keep: 2})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			var dir string
			e := newEnv(t, twoAgentsConfig, func(o *gateway.Options) { o.Audit = logRecorder{l}; dir = o.StateDir })
			gateway.SetRefusalAggregation(e.g, defended)
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			var jk bridge.JoinKeyResult
			if err := e.client(t, bridge.RoleOperator).Call(ctx, bridge.MethodJoinKey, bridge.JoinKeyParams{}, &jk); err != nil {
				t.Fatal(err)
			}
			ci := agentConn(t, e, dir, "ci")
			for range 1500 {
				if err := ci.Call(ctx, bridge.MethodNodesPending, nil, nil); err == nil {
					t.Fatal("an agent listed pending nodes")
				}
			}
			gateway.FlushRefusals(e.g)
			var live, counted, full int
			var inLog bool
			if err := audit.Read(logPath, audit.Filter{}, func(r audit.Record) error {
				live++
				inLog = inLog || r.Action == audit.ActionJoinKeyIssue
				if r.ReasonCode != audit.ReasonForbidden {
					return nil
				}
				// A flushed count includes its own record; a count
				// carried by the next record does not.
				var n int
				if _, err := fmt.Sscanf(r.Change, "%d refusals like this", &n); err == nil {
					counted += n
				} else if _, err := fmt.Sscanf(r.Change, "%d earlier refusals like this", &n); err == nil {
					counted, full = counted+n, full+1
				} else {
					full++
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if n, err := audit.Verify(logPath); err != nil {
				t.Fatalf("verify after %d lines: %v", n, err)
			}
			removed, err := audit.RemovedFiles(logPath)
			if err != nil {
				t.Fatal(err)
			}
			kept, err := audit.VerifySecurity(logPath)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("defended=%v: %d lines live, %d refusals recorded and %d counted, %d files removed, %d security records kept", defended, live, full, counted, len(removed), len(kept))
			if defended {
				if !inLog || counted+full != 1500 || full > 3*gateway.RefusalBurst || len(removed) != 0 {
					t.Fatalf("operator's record in the log: %v; aggregated records: %d; files removed: %d", inLog, counted, len(removed))
				}
				return
			}
			if inLog {
				t.Fatal("control: 1,500 unaggregated refusals did not rotate the operator's record out: the test shows nothing")
			}
			if len(removed) == 0 || removed[0].Lines == 0 {
				t.Fatalf("rotation removed files but says nothing: %+v", removed)
			}
			rep, err := audit.RotationReport(logPath)
			if err != nil || !strings.Contains(rep, fmt.Sprintf("rotation removed %d files", len(removed))) {
				t.Fatalf("rotation report %q, %v", rep, err)
			}
			found := false
			for _, r := range kept {
				found = found || r.Action == audit.ActionJoinKeyIssue
			}
			if !found {
				t.Fatal("rotation did not keep the operator's record in the security file")
			}
		})
	}
}

// TestPendingNodesReserveNoName: a stranger's pending connection named
// like a real node does not keep that node (pairing with a join key) from
// its name; approving the stranger afterwards is refused for the name.
// Control: a paired node's name is still refused to a stranger.
func TestPendingNodesReserveNoName(t *testing.T) {
	e := newEnv(t, fullConfig)
	op := e.client(t, bridge.RoleOperator)
	sk, _ := nodekey.Generate()
	if _, res, err := dialNamed(t, e.url, sk, "build"); err != nil || res.Status != bridge.StatusPending {
		t.Fatalf("stranger: %+v, %v", res, err)
	}
	jk, err := call[bridge.JoinKeyResult](t, op, bridge.MethodJoinKey, bridge.JoinKeyParams{})
	if err != nil {
		t.Fatal(err)
	}
	rk, _ := nodekey.Generate()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, res, err := bridge.Dial(ctx, e.url, bridge.ConnectParams{Role: bridge.RoleNode, Auth: bridge.Auth{JoinKey: jk.Key},
		Node: &bridge.NodeInfo{NodeID: rk.DeviceID(), DisplayName: "build"}}, nil, bridge.Options{Device: rk})
	if err != nil || res.Status != bridge.StatusPaired {
		t.Fatalf("the real node named like a pending stranger: %+v, %v", res, err)
	}
	defer c.Close("done")
	_, err = call[bridge.NodeView](t, op, bridge.MethodNodesApprove, bridge.NodeIDParams{NodeID: sk.DeviceID()})
	var be *bridge.Error
	if !errors.As(err, &be) || !strings.Contains(be.Message, "already taken by node") {
		t.Fatalf("approving the stranger named like a paired node = %v, want refused", err)
	}
	k2, _ := nodekey.Generate()
	_, _, err = dialNamed(t, e.url, k2, "Build")
	wantConnCode(t, "a stranger taking a paired node's name", err, bridge.CodeInvalidRequest)
}
