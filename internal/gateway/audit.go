package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/time/rate"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/session"
)

// AuditRecorder is where the gateway records its own decisions (routing
// refusals, sandbox runs, pairing, relayed edits and answers);
// *audit.Recorder implements it. Record returns once the line is durable,
// and the gateway records a decision before acting on it.
type AuditRecorder interface {
	Record(audit.Record) error
}

// MaxChange bounds the change summary of an approvals edit in a record: a
// whole rewritten file is summarised, never copied into the log.
const MaxChange = 2048

// Bounds on audit records about unauthenticated peers (wrong tokens, bad
// join keys): anyone who reaches the port can cause them, and without a
// bound they could fill the log until rotation drops the records that
// matter. One source (sourceKey: an address, all of loopback, an IPv6 /64)
// gets one record per UnauthInterval for each kind of refusal (action and
// reason code: a bad token and a used join key are both recorded), and all
// sources together at most
// UnauthRecordsPerSecond (burst UnauthRecordBurst). Beyond that refusals
// are still counted in the metric, and the next record says how many went
// unrecorded.
const (
	UnauthInterval         = time.Minute
	UnauthRecordsPerSecond = 5
	UnauthRecordBurst      = 50
	// MaxUnauthSources bounds the sources remembered for UnauthInterval;
	// beyond it, new sources share the global limit's count.
	MaxUnauthSources = 4096
)

// unauthAudit is the rate limit on records about unauthenticated peers.
type unauthAudit struct {
	mu      sync.Mutex
	lim     *rate.Limiter
	now     func() time.Time // tests inject a clock
	dropped int              // left out by the global limit
	sources map[string]*unauthSource
}

// unauthSource is one source's last record and what it left out since.
type unauthSource struct {
	last       time.Time
	suppressed int
}

// allow reports whether a record about an unauthenticated peer from
// source may be written now, how many of this source's refusals were
// left out since its last record, and how many of all sources' the
// global limit left out.
func (u *unauthAudit) allow(source string) (ok bool, same, others int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.lim == nil {
		u.lim = rate.NewLimiter(UnauthRecordsPerSecond, UnauthRecordBurst)
		u.sources = make(map[string]*unauthSource)
	}
	now := time.Now
	if u.now != nil {
		now = u.now
	}
	t := now()
	src := u.sources[source]
	if src != nil && t.Sub(src.last) < UnauthInterval {
		src.suppressed++
		return false, 0, 0
	}
	if src == nil && len(u.sources) >= MaxUnauthSources {
		for k, v := range u.sources {
			if t.Sub(v.last) >= UnauthInterval && v.suppressed == 0 {
				delete(u.sources, k)
			}
		}
	}
	if !u.lim.AllowN(t, 1) || (src == nil && len(u.sources) >= MaxUnauthSources) {
		u.dropped++
		return false, 0, 0
	}
	if src == nil {
		src = &unauthSource{}
		u.sources[source] = src
	}
	same, others = src.suppressed, u.dropped
	src.last, src.suppressed, u.dropped = t, 0, 0
	return true, same, others
}

// auditUnauth records rec (about an unauthenticated peer) within the rate
// limits, and always counts it.
func (g *Gateway) auditUnauth(ctx context.Context, rec audit.Record) {
	ok, same, others := g.unauth.allow(sourceKey(rec.RemoteIP) + "|" + rec.Action + "|" + rec.ReasonCode)
	if !ok {
		g.opts.Metrics.ObserveDecision(rec.Action, rec.Event, rec.ReasonCode, rec.Host)
		return
	}
	var notes []string
	if same > 0 {
		notes = append(notes, fmt.Sprintf("%d earlier refusals like this from %s not recorded (one record per source and kind per %s)", same, sourceKey(rec.RemoteIP), UnauthInterval))
	}
	if others > 0 {
		notes = append(notes, fmt.Sprintf("%d earlier refusals of unauthenticated peers not recorded (rate limit %d/s)", others, UnauthRecordsPerSecond))
	}
	rec.Change = strings.Join(notes, "; ")
	_ = g.auditEvent(ctx, rec)
}

// Bounds on the records of issued credentials' refusals
// (audit.Aggregator, one per gateway: g.refusals).
const (
	// RefusalBurst is how many refusals of one kind (caller, action,
	// reason) are recorded each in full before aggregation starts.
	RefusalBurst = audit.DefaultAggregateBurst
	// RefusalInterval is how often one more is recorded after that; the
	// record says how many were left out since the last one.
	RefusalInterval = audit.DefaultAggregateInterval
	// MaxRefusalKinds bounds the kinds tracked at once.
	MaxRefusalKinds = audit.DefaultAggregateKinds
)

// newRefusalAudit returns the aggregator of issued credentials' refusals:
// per kind RefusalBurst then one per RefusalInterval, and the global rate
// unauthenticated peers' records have. The gateway token is not counted:
// its holder owns the machine, log included.
func newRefusalAudit() *audit.Aggregator {
	return audit.NewAggregator(audit.AggregatorOptions{
		Burst: RefusalBurst, Interval: RefusalInterval, MaxKinds: MaxRefusalKinds,
		GlobalRate: UnauthRecordsPerSecond, GlobalBurst: UnauthRecordBurst,
	})
}

// refusalCounts returns, for each kind with refusals left out, the last
// one carrying their count: what a caller that stops being refused left
// out is still recorded.
func (g *Gateway) refusalCounts() []audit.Record {
	var out []audit.Record
	for _, p := range g.refusals.Flush() {
		rec := p.Record
		who, _, _ := strings.Cut(p.Kind, "|")
		rec.Change = fmt.Sprintf("%d refusals like this of %s not recorded (after %d, one per %s); this is the last of them", p.Count, who, RefusalBurst, RefusalInterval)
		out = append(out, rec)
	}
	return out
}

// flushRefusals writes what g.refusals left out, every RefusalInterval
// until ctx ends, and once more then.
func (g *Gateway) flushRefusals(ctx context.Context) {
	t := time.NewTicker(RefusalInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			g.writeRefusalCounts()
			return
		case <-t.C:
			g.writeRefusalCounts()
		}
	}
}

// writeRefusalCounts records g.refusals' counts of refusals left out.
func (g *Gateway) writeRefusalCounts() {
	if g.opts.Audit == nil {
		return
	}
	for _, rec := range g.refusalCounts() {
		if err := g.opts.Audit.Record(rec); err != nil {
			g.log.Error("audit record failed", "action", rec.Action, "event", rec.Event, "err", err)
		}
	}
}

// aggregateRefusal decides whether an issued credential's refusal is
// written (g.refusals); the next one written says how many were left
// out. Without it one agent connection refused 94,200 times in 5 s
// rotated an operator's record out of every file of the log.
func (g *Gateway) aggregateRefusal(c caller, rec *audit.Record) bool {
	ok, same, others := g.refusals.Allow(c.key()+"|"+rec.Action+"|"+rec.ReasonCode, *rec)
	if !ok {
		return false
	}
	var notes []string
	if same > 0 {
		notes = append(notes, fmt.Sprintf("%d earlier refusals like this of %s not recorded (after %d, one per %s)", same, c.key(), RefusalBurst, RefusalInterval))
	}
	if others > 0 {
		notes = append(notes, fmt.Sprintf("%d earlier refusals of credentials not recorded (rate limit %d/s)", others, UnauthRecordsPerSecond))
	}
	if len(notes) > 0 {
		if rec.Change != "" {
			notes = append([]string{rec.Change}, notes...)
		}
		rec.Change = strings.Join(notes, "; ")
	}
	return true
}

// callerKey carries the connection's caller through a request's context,
// so decisions deep in a method can name who asked.
type callerKey struct{}

// withCaller returns ctx carrying c.
func withCaller(ctx context.Context, c caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// actorOf names who sent the request ctx belongs to. A request with no
// connection behind it comes from this process (`exechost up` approving
// the local node it started).
func actorOf(ctx context.Context) string {
	c, ok := ctx.Value(callerKey{}).(caller)
	if !ok {
		return "gateway process (exechost up)"
	}
	name := c.name
	if name == "" {
		name = "unnamed client"
	}
	return c.role + " " + name
}

// auditEvent records one gateway decision and counts it in
// exechost_gateway_decisions_total. The actor defaults to ctx's caller and
// the decision to what the event implies. A failed append is logged loudly
// (the recorder's warn) and returned; callers keep the decision they made
// either way, as execution hosts do: a denial stays a denial, and a full
// disk does not stop the gateway.
func (g *Gateway) auditEvent(ctx context.Context, rec audit.Record) error {
	if rec.Actor == "" {
		rec.Actor = actorOf(ctx)
	}
	if rec.Decision == "" {
		rec.Decision = audit.DecisionAllow
		if rec.Event == audit.EventDenied || rec.Action == audit.ActionNodeReject || rec.Action == audit.ActionNodeRemove {
			rec.Decision = audit.DecisionDeny
		}
	}
	g.opts.Metrics.ObserveDecision(rec.Action, rec.Event, rec.ReasonCode, rec.Host)
	if g.opts.Audit == nil {
		return nil
	}
	if c, ok := ctx.Value(callerKey{}).(caller); ok && rec.Event == audit.EventDenied && c.credential != "" {
		if !g.aggregateRefusal(c, &rec) {
			return nil
		}
	}
	if err := g.opts.Audit.Record(rec); err != nil {
		g.log.Error("audit record failed", "action", rec.Action, "event", rec.Event, "err", err)
		return err
	}
	return nil
}

// refused records an exec request the gateway refuses before any
// execution host sees it, and returns err unchanged (so a call site stays
// one line). code "" derives the reason code from err's wire code. The
// record's reason is the message the caller gets.
func (g *Gateway) refused(ctx context.Context, p bridge.ExecParams, host policy.Host, node, code string, err error) error {
	if code == "" {
		code = refusalCode(err)
	}
	_ = g.auditEvent(ctx, execRecord(p, host, node, audit.EventDenied, code, bridge.AsError(err).Message))
	return err
}

// execRecord is the one shape of the gateway's records about an exec:
// refusals before any host sees it, and the runs auditRun records.
func execRecord(p bridge.ExecParams, host policy.Host, node, event, code, reason string) audit.Record {
	var key session.Key
	if checkSession(p.AgentID, p.SessionKey) == nil {
		// The ids the run would have had; oversized ones stay out of
		// the log (the refusal says they were too long).
		key = session.NewKey(p.AgentID, p.SessionKey)
	}
	return audit.Record{
		Event: event, SessionKey: key.Session, AgentID: key.Agent, Host: string(host), NodeID: node,
		Command: p.Command, Cwd: p.Cwd, Reason: reason, DecidedBy: "gateway",
		GatewayFields: audit.GatewayFields{Action: audit.ActionExec, ReasonCode: code},
	}
}

// auditRun is the gateway's one audit path for an admitted run on target
// t: a refusal by a target that is not available here, a boundary
// target's start and outcome, and a run any target failed to carry out
// (res then carries the error). reason is what the caller was told.
func (g *Gateway) auditRun(ctx context.Context, t boundTarget, x *execution, event, code, reason string, res *bridge.SystemRunResult) {
	rec := execRecord(x.p, x.eff.Host, x.label, event, code, reason)
	rec.RunID = x.run.id
	t.annotate(&rec)
	if res != nil {
		if res.Error == "" {
			exit := res.ExitCode
			rec.ExitCode = &exit
		}
		rec.TimedOut, rec.DurationMs = res.TimedOut, time.Since(x.run.started).Milliseconds()
		rec.Truncated, rec.Error = res.Truncated, res.Error
	}
	_ = g.auditEvent(ctx, rec)
}

// refusalCode classifies a routing error by its wire code.
func refusalCode(err error) string {
	switch bridge.AsError(err).Code {
	case bridge.CodeDenied:
		return audit.ReasonBinding
	case bridge.CodeNotFound:
		return audit.ReasonUnknownNode
	case bridge.CodeAmbiguous:
		return audit.ReasonAmbiguousNode
	case bridge.CodeNodeRequired:
		return audit.ReasonNodeRequired
	case bridge.CodeUnavailable:
		return audit.ReasonNodeOffline
	case bridge.CodeInvalidRequest:
		return audit.ReasonInvalidRequest
	case bridge.CodeBusy:
		return audit.ReasonBusy
	}
	return audit.ReasonOther
}

// auditNode records a pairing decision about nc (approve, reject, remove
// or a join key's use), with why in the caller's words.
func (g *Gateway) auditNode(ctx context.Context, action, code string, nc *nodeConn, reason string) {
	rec := audit.Record{
		Event: audit.EventDecision, NodeID: nc.id, Reason: reason, DecidedBy: "operator",
		GatewayFields: audit.GatewayFields{Action: action, ReasonCode: code, RemoteIP: nc.remoteIP},
	}
	if action == audit.ActionJoinKeyUse {
		// No operator in the loop: the node presented the key itself.
		rec.DecidedBy, rec.Actor = "join key", "node "+nc.id+" from "+nc.remoteIP
	}
	_ = g.auditEvent(ctx, rec)
}

// currentApprovals fetches a node's exec-approvals.json (redacted) so an
// edit's record can say what it changes; nil when the node cannot say.
func (g *Gateway) currentApprovals(ctx context.Context, nc *nodeConn, timeout time.Duration) json.RawMessage {
	payload, err := g.invoke(ctx, nc, bridge.CmdExecApprovalsGet, struct{}{}, timeout, "")
	if err != nil {
		return nil
	}
	var res bridge.ApprovalsGetResult
	if bridge.Unmarshal(payload, &res) != nil || !res.Exists {
		return nil
	}
	return res.File
}

// auditRemoved records a paired node's removal (token revoked).
func (g *Gateway) auditRemoved(ctx context.Context, id string, rec *nodeRecord) {
	var ip string
	if rec != nil {
		ip = rec.RemoteIP
	}
	_ = g.auditEvent(ctx, audit.Record{
		Event: audit.EventDecision, NodeID: id, Reason: "node removed by the operator; its token is revoked", DecidedBy: "operator",
		GatewayFields: audit.GatewayFields{Action: audit.ActionNodeRemove, ReasonCode: audit.ReasonOperator, RemoteIP: ip},
	})
}

// nodeRefused records a node connection refused for its credentials and
// returns e unchanged (the refusal the node gets).
func (g *Gateway) nodeRefused(ctx context.Context, action, code, nodeID, remoteIP string, e *bridge.Error) *bridge.Error {
	g.auditUnauth(ctx, audit.Record{
		Event: audit.EventDenied, NodeID: nodeID, Reason: e.Message, DecidedBy: "gateway",
		GatewayFields: audit.GatewayFields{Action: action, ReasonCode: code, Actor: "node " + nodeID + " from " + remoteIP, RemoteIP: remoteIP},
	})
	return e
}

// clientRefused records an agent or operator connection refused for its
// gateway token and returns e unchanged (the refusal the client gets).
func (g *Gateway) clientRefused(ctx context.Context, p bridge.ConnectParams, remote string, e *bridge.Error) *bridge.Error {
	ip, _, err := net.SplitHostPort(remote)
	if err != nil {
		ip = remote
	}
	name := cleanText(p.Client.Name, 64)
	if name == "" {
		name = "unnamed client"
	}
	g.auditUnauth(ctx, audit.Record{
		Event: audit.EventDenied, Reason: e.Message, DecidedBy: "gateway",
		GatewayFields: audit.GatewayFields{Action: audit.ActionClientConnect, ReasonCode: audit.ReasonBadToken,
			Actor: fmt.Sprintf("%s %s from %s", cleanText(p.Role, 16), name, ip), RemoteIP: ip},
	})
	return e
}

// forbidden records a request refused for the caller's role and returns
// e unchanged.
func (g *Gateway) forbidden(ctx context.Context, e *bridge.Error) *bridge.Error {
	_ = g.auditEvent(ctx, audit.Record{
		Event: audit.EventDenied, Reason: e.Message, DecidedBy: "gateway",
		GatewayFields: audit.GatewayFields{Action: audit.ActionMethod, ReasonCode: audit.ReasonForbidden},
	})
	return e
}

// auditElevated records an operator's /elevated and what the session's
// settings became.
func (g *Gateway) auditElevated(ctx context.Context, p bridge.SessionCommandParams, res bridge.SessionCommandResult) {
	_ = g.auditEvent(ctx, audit.Record{
		Event: audit.EventDecision, AgentID: p.AgentID, DecidedBy: "operator", Reason: bounded(res.Reply),
		GatewayFields: audit.GatewayFields{Action: audit.ActionElevated, ReasonCode: audit.ReasonOperator,
			Change: bounded(cleanText(p.Text, 64))},
	})
}

// auditJoinKeyIssued records a new join key (never the key itself).
func (g *Gateway) auditJoinKeyIssued(ctx context.Context, res bridge.JoinKeyResult) {
	_ = g.auditEvent(ctx, audit.Record{
		Event: audit.EventDecision, DecidedBy: "operator",
		Reason: fmt.Sprintf("one-time join key issued, valid until %d (Unix ms)", res.ExpiresAt),
		GatewayFields: audit.GatewayFields{Action: audit.ActionJoinKeyIssue, ReasonCode: audit.ReasonOperator,
			// The key's hash prefix ties issue and use together
			// without making the log a place to steal keys from.
			Change: "key sha256 " + hashSecret(res.Key)[:12]},
	})
}

// auditApprovalsEdit records an operator's edit of a node's approvals
// before the gateway relays it, with what changes against the node's
// current file (current, from system.execApprovals.get; nil when that
// failed).
func (g *Gateway) auditApprovalsEdit(ctx context.Context, nc *nodeConn, p bridge.NodeApprovalsParams, current json.RawMessage) {
	_ = g.auditEvent(ctx, audit.Record{
		Event: audit.EventDecision, NodeID: nc.id, DecidedBy: "operator", Reason: "approvals set --node " + nc.id,
		GatewayFields: audit.GatewayFields{Action: audit.ActionApprovalsEdit, ReasonCode: audit.ReasonOperator,
			BaseHash: p.BaseHash, Change: approvalsChange(current, p.File)},
	})
}

// auditApprovalsResult records the node's answer to a relayed edit: applied
// with the new hash, or (denied) the error the operator got. It returns err.
func (g *Gateway) auditApprovalsResult(ctx context.Context, nc *nodeConn, p bridge.NodeApprovalsParams, payload json.RawMessage, err error) error {
	if err == nil {
		var res struct {
			Hash string `json:"hash"`
		}
		_ = bridge.Unmarshal(payload, &res)
		_ = g.auditEvent(ctx, audit.Record{
			Event: audit.EventDecision, NodeID: nc.id, DecidedBy: "node", Reason: "node applied the edit",
			GatewayFields: audit.GatewayFields{Action: audit.ActionApprovalsEdit, ReasonCode: audit.ReasonCompleted,
				BaseHash: p.BaseHash, NewHash: res.Hash},
		})
		return nil
	}
	_ = g.auditEvent(ctx, audit.Record{
		Event: audit.EventDenied, NodeID: nc.id, DecidedBy: "node", Reason: bridge.AsError(err).Message,
		GatewayFields: audit.GatewayFields{Action: audit.ActionApprovalsEdit, ReasonCode: audit.ReasonNodeError, BaseHash: p.BaseHash},
	})
	return err
}

// auditBinding records a web UI change of an agent's node binding.
func (g *Gateway) auditBinding(ctx context.Context, agentID, old, node string) {
	who := "agent " + agentID
	if agentID == "" {
		who = "every agent (tools.exec.node)"
	}
	_ = g.auditEvent(ctx, audit.Record{
		Event: audit.EventDecision, AgentID: agentID, NodeID: node, DecidedBy: "operator",
		Reason: "node binding of " + who + " changed in the web UI (until the gateway restarts)",
		GatewayFields: audit.GatewayFields{Action: audit.ActionBindingEdit, ReasonCode: audit.ReasonOperator,
			Actor: "operator web UI", Change: fmt.Sprintf("tools.exec.node %q→%q", old, node)},
	})
}

// RecordWebEdit records an edit of the gateway's own exec-approvals.json
// made in its web UI (wire it to web.Options.OnEdit): what changed and the
// hash the page based it on, before the file is written.
func (g *Gateway) RecordWebEdit(what, baseHash string) {
	_ = g.auditEvent(context.Background(), audit.Record{
		Event: audit.EventDecision, Host: "gateway", NodeID: "gateway", DecidedBy: "operator",
		Reason: "exec-approvals.json of the gateway edited in the web UI",
		GatewayFields: audit.GatewayFields{Action: audit.ActionApprovalsEdit, ReasonCode: audit.ReasonOperator,
			Actor: "operator web UI", BaseHash: baseHash, Change: bounded(what)},
	})
}

// auditRelay records the answer to a prompt the gateway relayed to its
// operators: who answered what, or that nobody did in time (err).
func (g *Gateway) auditRelay(req prompt.Request, peer, id string, a policy.Approval, by string, err error) {
	rec := audit.Record{
		Event: audit.EventDecision, SessionKey: req.SessionKey, AgentID: req.AgentID, Host: req.Host, NodeID: req.NodeID,
		Argv: req.Argv, Command: req.Command, Cwd: req.Cwd, ResolvedPaths: req.ResolvedPaths, DecidedBy: by, Approval: string(a),
		Reason: fmt.Sprintf("prompt %s from %s (%s)", id, peer, req.Reason),
		GatewayFields: audit.GatewayFields{Action: audit.ActionApprovalRelay, ReasonCode: audit.ReasonOperator,
			Actor: by},
	}
	switch {
	case err != nil:
		rec.Event, rec.Decision, rec.ReasonCode, rec.Actor = audit.EventDenied, audit.DecisionDeny, audit.ReasonNoAnswer, "nobody"
		rec.Error = err.Error()
		if errors.Is(err, prompt.ErrTimeout) {
			rec.Fallback, rec.DecidedBy = true, "askFallback"
			if req.Fallback != "" {
				rec.DecidedBy += "=" + req.Fallback
			}
		}
	case a == policy.Reject:
		rec.Event, rec.Decision = audit.EventDenied, audit.DecisionDeny
	}
	if rec.Actor == "" {
		rec.Actor = "operator"
	}
	_ = g.auditEvent(context.Background(), rec)
}

// approvalsChange summarises how next differs from cur (both
// exec-approvals.json documents): settings changed and allowlist patterns
// added or removed, per agent. It never copies the files.
func approvalsChange(cur, next json.RawMessage) string {
	nf, err := approvals.Parse("new file", next)
	if err != nil {
		return bounded("new file does not parse (the node will refuse it): " + err.Error())
	}
	if cur == nil {
		return bounded("current file unknown; new file hash " + nf.Hash())
	}
	of, err := approvals.Parse("current file", cur)
	if err != nil {
		return bounded("current file does not parse; new file hash " + nf.Hash())
	}
	var parts []string
	set := func(where, o, n string) {
		if o != n {
			parts = append(parts, fmt.Sprintf("%s %s→%s", where, orUnset(o), orUnset(n)))
		}
	}
	set("defaults.security", of.Defaults.Security, nf.Defaults.Security)
	set("defaults.ask", of.Defaults.Ask, nf.Defaults.Ask)
	set("defaults.askFallback", of.Defaults.AskFallback, nf.Defaults.AskFallback)
	ids := map[string]bool{}
	for id := range of.Agents {
		ids[id] = true
	}
	for id := range nf.Agents {
		ids[id] = true
	}
	sorted := make([]string, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, id)
	}
	sort.Strings(sorted)
	for _, id := range sorted {
		o, n := of.Agents[id], nf.Agents[id]
		if o == nil {
			o = &approvals.Agent{}
		}
		if n == nil {
			n = &approvals.Agent{}
		}
		pre := "agents." + id
		set(pre+".security", o.Security, n.Security)
		set(pre+".ask", o.Ask, n.Ask)
		set(pre+".askFallback", o.AskFallback, n.AskFallback)
		op, np := patterns(o.Allowlist), patterns(n.Allowlist)
		for _, p := range np {
			if !slices.Contains(op, p) {
				parts = append(parts, fmt.Sprintf("%s.allowlist +%q", pre, p))
			}
		}
		for _, p := range op {
			if !slices.Contains(np, p) {
				parts = append(parts, fmt.Sprintf("%s.allowlist -%q", pre, p))
			}
		}
	}
	if len(parts) == 0 {
		return "no policy change"
	}
	return bounded(strings.Join(parts, "; "))
}

func patterns(es []approvals.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Pattern
	}
	return out
}

func orUnset(s string) string {
	if s == "" {
		return "(unset)"
	}
	return s
}

// bounded cuts s to MaxChange bytes on a rune boundary.
func bounded(s string) string {
	if len(s) <= MaxChange {
		return s
	}
	cut := MaxChange
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + " …(truncated)"
}
