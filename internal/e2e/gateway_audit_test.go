package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/testdep"
)

// gatewayAuditConfig binds nothing yet (the web UI does), locks agent
// "locked" with security=deny at the gateway and offers host=sandbox
// through the daemonless backend with one sandbox per agent.
const gatewayAuditConfig = `{
	"tools": {"exec": {"security": "full", "ask": "off"}},
	"agents": {"list": [{"id": "locked", "tools": {"exec": {"security": "deny"}}}]},
	"gateway": {"listen": "127.0.0.1:0"},
	"sandbox": {"backend": "bwrap", "scope": "agent"},
}`

var metricsURLRE = regexp.MustCompile(`serving metrics" addr=(http://127\.0\.0\.1:[0-9]+/metrics)`)

// auditLog reads the gateway's audit log and checks the chain link by link
// as it goes (every line's prev is the line before's hash).
func auditLog(t *testing.T, dir string) []audit.Record {
	t.Helper()
	var out []audit.Record
	if err := audit.Read(filepath.Join(dir, "audit.jsonl"), audit.Filter{}, func(r audit.Record) error {
		if n := len(out); n > 0 && r.Prev != out[n-1].Hash {
			return fmt.Errorf("record %d (%s %s): prev %q, want %q", n+1, r.Action, r.Event, r.Prev, out[n-1].Hash)
		}
		out = append(out, r)
		return nil
	}); err != nil {
		t.Fatalf("read the gateway's audit log: %v", err)
	}
	return out
}

// findRecord returns the last record of action/event/reasonCode, failing
// the test (with the whole log) when there is none.
func findRecord(t *testing.T, recs []audit.Record, action, event, code string) audit.Record {
	t.Helper()
	for i := len(recs) - 1; i >= 0; i-- {
		if r := recs[i]; r.Action == action && r.Event == event && r.ReasonCode == code {
			return r
		}
	}
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "  %s %s %s actor=%q node=%s reason=%q\n", r.Action, r.Event, r.ReasonCode, r.Actor, r.NodeID, r.Reason)
	}
	t.Fatalf("no %s/%s/%s record in the gateway's audit log:\n%s", action, event, code, b.String())
	return audit.Record{}
}

// hasRecord reports whether a record of action/event/reasonCode exists.
func hasRecord(recs []audit.Record, action, event, code string) bool {
	for _, r := range recs {
		if r.Action == action && r.Event == event && r.ReasonCode == code {
			return true
		}
	}
	return false
}

// scrape returns the gateway's metrics page.
func scrape(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: status %d, %v", url, res.StatusCode, err)
	}
	return string(b)
}

// decisionMetric is one exechost_gateway_decisions_total series line.
func decisionMetric(action, event, host, reason string, n int) string {
	m := fmt.Sprintf(`exechost_gateway_decisions_total{action=%q,event=%q,host=%q,reason=%q} `, action, event, host, reason)
	if n < 0 { // at least once: the count depends on retries
		return m
	}
	return m + fmt.Sprint(n)
}

// TestGatewayAudit drives every decision the gateway makes itself through
// a real gateway, real nodes and the real CLI, and checks each one's audit
// record (fields and hash chain), its counter on --metrics-listen, that
// `audit verify` passes over the gateway's log and that it names the file
// and line of a tampered record.
func TestGatewayAudit(t *testing.T) {
	c := &cluster{t: t, gwDir: newStateDir(t, "gateway"), nodes: map[string]*node{}}
	writeFile(t, filepath.Join(c.gwDir, "exechost.json"), gatewayAuditConfig)
	writeFile(t, filepath.Join(c.gwDir, "exec-approvals.json"), policyFull)
	c.gw = start(t, c.gwDir, "gateway", "--log-level", "debug", "--web", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0")
	waitFor(t, "gateway, web UI and metrics to listen", func() bool {
		out := c.gw.Out.String()
		return urlRE.MatchString(out) && webURLRE.MatchString(out) && metricsURLRE.MatchString(out)
	})
	out := c.gw.Out.String()
	c.url = urlRE.FindStringSubmatch(out)[1]
	c.addr = strings.TrimPrefix(c.url, "ws://")
	metricsURL := metricsURLRE.FindStringSubmatch(out)[1]
	w := webLogin(t, webURLRE.FindStringSubmatch(out)[1])
	const cliActor = "operator exechost-cli"

	// Pairing: two nodes approved by an operator (display names are
	// unique, so the ambiguous selection below is by their shared remote
	// address), one rejected.
	pair := func(name, policy string, extra ...string) *node {
		n := c.startNode(name, name, policy, extra...)
		waitFor(t, name+" to be pending", func() bool { return c.isPending(n.id) })
		if r := c.cli("nodes", "approve", n.id); r.code != 0 {
			t.Fatalf("approve %s: %s", name, r)
		}
		waitFor(t, name+" to be connected", func() bool { return c.connected(n.id) })
		return n
	}
	alpha := pair("alpha", policyOnMiss, "--approvals-route", "gateway")
	beta := pair("beta", policyFull, "--allow-remote-widening") // its edit below adds a pattern
	gamma := c.startNode("gamma", "Gamma", policyFull)
	waitFor(t, "gamma to be pending", func() bool { return c.isPending(gamma.id) })
	if r := c.cli("nodes", "reject", gamma.id); r.code != 0 {
		t.Fatalf("reject: %s", r)
	}
	recs := auditLog(t, c.gwDir)
	for _, n := range []*node{alpha, beta} {
		var rec audit.Record
		for _, r := range recs {
			if r.Action == audit.ActionNodeApprove && r.NodeID == n.id {
				rec = r
			}
		}
		if rec.Event != audit.EventDecision || rec.Decision != audit.DecisionAllow || rec.Actor != cliActor || rec.RemoteIP != "127.0.0.1" || rec.ReasonCode != audit.ReasonOperator {
			t.Errorf("approve record of %s = %+v", n.name, rec)
		}
	}
	if r := findRecord(t, recs, audit.ActionNodeReject, audit.EventDecision, audit.ReasonOperator); r.NodeID != gamma.id || r.Decision != audit.DecisionDeny || r.Actor != cliActor {
		t.Errorf("reject record = %+v", r)
	}

	// Access control: an agent may not pair nodes, and a client without
	// the gateway token is refused at connect.
	actx, acancel := context.WithTimeout(context.Background(), waitLong)
	defer acancel()
	var nv bridge.NodeView
	if err := c.agentConn().Call(actx, bridge.MethodNodesApprove, bridge.NodeIDParams{NodeID: gamma.id}, &nv); bridge.AsError(err).Code != bridge.CodeForbidden {
		t.Fatalf("an agent approving a node: %v", err)
	}
	if _, _, err := bridge.Dial(actx, c.url, bridge.ConnectParams{Role: bridge.RoleOperator, Auth: bridge.Auth{Token: "ehg_wrong"},
		Client: bridge.ClientInfo{Name: "intruder"}}, nil, bridge.Options{}); err == nil {
		t.Fatal("a client with a wrong gateway token connected")
	}
	recs = auditLog(t, c.gwDir)
	if r := findRecord(t, recs, audit.ActionMethod, audit.EventDenied, audit.ReasonForbidden); r.Actor != "agent e2e-agent" || !strings.Contains(r.Reason, "needs the operator role") {
		t.Errorf("forbidden method record = %+v", r)
	}
	if r := findRecord(t, recs, audit.ActionClientConnect, audit.EventDenied, audit.ReasonBadToken); r.Actor != "operator intruder from 127.0.0.1" || !strings.Contains(r.Reason, "invalid or missing gateway token") {
		t.Errorf("bad gateway token record = %+v", r)
	}

	// Join keys: issued by an operator, used once by a node, refused the
	// second time; then the node is removed and its revoked token refused.
	r := c.cli("gateway", "join-key", "--ttl", "10m", "--json")
	if r.code != 0 {
		t.Fatalf("join-key: %s", r)
	}
	var jk bridge.JoinKeyResult
	mustJSON(t, r.stdout, &jk)
	delta := c.startNode("delta", "Delta", policyFull, "--join-key-file", keyFile(t, jk.Key))
	waitFor(t, "delta to connect", func() bool { return c.connected(delta.id) })
	again := c.startNode("epsilon", "Epsilon", policyFull, "--join-key-file", keyFile(t, jk.Key))
	waitFor(t, "the reused join key's refusal to be recorded", func() bool {
		return hasRecord(auditLog(t, c.gwDir), audit.ActionJoinKeyUse, audit.EventDenied, audit.ReasonBadJoinKey)
	})
	again.p.kill(t)
	if r := c.cli("nodes", "remove", delta.id); r.code != 0 {
		t.Fatalf("remove: %s", r)
	}
	_ = delta.p.wait(t, "removed node")
	stale := start(t, delta.dir, "node", "run", "--gateway", c.url, "--log-level", "debug")
	waitFor(t, "the revoked token's refusal to be recorded", func() bool {
		return hasRecord(auditLog(t, c.gwDir), audit.ActionNodeConnect, audit.EventDenied, audit.ReasonBadToken)
	})
	stale.kill(t)
	recs = auditLog(t, c.gwDir)
	issued := findRecord(t, recs, audit.ActionJoinKeyIssue, audit.EventDecision, audit.ReasonOperator)
	if issued.Actor != cliActor || strings.Contains(issued.Change, jk.Key) || !strings.HasPrefix(issued.Change, "key sha256 ") {
		t.Errorf("join key issued record = %+v", issued)
	}
	if used := findRecord(t, recs, audit.ActionJoinKeyUse, audit.EventDecision, audit.ReasonJoinKey); used.NodeID != delta.id || used.Actor != "node "+delta.id+" from 127.0.0.1" || used.DecidedBy != "join key" {
		t.Errorf("join key used record = %+v", used)
	}
	if bad := findRecord(t, recs, audit.ActionJoinKeyUse, audit.EventDenied, audit.ReasonBadJoinKey); bad.NodeID != again.id || bad.Decision != audit.DecisionDeny || !strings.Contains(bad.Reason, "join key is invalid, expired or already used") {
		t.Errorf("reused join key record = %+v", bad)
	}
	if rm := findRecord(t, recs, audit.ActionNodeRemove, audit.EventDecision, audit.ReasonOperator); rm.NodeID != delta.id || rm.Decision != audit.DecisionDeny || rm.Actor != cliActor {
		t.Errorf("remove record = %+v", rm)
	}
	if tok := findRecord(t, recs, audit.ActionNodeConnect, audit.EventDenied, audit.ReasonBadToken); tok.NodeID != delta.id || !strings.Contains(tok.Reason, "node token rejected for "+delta.id) {
		t.Errorf("revoked token record = %+v", tok)
	}
	for _, r := range recs {
		if strings.Contains(r.Change+r.Reason, jk.Key) {
			t.Errorf("a record holds the join key in clear: %+v", r)
		}
	}

	// Routing refusals, each with the words the caller saw.
	if code := w.do("POST", "api/binding", map[string]string{"agent": "bound", "node": alpha.id}, nil); code != http.StatusOK {
		t.Fatalf("api/binding: status %d", code)
	}
	bind := findRecord(t, auditLog(t, c.gwDir), audit.ActionBindingEdit, audit.EventDecision, audit.ReasonOperator)
	if bind.AgentID != "bound" || bind.NodeID != alpha.id || bind.Actor != "operator web UI" || bind.Change != fmt.Sprintf("tools.exec.node %q→%q", "", alpha.id) {
		t.Errorf("binding edit record = %+v", bind)
	}
	refusals := []struct {
		name, code, host, node string
		args                   []string
	}{
		{"binding", audit.ReasonBinding, "node", beta.id, []string{"--agent", "bound", "--session", "s1", "--host", "node", "--node", beta.id}},
		{"unknown node", audit.ReasonUnknownNode, "node", "nope", []string{"--agent", "a2", "--session", "s2", "--host", "node", "--node", "nope"}},
		{"ambiguous node", audit.ReasonAmbiguousNode, "node", "127.0.0.1", []string{"--agent", "a3", "--session", "s3", "--host", "node", "--node", "127.0.0.1"}},
		{"no node named", audit.ReasonNodeRequired, "node", "", []string{"--agent", "a4", "--session", "s4", "--host", "node"}},
		{"gateway security=deny", audit.ReasonSecurityDeny, "gateway", "gateway", []string{"--agent", "locked", "--session", "s5", "--host", "gateway"}},
	}
	for _, tc := range refusals {
		r := c.cli(append(append([]string{"exec"}, tc.args...), "/usr/bin/true")...)
		if r.code == 0 {
			t.Fatalf("%s: exec succeeded: %s", tc.name, r)
		}
		rec := findRecord(t, auditLog(t, c.gwDir), audit.ActionExec, audit.EventDenied, tc.code)
		if rec.Host != tc.host || rec.Command != "/usr/bin/true" || rec.Decision != audit.DecisionDeny || rec.AgentID != tc.args[1] || rec.SessionKey != tc.args[3] ||
			rec.Actor != "agent exechost-cli" || rec.Reason == "" || !strings.Contains(r.stderr, rec.Reason) {
			t.Errorf("%s: record = %+v\ncaller saw: %s", tc.name, rec, r)
		}
		if tc.node != "gateway" && rec.NodeID != tc.node {
			t.Errorf("%s: record names node %q, want %q", tc.name, rec.NodeID, tc.node)
		}
	}

	// Remote approvals edits: through the CLI (base = the node's current
	// file), and one with a stale base hash that the node refuses.
	f := filepath.Join(t.TempDir(), "p.json")
	writeFile(t, f, policyAllowlist)
	if r := c.cli("approvals", "set", "--node", beta.id, "--file", f); r.code != 0 {
		t.Fatalf("approvals set --node: %s", r)
	}
	recs = auditLog(t, c.gwDir)
	edit := findRecord(t, recs, audit.ActionApprovalsEdit, audit.EventDecision, audit.ReasonOperator)
	applied := findRecord(t, recs, audit.ActionApprovalsEdit, audit.EventDecision, audit.ReasonCompleted)
	if edit.NodeID != beta.id || edit.Actor != cliActor || len(edit.BaseHash) != 64 ||
		!strings.Contains(edit.Change, "defaults.security full→allowlist") || !strings.Contains(edit.Change, `agents.*.allowlist +"/usr/bin/true"`) {
		t.Errorf("approvals edit record = %+v", edit)
	}
	if applied.BaseHash != edit.BaseHash || len(applied.NewHash) != 64 || applied.NewHash == edit.BaseHash {
		t.Errorf("approvals applied record = %+v (edit %+v)", applied, edit)
	}
	// An edit of the gateway's own approvals in its web UI's editor.
	var st struct {
		Hash string `json:"hash"`
	}
	if code := w.do("GET", "api/state", nil, &st); code != http.StatusOK || st.Hash == "" {
		t.Fatalf("api/state: %d %+v", code, st)
	}
	if code := w.do("POST", "api/allowlist", map[string]string{"hash": st.Hash, "agent": "*", "op": "add", "pattern": "/usr/bin/make"}, nil); code != http.StatusOK {
		t.Fatalf("api/allowlist: status %d", code)
	}
	webEdit := findRecord(t, auditLog(t, c.gwDir), audit.ActionApprovalsEdit, audit.EventDecision, audit.ReasonOperator)
	if webEdit.Actor != "operator web UI" || webEdit.NodeID != "gateway" || webEdit.BaseHash != st.Hash || !strings.Contains(webEdit.Change, "/usr/bin/make") {
		t.Errorf("web UI approvals edit record = %+v", webEdit)
	}

	conn := dialOperator(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if _, err := bridge.NodeApprovalsSet(ctx, conn, beta.id, []byte(policyDeny), edit.BaseHash); err == nil {
		t.Fatal("set with a stale base hash succeeded")
	}
	failed := findRecord(t, auditLog(t, c.gwDir), audit.ActionApprovalsEdit, audit.EventDenied, audit.ReasonNodeError)
	if failed.NodeID != beta.id || failed.Actor != "operator e2e" || failed.BaseHash != edit.BaseHash || failed.Reason == "" {
		t.Errorf("refused approvals edit record = %+v", failed)
	}

	// A paired node that is not connected.
	beta.p.kill(t)
	waitFor(t, "beta to be disconnected", func() bool { return !c.connected(beta.id) })
	if r := c.cli("exec", "--agent", "a6", "--session", "s6", "--host", "node", "--node", beta.id, "/usr/bin/true"); r.code == 0 {
		t.Fatalf("exec on a disconnected node: %s", r)
	} else if rec := findRecord(t, auditLog(t, c.gwDir), audit.ActionExec, audit.EventDenied, audit.ReasonNodeOffline); rec.NodeID != beta.id || rec.AgentID != "a6" || !strings.Contains(r.stderr, rec.Reason) {
		t.Errorf("node offline record = %+v\ncaller saw: %s", rec, r)
	}

	// Operator decisions relayed for a node that routes its prompts to
	// the gateway: one answered by the CLI, one by the web UI.
	_, requested, _ := c.operatorConn("watcher")
	done := c.execBackground("--session", "relay", "--host", "node", "--node", alpha.id, "/usr/bin/id")
	req := next(t, requested, "exec.approval.requested")
	if r := c.cli("approvals", "resolve", req.ID, "allow-once"); r.code != 0 {
		t.Fatalf("resolve: %s", r)
	}
	if r := next(t, done, "exec to finish"); r.code != 0 {
		t.Fatalf("exec after allow-once: %s", r)
	}
	done = c.execBackground("--session", "relay", "--host", "node", "--node", alpha.id, "/usr/bin/id -u")
	req2 := next(t, requested, "exec.approval.requested")
	if code := w.do("POST", "api/decide", map[string]string{"id": req2.ID, "decision": "deny"}, nil); code != http.StatusOK {
		t.Fatalf("api/decide: status %d", code)
	}
	if r := next(t, done, "exec to be denied"); r.code == 0 {
		t.Fatalf("exec after deny: %s", r)
	}
	recs = auditLog(t, c.gwDir)
	allowed := findRecord(t, recs, audit.ActionApprovalRelay, audit.EventDecision, audit.ReasonOperator)
	if allowed.Approval != "allow-once" || allowed.DecidedBy != "operator exechost-cli" || allowed.NodeID != alpha.id ||
		allowed.Command != "/usr/bin/id" || allowed.SessionKey != "relay" || !strings.Contains(allowed.Reason, req.ID) {
		t.Errorf("relayed allow record = %+v", allowed)
	}
	denied := findRecord(t, recs, audit.ActionApprovalRelay, audit.EventDenied, audit.ReasonOperator)
	if denied.Approval != "deny" || denied.Decision != audit.DecisionDeny || denied.DecidedBy != "operator web UI" || !strings.Contains(denied.Reason, req2.ID) {
		t.Errorf("relayed deny record = %+v", denied)
	}

	wantMetrics := []string{
		decisionMetric(audit.ActionNodeApprove, audit.EventDecision, "", audit.ReasonOperator, 2),
		decisionMetric(audit.ActionNodeReject, audit.EventDecision, "", audit.ReasonOperator, 1),
		decisionMetric(audit.ActionNodeRemove, audit.EventDecision, "", audit.ReasonOperator, 1),
		// The revoked node retries with backoff until it is stopped: each
		// attempt is a refusal, so the count is at least one.
		decisionMetric(audit.ActionNodeConnect, audit.EventDenied, "", audit.ReasonBadToken, -1),
		decisionMetric(audit.ActionJoinKeyIssue, audit.EventDecision, "", audit.ReasonOperator, 1),
		decisionMetric(audit.ActionJoinKeyUse, audit.EventDecision, "", audit.ReasonJoinKey, 1),
		decisionMetric(audit.ActionJoinKeyUse, audit.EventDenied, "", audit.ReasonBadJoinKey, 1),
		decisionMetric(audit.ActionMethod, audit.EventDenied, "", audit.ReasonForbidden, 1),
		decisionMetric(audit.ActionClientConnect, audit.EventDenied, "", audit.ReasonBadToken, 1),
		decisionMetric(audit.ActionBindingEdit, audit.EventDecision, "", audit.ReasonOperator, 1),
		decisionMetric(audit.ActionExec, audit.EventDenied, "node", audit.ReasonBinding, 1),
		decisionMetric(audit.ActionExec, audit.EventDenied, "node", audit.ReasonUnknownNode, 1),
		decisionMetric(audit.ActionExec, audit.EventDenied, "node", audit.ReasonAmbiguousNode, 1),
		decisionMetric(audit.ActionExec, audit.EventDenied, "node", audit.ReasonNodeRequired, 1),
		decisionMetric(audit.ActionExec, audit.EventDenied, "gateway", audit.ReasonSecurityDeny, 1),
		decisionMetric(audit.ActionExec, audit.EventDenied, "node", audit.ReasonNodeOffline, 1),
		decisionMetric(audit.ActionApprovalsEdit, audit.EventDecision, "", audit.ReasonOperator, 2),
		decisionMetric(audit.ActionApprovalsEdit, audit.EventDecision, "gateway", audit.ReasonOperator, 1),
		decisionMetric(audit.ActionApprovalsEdit, audit.EventDecision, "", audit.ReasonCompleted, 1),
		decisionMetric(audit.ActionApprovalsEdit, audit.EventDenied, "", audit.ReasonNodeError, 1),
		decisionMetric(audit.ActionApprovalRelay, audit.EventDecision, "node", audit.ReasonOperator, 1),
		decisionMetric(audit.ActionApprovalRelay, audit.EventDenied, "node", audit.ReasonOperator, 1),
	}

	t.Run("sandbox", func(t *testing.T) {
		if strings.Contains(c.gw.Out.String(), "host=sandbox unavailable") {
			testdep.Missing(t, "bwrap sandbox", "the bwrap backend does not work here: "+c.gw.Out.String())
		}
		res, r := c.execJSON("--agent", "sbx", "--session", "sb", "--host", "sandbox", "echo in-sandbox")
		if r.code != 0 || res.Host != "sandbox" || res.Stdout != "in-sandbox\n" {
			t.Fatalf("exec host=sandbox: %+v\n%s", res, r)
		}
		// An agent id that cannot name a workspace: the backend fails to
		// run it, which is a failure, never a denial (nothing decided
		// against the command).
		if r := c.cli("exec", "--agent", "bad agent", "--session", "sb", "--host", "sandbox", "echo no"); r.code == 0 {
			t.Fatalf("exec host=sandbox with a bad agent id succeeded: %s", r)
		} else {
			rec := findRecord(t, auditLog(t, c.gwDir), audit.ActionExec, audit.EventFinished, audit.ReasonSandboxError)
			if rec.Host != "sandbox" || rec.Backend != "bwrap" || rec.AgentID != "bad agent" || rec.Decision != audit.DecisionAllow ||
				rec.ExitCode != nil || rec.Error == "" || !strings.Contains(r.stderr, rec.Error) {
				t.Errorf("sandbox failure record = %+v\ncaller saw: %s", rec, r)
			}
			evs := strings.Join(c.events("sb", "bad agent"), "\n")
			if !strings.Contains(evs, "Exec failed (node=sandbox, id=run-") || strings.Contains(evs, "Exec denied") {
				t.Errorf("session events after a sandbox failure:\n%s", evs)
			}
		}
		recs := auditLog(t, c.gwDir)
		// Recorded before it starts, then its outcome, under its run id.
		var began, fin audit.Record
		for _, rec := range recs {
			if rec.RunID == res.RunID && rec.Event == audit.EventDecision && rec.ReasonCode == audit.ReasonAllowed {
				began = rec
			}
			if rec.RunID == res.RunID && rec.Event == audit.EventFinished && rec.ReasonCode == audit.ReasonCompleted {
				fin = rec
			}
		}
		for _, rec := range []audit.Record{began, fin} {
			if rec.RunID != res.RunID || rec.Host != "sandbox" || rec.Backend != "bwrap" || rec.Scope != "agent" ||
				rec.AgentID != "sbx" || rec.SessionKey != "sb" || rec.Command != "echo in-sandbox" || rec.Decision != audit.DecisionAllow {
				t.Errorf("sandbox record = %+v", rec)
			}
		}
		if fin.ExitCode == nil || *fin.ExitCode != 0 {
			t.Errorf("sandbox finished record has no exit code 0: %+v", fin)
		}
		m := scrape(t, metricsURL)
		for _, want := range []string{
			// Both requests passed the gateway; the backend refused one.
			decisionMetric(audit.ActionExec, audit.EventDecision, "sandbox", audit.ReasonAllowed, 2),
			decisionMetric(audit.ActionExec, audit.EventFinished, "sandbox", audit.ReasonCompleted, 1),
			decisionMetric(audit.ActionExec, audit.EventFinished, "sandbox", audit.ReasonSandboxError, 1),
		} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})

	t.Run("metrics", func(t *testing.T) {
		m := scrape(t, metricsURL)
		for _, want := range wantMetrics {
			if !strings.Contains(m, want) {
				t.Errorf("metrics lack %s", want)
			}
		}
		if t.Failed() {
			t.Logf("scraped:\n%s", grepLines(m, "exechost_gateway_decisions_total"))
		}
	})

	t.Run("verify and tamper", func(t *testing.T) {
		r := run(t, c.gwDir, "audit", "verify")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "ok: ") {
			t.Fatalf("audit verify over the gateway's log: %s", r)
		}
		path := filepath.Join(c.gwDir, "audit.jsonl")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitAfter(string(data), "\n")
		n := -1
		for i, l := range lines {
			if strings.Contains(l, `"reasonCode":"binding"`) {
				n = i
			}
		}
		if n < 0 {
			t.Fatal("no binding refusal line to tamper with")
		}
		// An attacker hides who was refused: same length, new content.
		lines[n] = strings.Replace(lines[n], `"agentId":"bound"`, `"agentId":"bnuod"`, 1)
		if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
			t.Fatal(err)
		}
		r = run(t, c.gwDir, "audit", "verify")
		if want := fmt.Sprintf("audit.jsonl:%d:", n+1); r.code != 1 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "hash mismatch") {
			t.Fatalf("audit verify after tampering with line %d: %s", n+1, r)
		}
	})
}

// TestGatewayAuditSandboxUnavailable: a host=sandbox request on a gateway
// without a sandbox is refused, recorded and counted as host-unavailable,
// never run on the host.
func TestGatewayAuditSandboxUnavailable(t *testing.T) {
	c := &cluster{t: t, gwDir: newStateDir(t, "gateway"), nodes: map[string]*node{}}
	writeFile(t, filepath.Join(c.gwDir, "exechost.json"), gatewayConfig) // sandbox.backend none
	writeFile(t, filepath.Join(c.gwDir, "exec-approvals.json"), policyFull)
	c.gw = start(t, c.gwDir, "gateway", "--log-level", "debug", "--metrics-listen", "127.0.0.1:0")
	waitFor(t, "gateway and metrics to listen", func() bool {
		out := c.gw.Out.String()
		return urlRE.MatchString(out) && metricsURLRE.MatchString(out)
	})
	c.url = urlRE.FindStringSubmatch(c.gw.Out.String())[1]
	metricsURL := metricsURLRE.FindStringSubmatch(c.gw.Out.String())[1]
	r := c.cli("exec", "--session", "sb", "--host", "sandbox", "echo never")
	if r.code == 0 || strings.Contains(r.stdout, "never") {
		t.Fatalf("host=sandbox without a sandbox: %s", r)
	}
	rec := findRecord(t, auditLog(t, c.gwDir), audit.ActionExec, audit.EventDenied, audit.ReasonHostUnavailable)
	if rec.Host != "sandbox" || rec.Decision != audit.DecisionDeny || rec.SessionKey != "sb" || rec.Scope != "session" ||
		rec.RunID == "" || !strings.Contains(r.stderr, rec.Reason) {
		t.Errorf("record = %+v\ncaller saw: %s", rec, r)
	}
	if want := decisionMetric(audit.ActionExec, audit.EventDenied, "sandbox", audit.ReasonHostUnavailable, 1); !strings.Contains(scrape(t, metricsURL), want) {
		t.Errorf("metrics lack %s", want)
	}
	if r := run(t, c.gwDir, "audit", "verify"); r.code != 0 {
		t.Errorf("audit verify: %s", r)
	}
}

// grepLines returns the lines of s containing sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
