package host

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/policy"
)

// AuditTo returns an OnAudit hook that appends the engine's records to
// log. A failed append (a full disk, a read-only state directory) never
// blocks or fails the exec; it is reported through warn, which callers wire
// to their logger so the operator hears about it loudly.
//
// A decision or denial is appended durably (Append: fdatasync) before the
// engine acts on it. A finished record only needs to be in the file before
// the result goes back (Write: a crash of this process can no longer lose
// it); its fdatasync runs after, shared with the next group, so the caller
// does not wait for a disk flush per run. Close the log at shutdown: it
// waits for those syncs (docs/audit-durability.md).
//
// Denied runs are aggregated per agent and denial (denial code and the
// setting that decided it) with an audit.Aggregator: the first
// audit.DefaultAggregateBurst of a kind are recorded in full, then one per
// audit.DefaultAggregateInterval, at most audit.DefaultAggregateRate per
// second of all kinds; the next record of a kind, or the count written an
// interval after the first one left out (and when the log closes), says
// how many were left out. Otherwise an agent could rotate the log's other
// records out by having commands denied. A human's denial is always
// recorded.
func AuditTo(log *audit.Log, warn func(err error)) func(AuditRecord) {
	return newAuditSink(log, warn, audit.NewAggregator(audit.AggregatorOptions{})).record
}

// auditSink is one engine's way to its log, with its denials' aggregator.
type auditSink struct {
	log  *audit.Log
	warn func(error)
	agg  *audit.Aggregator

	mu    sync.Mutex
	timer *time.Timer // the pending write of the counts, if any
}

func newAuditSink(log *audit.Log, warn func(error), agg *audit.Aggregator) *auditSink {
	if warn == nil {
		warn = func(error) {}
	}
	s := &auditSink{log: log, warn: warn, agg: agg}
	if log != nil {
		log.BeforeClose(s.writeCounts)
	}
	return s
}

func (s *auditSink) record(r AuditRecord) {
	line := r.Line()
	if line.Event == audit.EventDenied && r.Decision.Setting != policy.SettingApprover && !s.aggregate(r, &line) {
		return
	}
	// A connection's record comes when it has ended: like a finished
	// run's, it need only be in the file before anything else happens.
	if line.Event != audit.EventFinished && line.Event != audit.EventEgress {
		if err := s.log.Append(line); err != nil {
			s.warn(err)
		}
		return
	}
	err := s.log.Write(line, func(err error) {
		if err != nil {
			s.warn(err)
		}
	})
	if err != nil {
		s.warn(err)
	}
}

// aggregate decides whether a denial is written; the one written says how
// many like it were left out.
func (s *auditSink) aggregate(r AuditRecord, line *audit.Record) bool {
	who := denialCaller(line.AgentID)
	ok, same, others := s.agg.Allow(who+"|"+policy.DenialCode(r.Decision)+"|"+r.Decision.Setting, *line)
	if !ok {
		s.scheduleCounts()
		return false
	}
	o := s.agg.Options()
	var notes []string
	if same > 0 {
		notes = append(notes, fmt.Sprintf("%d earlier denials like this of %s not recorded (after %d, one per %s)", same, who, o.Burst, o.Interval))
	}
	if others > 0 {
		notes = append(notes, fmt.Sprintf("%d earlier denials not recorded (rate limit %g/s)", others, o.GlobalRate))
	}
	if len(notes) > 0 {
		if line.Change != "" {
			notes = append([]string{line.Change}, notes...)
		}
		line.Change = strings.Join(notes, "; ")
	}
	return true
}

func denialCaller(agent string) string {
	if agent == "" {
		return "agent (none)"
	}
	return "agent " + agent
}

// scheduleCounts arranges for the counts to be written an interval from
// now, unless that is already arranged: a flood that stops is accounted
// for without another denial.
func (s *auditSink) scheduleCounts() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		return
	}
	s.timer = time.AfterFunc(s.agg.Options().Interval, func() {
		s.mu.Lock()
		s.timer = nil
		s.mu.Unlock()
		s.writeCounts()
	})
}

// writeCounts records, per kind with denials left out, the last of them
// with their count.
func (s *auditSink) writeCounts() {
	o := s.agg.Options()
	for _, p := range s.agg.Flush() {
		rec := p.Record
		who, _, _ := strings.Cut(p.Kind, "|")
		rec.Change = fmt.Sprintf("%d denials like this of %s not recorded (after %d, one per %s); this is the last of them", p.Count, who, o.Burst, o.Interval)
		if err := s.log.Append(rec); err != nil && !errors.Is(err, audit.ErrClosed) {
			s.warn(err)
		}
	}
}

// Line converts the engine's record into an audit log line.
func (r AuditRecord) Line() audit.Record {
	rec := audit.Record{
		Event:          r.Event,
		RunID:          r.Request.RunID,
		SessionKey:     r.Request.SessionKey,
		AgentID:        r.Request.AgentID,
		Host:           string(r.Host),
		NodeID:         r.NodeID,
		Argv:           r.Request.Argv,
		Command:        r.Request.RawCommand,
		Cwd:            r.Request.Cwd,
		ResolvedPaths:  r.ResolvedPaths,
		Env:            r.Env,
		ResolvedSHA256: r.ResolvedSHA256,
		Changed:        r.Changed,
		Decision:       string(r.Decision.Outcome),
		Reason:         r.Decision.Reason,
		DecidedBy:      r.DecidedBy,
		Approval:       string(r.Approval),
		Fallback:       r.Fallback,
		Confinement:    r.Confinement,
		Layers:         r.Layers,
	}
	switch {
	case r.Fallback:
		rec.DecidedBy = "askFallback=" + string(r.Effective.Fallback)
	case rec.DecidedBy == "":
		rec.DecidedBy = "policy"
	}
	if r.Decision.Outcome == "" {
		rec.Decision = string(policy.DenyRun)
	}
	if g := r.egress; g != nil {
		rec.Egress = &audit.Egress{Method: g.Method, Target: egressTarget(g), Addr: g.Addr, Rule: g.Rule, Up: g.Up, Down: g.Down, Repeats: g.Repeats}
	}
	if r.Result != nil {
		code := r.Result.ExitCode
		rec.ExitCode = &code
		rec.TimedOut = r.Result.TimedOut
		rec.DurationMs = r.Result.Duration.Milliseconds()
		rec.Truncated = r.Result.Truncated
		rec.Error = r.Result.Error
	}
	return rec
}
