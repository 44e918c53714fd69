package host

import (
	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/policy"
)

// AuditTo returns an OnAudit hook that appends every record to log. A failed
// append (a full disk, a read-only state directory) never blocks or fails
// the exec; it is reported through warn, which callers wire to their logger
// so the operator hears about it loudly.
//
// A decision or denial is appended durably (Append: fdatasync) before the
// engine acts on it. A finished record only needs to be in the file before
// the result goes back (Write: a crash of this process can no longer lose
// it); its fdatasync runs after, shared with the next group, so the caller
// does not wait for a disk flush per run. Close the log at shutdown: it
// waits for those syncs (docs/audit-durability.md).
func AuditTo(log *audit.Log, warn func(err error)) func(AuditRecord) {
	if warn == nil {
		warn = func(error) {}
	}
	return func(r AuditRecord) {
		line := r.Line()
		// A connection's record comes when it has ended: like a finished
		// run's, it need only be in the file before anything else happens.
		if line.Event != audit.EventFinished && line.Event != audit.EventEgress {
			if err := log.Append(line); err != nil {
				warn(err)
			}
			return
		}
		err := log.Write(line, func(err error) {
			if err != nil {
				warn(err)
			}
		})
		if err != nil {
			warn(err)
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
