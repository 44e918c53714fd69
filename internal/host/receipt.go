package host

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/nodekey"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/receipt"
)

// receipts turns the engine's finished and refused runs into signed
// receipts on l (docs/audit.md, "Receipts"). The receipt is on disk
// before the result goes back; a failed write never fails the run, it is
// reported through warn so the operator hears about it.
type receipts struct {
	e    *Engine
	log  *receipt.Log
	warn func(error)

	mu        sync.Mutex
	policyRaw []byte // the approvals bytes policySum was computed for
	policySum string
}

// receiptHook returns an OnAudit hook writing receipts to l, or nil.
func (e *Engine) receiptHook(l *receipt.Log, warn func(error)) func(AuditRecord) {
	if l == nil {
		return nil
	}
	if warn == nil {
		warn = func(error) {}
	}
	r := &receipts{e: e, log: l, warn: warn}
	return r.record
}

// both calls a and then b; either may be nil.
func both(a, b func(AuditRecord)) func(AuditRecord) {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(r AuditRecord) { a(r); b(r) }
}

func (rs *receipts) record(a AuditRecord) {
	if a.Event != "finished" && a.Event != "denied" {
		return
	}
	// In the file before the result goes back; its fdatasync follows off
	// the result's path, as the audit log's finished record's does.
	id := a.Request.RunID
	_, err := rs.log.Write(rs.receiptOf(a), func(err error) {
		if err != nil {
			rs.warn(fmt.Errorf("receipt for run %s not synced: %w", id, err))
		}
	})
	if err != nil {
		rs.warn(fmt.Errorf("receipt for run %s not written: %w", id, err))
	}
}

// receiptOf is the receipt of one finished or refused run.
func (rs *receipts) receiptOf(a AuditRecord) receipt.Receipt {
	req := a.Request
	text := req.RawCommand
	if text == "" {
		text = shellJoin(req.Argv)
	}
	r := receipt.Receipt{
		Kind: receipt.KindRun, Host: a.NodeID, Event: a.Event, RunID: req.RunID,
		AgentID: req.AgentID, SessionKey: req.SessionKey,
		CommandSHA256: receipt.SHA256String(text),
		Executables:   a.ResolvedSHA256,
		Approval:      approvalOf(a),
		PolicySHA256:  rs.policyDigest(),
	}
	if r.Host == "" {
		r.Host = string(a.Host)
	}
	if p := a.prepared; p != nil {
		r.PlanSHA256 = p.Analysis.Hash
		if a.Event == "finished" {
			r.Jail = rs.jailOf(p, a.Layers)
		}
	}
	if res := a.Result; res != nil {
		code := res.ExitCode
		r.ExitCode, r.TimedOut, r.Error = &code, res.TimedOut, res.Error
		r.Output = &receipt.Output{
			StdoutSHA256: receipt.SHA256String(res.Stdout), StdoutBytes: len(res.Stdout),
			StderrSHA256: receipt.SHA256String(res.Stderr), StderrBytes: len(res.Stderr),
			Truncated: res.Truncated, DroppedBytes: res.DroppedBytes,
		}
		end := rs.e.now()
		r.Started, r.Ended = receipt.Stamp(end.Add(-res.Duration)), receipt.Stamp(end)
	}
	return r
}

// approvalOf says who decided: a human (and which route answered), the
// askFallback, an allowlist rule, or the policy itself.
func approvalOf(a AuditRecord) *receipt.Approval {
	d := string(a.Decision.Outcome)
	if d == "" {
		d = string(policy.DenyRun)
	}
	ap := &receipt.Approval{Decision: d, Reason: a.Decision.Reason}
	switch {
	case a.Fallback:
		ap.By = "fallback"
	case a.Approval != "":
		ap.By, ap.Decision, ap.Approver = "human", string(a.Approval), a.DecidedBy
	case a.prepared != nil && a.prepared.Satisfied:
		ap.By = "rule"
		for _, m := range a.prepared.Matched {
			if m != "" {
				ap.Rule = append(ap.Rule, m)
			}
		}
	default:
		ap.By = "policy"
	}
	return ap
}

// policyDigest is the SHA-256 of exec-approvals.json as the engine last
// loaded it, computed once per load.
func (rs *receipts) policyDigest() string {
	rs.e.mu.Lock()
	raw := rs.e.cache.raw
	rs.e.mu.Unlock()
	if raw == nil {
		return ""
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.policyRaw) != len(raw) || &rs.policyRaw[0] != &raw[0] {
		rs.policyRaw, rs.policySum = raw, receipt.SHA256(raw)
	}
	return rs.policySum
}

// jailOf names the walls that held a run of p (held: the finished audit
// record's Layers, ranLayers) and digests their rules: the jail's layers
// when it ran the run, Landlock for a start without it, and the limits
// when any is set (the runner applies them without a jail).
func (rs *receipts) jailOf(p *Prepared, held []string) *receipt.Jail {
	c := rs.e.reachOf(p).c
	j := &receipt.Jail{Layers: []string{}}
	if !c.Active() || rs.e.noConfine {
		return j
	}
	j.Layers = append(j.Layers, held...)
	if c.Limits != (confine.Limits{}) && !slices.Contains(held, string(confine.LayerLimits)) {
		j.Layers = append(j.Layers, string(confine.LayerLimits))
	}
	sort.Strings(j.Layers)
	if data, err := json.Marshal(c); err == nil {
		j.RulesSHA256 = receipt.SHA256(data)
	}
	return j
}

// shellJoin is argv as one text, for a request that sent no text.
func shellJoin(argv []string) string {
	data, _ := json.Marshal(argv)
	return string(data)
}

// OpenReceipts opens stateDir's receipt log signed with the identity key
// at keyPath (gateway.key or node.key), for an engine and, on the gateway,
// its countersignatures: one chain per host. Like OpenAudit, an
// unavailable log is reported through warn and returns nil; runs go on
// without receipts rather than stopping the host.
func OpenReceipts(stateDir, keyPath, hostName string, warn func(error)) *receipt.Log {
	if warn == nil {
		warn = func(error) {}
	}
	key, _, err := nodekey.LoadOrCreateFile(keyPath)
	if err == nil {
		var l *receipt.Log
		l, err = receipt.Open(receipt.Options{Dir: stateDir, Signer: key, Host: hostName})
		if err == nil {
			return l
		}
	}
	warn(fmt.Errorf("receipt log unavailable: %w", err))
	return nil
}
