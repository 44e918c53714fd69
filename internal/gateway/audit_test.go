package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/metrics"
	"github.com/exechost/exechost/internal/prompt"
)

// memRecorder keeps records in memory; fail makes every Record fail.
type memRecorder struct {
	mu   sync.Mutex
	recs []audit.Record
	fail error
}

func (m *memRecorder) Record(r audit.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.recs = append(m.recs, r)
	return nil
}

func (m *memRecorder) last(t *testing.T) audit.Record {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.recs) == 0 {
		t.Fatal("nothing recorded")
	}
	return m.recs[len(m.recs)-1]
}

func newAuditedGateway(t *testing.T, rec AuditRecorder) *Gateway {
	t.Helper()
	g, err := New(Options{StateDir: t.TempDir(), Audit: rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

// TestExecRefusalsRecorded: requests refused at the gateway are recorded
// with their class, the caller's ids and the message the caller got; a
// failing audit log never turns a refusal into a run.
func TestExecRefusalsRecorded(t *testing.T) {
	rec := &memRecorder{}
	g := newAuditedGateway(t, rec)
	ctx := withCaller(context.Background(), caller{role: bridge.RoleAgent, name: "tester"})
	for _, tc := range []struct {
		name string
		p    bridge.ExecParams
		code string
	}{
		{"no nodes paired", bridge.ExecParams{Command: "true", Host: "node", AgentID: "a", SessionKey: "s"}, audit.ReasonUnknownNode},
		{"security=deny", bridge.ExecParams{Command: "true", Host: "gateway", Security: "deny"}, audit.ReasonSecurityDeny},
		{"host=gateway unavailable", bridge.ExecParams{Command: "true", Host: "gateway", Security: "full"}, audit.ReasonHostUnavailable},
		{"host=sandbox unavailable", bridge.ExecParams{Command: "true", Host: "sandbox"}, audit.ReasonHostUnavailable},
		{"bad host", bridge.ExecParams{Command: "true", Host: "moon"}, audit.ReasonInvalidRequest},
		{"empty command", bridge.ExecParams{Command: " "}, audit.ReasonInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := g.Exec(ctx, tc.p)
			if err == nil {
				t.Fatal("exec succeeded")
			}
			r := rec.last(t)
			if r.Action != audit.ActionExec || r.Event != audit.EventDenied || r.Decision != audit.DecisionDeny || r.ReasonCode != tc.code ||
				r.Reason != bridge.AsError(err).Message || r.Actor != "agent tester" {
				t.Errorf("record = %+v\nerr = %v", r, err)
			}
		})
	}
	if r := rec.recs[0]; r.AgentID != "a" || r.SessionKey != "s" || r.Host != "node" {
		t.Errorf("first record = %+v", r)
	}
	// An agent whose in-flight limit is full is refused BUSY, with its
	// own reason code.
	var held []func()
	for {
		release, err := g.admit(g.cfg.Load(), "hog")
		if err != nil {
			break
		}
		if held = append(held, release); len(held) > 1<<16 {
			t.Fatal("admission never refuses: no per-agent limit")
		}
	}
	_, err := g.Exec(ctx, bridge.ExecParams{Command: "true", Host: "sandbox", AgentID: "hog", SessionKey: "s"})
	if r := rec.last(t); bridge.AsError(err).Code != bridge.CodeBusy || r.Event != audit.EventDenied || r.ReasonCode != audit.ReasonBusy || r.Reason != bridge.AsError(err).Message {
		t.Errorf("busy: err = %v, record = %+v", err, r)
	}
	for _, release := range held {
		release()
	}
	rec.fail = errors.New("disk full")
	if _, err := g.Exec(ctx, bridge.ExecParams{Command: "true", Host: "gateway", Security: "deny"}); bridge.AsError(err).Code != bridge.CodeDenied {
		t.Errorf("with a failing audit log the refusal must stand: %v", err)
	}
}

// TestRelayNoAnswerRecorded: a prompt nobody answers before its deadline
// is recorded as denied by askFallback with the prompt's request.
func TestRelayNoAnswerRecorded(t *testing.T) {
	rec := &memRecorder{}
	g := newAuditedGateway(t, rec)
	req := prompt.Request{Command: "rm -rf /tmp/x", Host: "node", NodeID: "n1", AgentID: "main", SessionKey: "s",
		Reason: "allowlist-miss", Fallback: "deny", ExpiresAtMs: time.Now().Add(-time.Second).UnixMilli()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, _, _, err := g.prompts.submit(ctx, req, "node n1")
	if !errors.Is(err, prompt.ErrTimeout) {
		t.Fatalf("submit past its deadline: %v", err)
	}
	r := rec.last(t)
	if r.Action != audit.ActionApprovalRelay || r.Event != audit.EventDenied || r.ReasonCode != audit.ReasonNoAnswer ||
		!r.Fallback || r.DecidedBy != "askFallback=deny" || r.Command != req.Command || r.NodeID != "n1" || !strings.Contains(r.Reason, id) {
		t.Errorf("record = %+v", r)
	}
}

// TestApprovalsChange: an edit's record says what changed, not the files.
func TestApprovalsChange(t *testing.T) {
	cur := `{"version":1,"defaults":{"security":"full","ask":"off"},"agents":{"main":{"allowlist":[{"pattern":"/bin/ls"},{"pattern":"/usr/bin/git"}]}}}`
	for _, tc := range []struct {
		name, cur, next, want string
	}{
		{"settings and patterns", cur,
			`{"version":1,"defaults":{"security":"allowlist","ask":"off"},"agents":{"main":{"ask":"always","allowlist":[{"pattern":"/usr/bin/git"},{"pattern":"/usr/bin/make"}]},"ops":{"security":"deny"}}}`,
			`defaults.security full→allowlist; agents.main.ask (unset)→always; agents.main.allowlist +"/usr/bin/make"; agents.main.allowlist -"/bin/ls"; agents.ops.security (unset)→deny`},
		{"no change", cur, cur, "no policy change"},
		{"current unknown", "", cur, "current file unknown; new file hash "},
		{"new file broken", cur, `{"version":`, "new file does not parse (the node will refuse it): "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c []byte
			if tc.cur != "" {
				c = []byte(tc.cur)
			}
			got := approvalsChange(c, []byte(tc.next))
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("approvalsChange =\n%s\nwant prefix\n%s", got, tc.want)
			}
		})
	}
	many := `{"version":1,"agents":{"main":{"allowlist":[` + strings.Repeat(`{"pattern":"/usr/bin/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"},`, 100) + `{"pattern":"/bin/true"}]}}}`
	if got := approvalsChange([]byte(cur), []byte(many)); len(got) > MaxChange+len(" …(truncated)") {
		t.Errorf("change summary not bounded: %d bytes", len(got))
	}
}

// TestUnauthRecordsRateLimited: refusals of unauthenticated peers cannot
// flood the audit log (and rotate away what matters): one source gets one
// record per UnauthInterval, all sources together at most the burst; the
// rest are counted but not recorded, and the next record says how many
// were left out.
func TestUnauthRecordsRateLimited(t *testing.T) {
	rec := &memRecorder{}
	m := metrics.New()
	g, err := New(Options{StateDir: t.TempDir(), Audit: rec, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	now := time.Unix(1_800_000_000, 0)
	g.unauth.now = func() time.Time { return now }
	const tries = UnauthRecordBurst + 10
	for range tries {
		g.clientRefused(context.Background(), bridge.ConnectParams{Role: bridge.RoleOperator}, "192.0.2.1:5555", bridge.Errorf(bridge.CodeUnauthorized, "invalid or missing gateway token"))
	}
	if len(rec.recs) != 1 {
		t.Fatalf("recorded %d refusals of one source, want 1 per interval", len(rec.recs))
	}
	if r := rec.recs[0]; r.Actor != "operator unnamed client from 192.0.2.1" || r.RemoteIP != "192.0.2.1" || r.ReasonCode != audit.ReasonBadToken {
		t.Errorf("record = %+v", r)
	}
	// Loopback addresses are one source: 127.0.0.x does not evade it.
	for i := range 10 {
		g.clientRefused(context.Background(), bridge.ConnectParams{Role: bridge.RoleOperator}, fmt.Sprintf("127.0.0.%d:5555", i+1), bridge.Errorf(bridge.CodeUnauthorized, "no"))
	}
	if len(rec.recs) != 2 {
		t.Fatalf("recorded %d refusals, want one more for loopback", len(rec.recs))
	}
	// Another kind of refusal from the same source is recorded at once.
	g.nodeRefused(context.Background(), audit.ActionJoinKeyUse, audit.ReasonBadJoinKey, "n1", "192.0.2.1", bridge.Errorf(bridge.CodeUnauthorized, "join key is invalid"))
	if r := rec.last(t); r.Action != audit.ActionJoinKeyUse || r.Change != "" {
		t.Errorf("a join key refusal after bad tokens = %+v", r)
	}
	now = now.Add(UnauthInterval)
	g.clientRefused(context.Background(), bridge.ConnectParams{Role: bridge.RoleOperator}, "192.0.2.1:5555", bridge.Errorf(bridge.CodeUnauthorized, "invalid or missing gateway token"))
	if r := rec.last(t); r.Action != audit.ActionClientConnect || !strings.HasPrefix(r.Change, fmt.Sprintf("%d earlier refusals like this from 192.0.2.1", tries-1)) {
		t.Errorf("record after the interval = %+v", r)
	}
	// Many sources at once: the global burst still bounds them.
	for i := range UnauthRecordBurst + 5 {
		g.clientRefused(context.Background(), bridge.ConnectParams{Role: bridge.RoleOperator}, fmt.Sprintf("198.51.100.%d:1", i), bridge.Errorf(bridge.CodeUnauthorized, "no"))
	}
	if n := len(rec.recs); n > 4+UnauthRecordBurst {
		t.Errorf("recorded %d refusals from many sources, want at most the burst", n)
	}
	counted := m.DecisionsCounted(audit.ActionClientConnect, "")
	if want := tries + 10 + 1 + UnauthRecordBurst + 5; counted != uint64(want) {
		t.Errorf("metric counted %v refusals, want all %d", counted, want)
	}
}
