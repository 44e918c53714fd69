package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/approvalroute"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/node"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
)

// policyAsk makes every command a miss that asks, and denies when nobody
// answers.
const policyAsk = `{"version":1,"defaults":{"security":"allowlist","ask":"on-miss","askFallback":"deny"}}`

// waitLong bounds every wait in these tests; it is a deadline, not a
// timing assertion.
const waitLong = 60 * time.Second

// operator is an operator connection that records approval events.
type operator struct {
	c         *bridge.Conn
	requested chan approvalroute.Requested
	resolved  chan approvalroute.Resolved
}

func (e *env) operator(tb testing.TB, name string) *operator {
	tb.Helper()
	o := &operator{requested: make(chan approvalroute.Requested, 16), resolved: make(chan approvalroute.Resolved, 16)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := bridge.Dial(ctx, e.url, bridge.ConnectParams{Role: bridge.RoleOperator, Auth: bridge.Auth{Token: e.token},
		Client: bridge.ClientInfo{Name: name, Platform: runtime.GOOS}}, nil, bridge.Options{
		OnEvent: func(event string, payload json.RawMessage) {
			switch event {
			case approvalroute.EventRequested:
				var r approvalroute.Requested
				if json.Unmarshal(payload, &r) == nil {
					o.requested <- r
				}
			case approvalroute.EventResolved:
				var r approvalroute.Resolved
				if json.Unmarshal(payload, &r) == nil {
					o.resolved <- r
				}
			}
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close("test done") })
	o.c = c
	return o
}

func recv[T any](tb testing.TB, ch <-chan T, what string) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLong):
		tb.Fatalf("no %s within %s", what, waitLong)
		var zero T
		return zero
	}
}

// routedNode is a node runner whose engine sends prompts to the gateway.
type routedNode struct {
	id, dir string
	stop    func()
	audit   chan host.AuditRecord // decisions taken after a prompt
	// prompter is the node's gateway prompter (for benchmarks).
	prompter host.Prompter
}

// addRoutedNode starts a node whose prompts take route (local being a
// prompter that never answers stands in for no local approver at all:
// there is no socket in the node's state directory).
// wrap, when given, wraps the node engine's prompter (a test's hook).
func (e *env) addRoutedNode(tb testing.TB, name, pol string, route approvalroute.Route, local host.Prompter, promptTimeout time.Duration, wrap ...func(host.Prompter) host.Prompter) routedNode {
	tb.Helper()
	dir := tb.TempDir()
	writePolicy(tb, dir, pol)
	paired := make(chan string, 1)
	eng := host.NewEngine(dir, policy.HostNode, "")
	eng.PromptTimeout = promptTimeout
	audit := make(chan host.AuditRecord, 64)
	eng.OnAudit = func(rec host.AuditRecord) {
		if (rec.DecidedBy != "" || rec.Fallback) && rec.Event != "finished" {
			select {
			case audit <- rec:
			default:
			}
		}
	}
	r, err := node.New(node.Options{
		StateDir: dir, GatewayURL: e.url, DisplayName: name, Executor: eng,
		OnPending: func(id string) {
			var err error
			for range 100 {
				if _, err = e.g.Approve(e.ctx, id); err == nil {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			tb.Errorf("approve %s: %v", id, err)
		},
		OnPaired: func(id string) {
			select {
			case paired <- id:
			default:
			}
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	eng.NodeID, eng.OnEvent = r.NodeID(), r.HostEvent
	if eng.Prompter, err = approvalroute.Prompter(route, local, r.GatewayPrompter()); err != nil {
		tb.Fatal(err)
	}
	for _, w := range wrap {
		eng.Prompter = w(eng.Prompter)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	stop := func() { cancel(); <-done }
	tb.Cleanup(stop)
	select {
	case id := <-paired:
		return routedNode{id: id, dir: dir, stop: stop, audit: audit, prompter: r.GatewayPrompter()}
	case <-time.After(waitLong):
		tb.Fatalf("node %s did not pair", name)
		return routedNode{}
	}
}

// heldPrompter forwards a node's prompt to its real prompter but decides
// itself when the node's side of the prompt ends, so a test can force
// which of two racing events comes first: the prompt ends when the test
// closes end (the node gives up, as its engine's timeout or its stop
// would make it), never when the invoke's context ends, so a stopping
// node stays inside the prompt until its connection is gone.
type heldPrompter struct {
	inner host.Prompter
	end   <-chan struct{}
}

func (h heldPrompter) Prompt(ctx context.Context, req prompt.Request) (policy.Approval, string, error) {
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	ch := promptAsync(pctx, h.inner, req)
	select {
	case r := <-ch:
		return r.a, r.by, r.err
	case <-h.end:
		cancel()
		r := <-ch
		return r.a, r.by, r.err
	}
}

// promptAnswer is what one Prompt call returned.
type promptAnswer struct {
	a   policy.Approval
	by  string
	err error
}

// promptAsync runs p.Prompt in the background; its answer arrives on the
// channel.
func promptAsync(ctx context.Context, p host.Prompter, req prompt.Request) <-chan promptAnswer {
	ch := make(chan promptAnswer, 1)
	go func() {
		a, by, err := p.Prompt(ctx, req)
		ch <- promptAnswer{a, by, err}
	}()
	return ch
}

// holdPrompts returns a wrapper for addRoutedNode whose prompts end when
// end is closed (or the inner prompter returns).
func holdPrompts(end <-chan struct{}) func(host.Prompter) host.Prompter {
	return func(p host.Prompter) host.Prompter { return heldPrompter{inner: p, end: end} }
}

type execOutcome struct {
	res bridge.ExecResult
	err error
}

// execAsync runs exec on an agent connection in the background.
func execAsync(tb testing.TB, agent *bridge.Conn, p bridge.ExecParams) <-chan execOutcome {
	ch := make(chan execOutcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		var res bridge.ExecResult
		err := agent.Call(ctx, bridge.MethodExec, p, &res)
		ch <- execOutcome{res, err}
	}()
	return ch
}

func wantCode(tb testing.TB, err error, code, msg string) {
	tb.Helper()
	var be *bridge.Error
	if !errors.As(err, &be) || be.Code != code || !strings.Contains(be.Message, msg) {
		tb.Fatalf("error = %v; want %s containing %q", err, code, msg)
	}
}

// TestApprovalThroughGateway: a node with route=gateway asks; an operator
// client gets exec.approval.requested and answers; the answer and who gave
// it reach the node's engine.
func TestApprovalThroughGateway(t *testing.T) {
	e := newEnv(t, fullConfig)
	n := e.addRoutedNode(t, "asker", policyAsk, approvalroute.Gateway, nil, 0)
	agent := e.client(t, bridge.RoleAgent)
	op := e.operator(t, "alice-phone")

	tests := []struct {
		decision string
		command  string
		wantOut  string
		wantErr  string
	}{
		{decision: "allow-once", command: "/bin/echo routed", wantOut: "routed\n"},
		{decision: "allow-always", command: "id -u", wantOut: ""},
		{decision: "deny", command: "/bin/echo nope", wantErr: "SYSTEM_RUN_DENIED: user denied"},
	}
	for _, tt := range tests {
		t.Run(tt.decision, func(t *testing.T) {
			done := execAsync(t, agent, bridge.ExecParams{Command: tt.command, Host: "node", Node: n.id, SessionKey: "s-" + tt.decision})
			req := recv(t, op.requested, "exec.approval.requested")
			if req.Host != "node" || req.NodeID != n.id || req.Request.Command != tt.command || req.ExpiresAtMs <= time.Now().UnixMilli() {
				t.Fatalf("requested = %+v", req)
			}
			res, err := call[approvalroute.Resolved](t, op.c, approvalroute.MethodResolve, approvalroute.ResolveParams{ID: req.ID[:8], Decision: tt.decision})
			if err != nil || res.ID != req.ID || res.By != "operator alice-phone" {
				t.Fatalf("resolve = %+v, %v", res, err)
			}
			if got := recv(t, op.resolved, "exec.approval.resolved"); got.ID != req.ID || got.Outcome != approvalroute.OutcomeAnswered || got.Decision != tt.decision {
				t.Errorf("resolved event = %+v", got)
			}
			// Single use: the same id cannot be answered twice.
			_, err = call[approvalroute.Resolved](t, op.c, approvalroute.MethodResolve, approvalroute.ResolveParams{ID: req.ID, Decision: "allow-once"})
			wantCode(t, err, bridge.CodeStale, "already answered")

			out := recv(t, done, "exec result")
			if rec := recv(t, n.audit, "audit record"); rec.DecidedBy != "operator alice-phone" || string(rec.Approval) != tt.decision {
				t.Errorf("node audit: decidedBy %q approval %q; want operator alice-phone, %s", rec.DecidedBy, rec.Approval, tt.decision)
			}
			if tt.wantErr != "" {
				wantCode(t, out.err, bridge.CodeDenied, tt.wantErr)
				return
			}
			if out.err != nil || !out.res.Success {
				t.Fatalf("exec = %+v, %v", out.res, out.err)
			}
			if tt.wantOut != "" && out.res.Stdout != tt.wantOut {
				t.Errorf("stdout = %q, want %q", out.res.Stdout, tt.wantOut)
			}
		})
	}
	data, err := os.ReadFile(filepath.Join(n.dir, "exec-approvals.json"))
	if err != nil || !strings.Contains(string(data), `/id"`) {
		t.Errorf("allow-always did not record id in the node's allowlist: %v\n%s", err, data)
	}
	// Allowlisted now: no prompt, it just runs.
	res, err := call[bridge.ExecResult](t, agent, bridge.MethodExec, bridge.ExecParams{Command: "id -u", Host: "node", Node: n.id})
	if err != nil || !res.Success {
		t.Fatalf("allowlisted exec = %+v, %v", res, err)
	}
}

// TestApprovalExpiry: nobody answers, so the node's prompt times out into
// askFallback; operators see the prompt expire and a late answer says so.
func TestApprovalExpiry(t *testing.T) {
	e := newEnv(t, fullConfig)
	n := e.addRoutedNode(t, "lonely", policyAsk, approvalroute.Gateway, nil, time.Second)
	agent := e.client(t, bridge.RoleAgent)
	op := e.operator(t, "late-larry")

	out := recv(t, execAsync(t, agent, bridge.ExecParams{Command: "/bin/echo never", Host: "node", Node: n.id}), "exec result")
	wantCode(t, out.err, bridge.CodeDenied, "SYSTEM_RUN_DENIED: approval required")
	if !strings.Contains(out.err.Error(), "timed out") {
		t.Errorf("fallback reason does not say the prompt timed out: %v", out.err)
	}
	// Nothing stays pending. Whether the prompt reached the gateway
	// before the node's timer gave up depends on load; the case where it
	// did is forced in TestApprovalExpirySeenByOperators.
	var pend approvalroute.PendingResult
	for deadline := time.Now().Add(waitLong); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if pend, err = call[approvalroute.PendingResult](t, op.c, approvalroute.MethodPending, nil); err != nil {
			t.Fatal(err)
		}
		if len(pend.Approvals) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(pend.Approvals) != 0 {
		t.Fatalf("pending after expiry = %+v", pend)
	}
}

// TestApprovalExpirySeenByOperators: the node gives up on a prompt the
// operators already see (held until then by a hook, not a timer): they
// see it expire, a late answer says so, and the agent gets the fallback's
// denial.
func TestApprovalExpirySeenByOperators(t *testing.T) {
	e := newEnv(t, fullConfig)
	giveUp := make(chan struct{})
	n := e.addRoutedNode(t, "lonely", policyAsk, approvalroute.Gateway, nil, 10*time.Minute, holdPrompts(giveUp))
	agent := e.client(t, bridge.RoleAgent)
	op := e.operator(t, "late-larry")

	done := execAsync(t, agent, bridge.ExecParams{Command: "/bin/echo never", Host: "node", Node: n.id})
	req := recv(t, op.requested, "exec.approval.requested")
	close(giveUp)
	out := recv(t, done, "exec result")
	wantCode(t, out.err, bridge.CodeDenied, "SYSTEM_RUN_DENIED: approval required")
	if got := recv(t, op.resolved, "exec.approval.resolved"); got.ID != req.ID || got.Outcome != approvalroute.OutcomeExpired {
		t.Errorf("resolved event = %+v, want expired", got)
	}
	_, err := call[approvalroute.Resolved](t, op.c, approvalroute.MethodResolve, approvalroute.ResolveParams{ID: req.ID, Decision: "allow-once"})
	wantCode(t, err, bridge.CodeStale, "expired")
	pend, err := call[approvalroute.PendingResult](t, op.c, approvalroute.MethodPending, nil)
	if err != nil || len(pend.Approvals) != 0 {
		t.Fatalf("pending after expiry = %+v, %v", pend, err)
	}
}

// TestApprovalNodeDrop: a node that disconnects with a prompt pending
// fails it at once; operators see it go; nothing runs. Two events race
// when a node stops: the gateway seeing its connection close, and the
// stopping node's engine denying (its prompt ended) and sending that
// first. A hook on the node's prompt forces each order, and each has its
// own answer.
func TestApprovalNodeDrop(t *testing.T) {
	for _, tt := range []struct {
		name        string
		deniedFirst bool // the node's prompt ends (and its denial is answered) before it stops
		code, msg   string
	}{
		{"the gateway sees the connection close first", false, bridge.CodeUnavailable, "disconnected"},
		{"the node's denial arrives first", true, bridge.CodeDenied, "SYSTEM_RUN_DENIED: approval required"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, fullConfig)
			// Until giveUp is closed the node's prompt outlives even its
			// stop, so no denial can be sent before the connection is gone.
			giveUp := make(chan struct{})
			n := e.addRoutedNode(t, "flaky", policyAsk, approvalroute.Gateway, nil, 0, holdPrompts(giveUp))
			agent := e.client(t, bridge.RoleAgent)
			op := e.operator(t, "ops")
			done := execAsync(t, agent, bridge.ExecParams{Command: "/bin/echo gone", Host: "node", Node: n.id})
			req := recv(t, op.requested, "exec.approval.requested")
			var out execOutcome
			if tt.deniedFirst {
				close(giveUp)
				out = recv(t, done, "exec result")
				n.stop()
			} else {
				n.stop()
				out = recv(t, done, "exec result")
			}
			if got := recv(t, op.resolved, "exec.approval.resolved"); got.ID != req.ID || got.Outcome != approvalroute.OutcomeExpired {
				t.Errorf("resolved event = %+v, want expired", got)
			}
			wantCode(t, out.err, tt.code, tt.msg)
		})
	}
}

// TestApprovalErrors: unknown ids, bad decisions, decisions not offered
// and agents answering are refused with a clear message.
func TestApprovalErrors(t *testing.T) {
	e := newEnv(t, fullConfig)
	alwaysAsk := `{"version":1,"defaults":{"security":"allowlist","ask":"always","askFallback":"deny"}}`
	n := e.addRoutedNode(t, "strict", alwaysAsk, approvalroute.Gateway, nil, 0)
	agent := e.client(t, bridge.RoleAgent)
	op := e.operator(t, "ops")
	done := execAsync(t, agent, bridge.ExecParams{Command: "echo strict", Host: "node", Node: n.id, SessionKey: "chat-1"})
	req := recv(t, op.requested, "exec.approval.requested")

	tests := []struct {
		name     string
		c        *bridge.Conn
		method   string
		params   any
		code     string
		contains string
	}{
		{"unknown id", op.c, approvalroute.MethodResolve, approvalroute.ResolveParams{ID: "zzzz", Decision: "allow-once"}, bridge.CodeNotFound, "unknown approval id"},
		{"empty id", op.c, approvalroute.MethodResolve, approvalroute.ResolveParams{ID: " ", Decision: "allow-once"}, bridge.CodeNotFound, "unknown approval id"},
		{"bad decision", op.c, approvalroute.MethodResolve, approvalroute.ResolveParams{ID: req.ID, Decision: "maybe"}, bridge.CodeInvalidRequest, "want allow-once"},
		{"allow-always not offered", op.c, approvalroute.MethodResolve, approvalroute.ResolveParams{ID: req.ID, Decision: "allow-always"}, bridge.CodeInvalidRequest, "not offered"},
		{"agent resolve", agent, approvalroute.MethodResolve, approvalroute.ResolveParams{ID: req.ID, Decision: "allow-once"}, bridge.CodeForbidden, "operator role"},
		{"agent pending", agent, approvalroute.MethodPending, nil, bridge.CodeForbidden, "operator role"},
		{"agent /approve", agent, bridge.MethodSessionCommand, bridge.SessionCommandParams{SessionKey: "chat-1", Text: "/approve " + req.ID + " allow-once"}, bridge.CodeForbidden, "operator connection"},
		{"/approve usage", op.c, bridge.MethodSessionCommand, bridge.SessionCommandParams{SessionKey: "chat-1", Text: "/approve " + req.ID}, bridge.CodeInvalidRequest, "usage: /approve"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call[json.RawMessage](t, tt.c, tt.method, tt.params)
			wantCode(t, err, tt.code, tt.contains)
		})
	}
	pend, err := call[approvalroute.PendingResult](t, op.c, approvalroute.MethodPending, nil)
	if err != nil || len(pend.Approvals) != 1 || pend.Approvals[0].ID != req.ID {
		t.Fatalf("still pending = %+v, %v", pend, err)
	}
	// An operator connecting now is told about the waiting prompt.
	late := e.operator(t, "latecomer")
	if got := recv(t, late.requested, "exec.approval.requested on join"); got.ID != req.ID || got.Request.Command != "echo strict" {
		t.Errorf("requested on join = %+v", got)
	}
	// /approve from an operator's session front-end answers it, recording
	// the operator and the session.
	sc, err := call[bridge.SessionCommandResult](t, op.c, bridge.MethodSessionCommand, bridge.SessionCommandParams{SessionKey: "chat-1", Text: "/approve " + req.ID[:6] + " allow-once"})
	if err != nil || !strings.Contains(sc.Reply, req.ID) {
		t.Fatalf("/approve = %+v, %v", sc, err)
	}
	got := recv(t, op.resolved, "exec.approval.resolved")
	if want := "operator ops via /approve in session main/chat-1"; got.By != want {
		t.Errorf("by = %q, want %q", got.By, want)
	}
	if out := recv(t, done, "exec result"); out.err != nil || out.res.Stdout != "strict\n" {
		t.Fatalf("exec = %+v, %v", out.res, out.err)
	}
}

// gatedPrompter is the local side of a route=both race: it answers when
// the test says so, or never.
type gatedPrompter struct {
	answer chan policy.Approval
	asked  chan struct{}
}

func (p gatedPrompter) Prompt(ctx context.Context, _ prompt.Request) (policy.Approval, string, error) {
	p.asked <- struct{}{}
	select {
	case a := <-p.answer:
		return a, "local approver", nil
	case <-ctx.Done():
		return "", "", prompt.ErrTimeout
	}
}

// TestApprovalRouteBoth: the local approver and the gateway race; the
// first answer wins and the other side sees the prompt resolved.
func TestApprovalRouteBoth(t *testing.T) {
	e := newEnv(t, fullConfig)
	local := gatedPrompter{answer: make(chan policy.Approval, 1), asked: make(chan struct{}, 4)}
	n := e.addRoutedNode(t, "both", policyAsk, approvalroute.Both, local, 0)
	agent := e.client(t, bridge.RoleAgent)
	op := e.operator(t, "ops")

	t.Run("local wins", func(t *testing.T) {
		done := execAsync(t, agent, bridge.ExecParams{Command: "/bin/echo local", Host: "node", Node: n.id})
		req := recv(t, op.requested, "exec.approval.requested")
		recv(t, local.asked, "local prompt")
		local.answer <- policy.AllowOnce
		if out := recv(t, done, "exec result"); out.err != nil || out.res.Stdout != "local\n" {
			t.Fatalf("exec = %+v, %v", out.res, out.err)
		}
		// The node withdraws its gateway prompt: operators see it go.
		if got := recv(t, op.resolved, "exec.approval.resolved"); got.ID != req.ID || got.Outcome != approvalroute.OutcomeExpired {
			t.Errorf("resolved = %+v, want expired", got)
		}
		_, err := call[approvalroute.Resolved](t, op.c, approvalroute.MethodResolve, approvalroute.ResolveParams{ID: req.ID, Decision: "deny"})
		wantCode(t, err, bridge.CodeStale, "expired")
	})
	t.Run("gateway wins", func(t *testing.T) {
		done := execAsync(t, agent, bridge.ExecParams{Command: "/bin/echo remote", Host: "node", Node: n.id})
		req := recv(t, op.requested, "exec.approval.requested")
		recv(t, local.asked, "local prompt")
		if _, err := call[approvalroute.Resolved](t, op.c, approvalroute.MethodResolve, approvalroute.ResolveParams{ID: req.ID, Decision: "deny"}); err != nil {
			t.Fatal(err)
		}
		out := recv(t, done, "exec result")
		wantCode(t, out.err, bridge.CodeDenied, "SYSTEM_RUN_DENIED: user denied")
		select {
		case local.answer <- policy.AllowOnce: // nobody reads it: the local prompt was cancelled
		default:
		}
	})
}

// TestGatewayPrompter: the gateway engine's own prompts (host=gateway)
// reach operators the same way.
func TestGatewayPrompter(t *testing.T) {
	e := newEnv(t, fullConfig)
	op := e.operator(t, "ops")
	actx, acancel := context.WithTimeout(context.Background(), waitLong)
	defer acancel()
	ch := promptAsync(actx, e.g.Prompter(), prompt.Request{Command: "make", AgentID: "main", Choices: []string{"allow-once", "deny"}})
	req := recv(t, op.requested, "exec.approval.requested")
	if req.Host != "gateway" || req.Request.Command != "make" {
		t.Fatalf("requested = %+v", req)
	}
	if _, err := call[approvalroute.Resolved](t, op.c, approvalroute.MethodResolve, approvalroute.ResolveParams{ID: req.ID, Decision: "allow-once"}); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, ch, "answer"); got.err != nil || got.a != policy.AllowOnce || got.by != "operator ops" {
		t.Fatalf("answer = %+v", got)
	}
	// No operator answers before the deadline: an ErrTimeout, so the
	// engine applies askFallback. Only the prompt's expiry may end the
	// wait: a caller's context ending too (however much later it was set
	// to) is a different outcome, and a loaded machine can deliver both
	// timers at once; the context's bound only keeps a broken expiry from
	// hanging the test.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, _, err := e.g.Prompter().Prompt(ctx, prompt.Request{Command: "make", ExpiresAtMs: time.Now().Add(20 * time.Millisecond).UnixMilli()})
	if !errors.Is(err, prompt.ErrTimeout) {
		t.Errorf("unanswered prompt = %v, want ErrTimeout", err)
	}
}

// TestAgentScopes: an agent's nodes.list shows the nodes it may target,
// and exec.status shows only its own session's runs.
func TestAgentScopes(t *testing.T) {
	e := newEnv(t, `{"tools": {"exec": {"security": "full", "ask": "off"}},
		"agents": {"list": [{"id": "bound", "tools": {"exec": {"node": "alpha"}}}, {"id": "lost", "tools": {"exec": {"node": "nowhere"}}}]}}`)
	alpha := e.addNode(t, "alpha", policyFull)
	e.addNode(t, "beta", policyFull)
	agent := e.client(t, bridge.RoleAgent)
	op := e.client(t, bridge.RoleOperator)

	ids := func(c *bridge.Conn, agentID string) []string {
		t.Helper()
		res, err := call[bridge.NodesResult](t, c, bridge.MethodNodesList, bridge.SessionParams{AgentID: agentID})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, n := range res.Nodes {
			out = append(out, n.DisplayName)
		}
		return out
	}
	for _, tt := range []struct {
		name  string
		c     *bridge.Conn
		agent string
		want  int
	}{
		{"bound agent", agent, "bound", 1},
		{"binding matches nothing", agent, "lost", 0},
		{"unbound agent", agent, "free", 2},
		{"operator", op, "bound", 2},
	} {
		if got := ids(tt.c, tt.agent); len(got) != tt.want {
			t.Errorf("%s: nodes.list = %q, want %d nodes", tt.name, got, tt.want)
		}
	}
	if got := ids(agent, "bound"); len(got) != 1 || got[0] != "alpha" {
		t.Errorf("bound agent sees %q, want [alpha] (%s)", got, alpha)
	}

	res, err := call[bridge.ExecResult](t, agent, bridge.MethodExec, bridge.ExecParams{Command: "echo mine", Host: "gateway", SessionKey: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = call[bridge.ExecStatusResult](t, agent, bridge.MethodExecStatus, bridge.ExecStatusParams{RunID: res.RunID, SessionKey: "s2"})
	wantCode(t, err, bridge.CodeNotFound, "unknown run")
	_, err = call[bridge.ExecStatusResult](t, agent, bridge.MethodExecStatus, bridge.ExecStatusParams{RunID: res.RunID, AgentID: "other", SessionKey: "s1"})
	wantCode(t, err, bridge.CodeNotFound, "unknown run")
	for _, c := range []*bridge.Conn{agent, op} {
		st, err := call[bridge.ExecStatusResult](t, c, bridge.MethodExecStatus, bridge.ExecStatusParams{RunID: res.RunID, SessionKey: "s1"})
		if err != nil || st.Status != bridge.RunCompleted {
			t.Errorf("own status = %+v, %v", st, err)
		}
	}
}
