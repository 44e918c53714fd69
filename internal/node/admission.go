package node

import (
	"encoding/json"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/policy"
)

// DefaultMaxRuns is a node's default limit on system.run invokes in
// flight. A gateway with default limits sends at most config.DefaultExecs
// (256) execs in flight across all its nodes, so the node's own bound is
// a backstop of the same size: it stops a gateway with raised limits, or
// a flood of invokes, from running unbounded processes and goroutines
// here (each run holds a process, its pipes and a goroutine).
const DefaultMaxRuns = 256

// admitRun takes a slot (c.runs, an inflight.Limiter) for one system.run
// against Options.MaxRuns, or answers BUSY naming the limit and how to
// raise it. release gives the slot back (a no-op when busy); calling it
// more than once is harmless.
func (c *Client) admitRun() (release func(), busy *bridge.Error) {
	limit := c.opts.MaxRuns
	if limit <= 0 {
		limit = DefaultMaxRuns
	}
	release, full := c.runs.Acquire("", limit, 0)
	if full != nil {
		return func() {}, bridge.Errorf(bridge.CodeBusy, "node %s already runs %d commands, its limit; retry when one finishes", c.NodeID(), full.InFlight).WithHint("raise it with `exechost node run --max-runs N`")
	}
	return release, nil
}

// auditBusy records a system.run refused BUSY in this node's audit log
// (when it has one), with what the request would have run: a refusal is a
// decision like any other. A failed record is logged; the refusal stands.
func (c *Client) auditBusy(params json.RawMessage, busy *bridge.Error) {
	if c.opts.Audit == nil {
		return
	}
	var p bridge.SystemRunParams
	_ = bridge.Unmarshal(params, &p) // a bad request is still recorded, without its fields
	rec := audit.Record{
		Event: audit.EventDenied, RunID: p.RunID, SessionKey: p.SessionKey, AgentID: p.AgentID,
		Host: string(policy.HostNode), NodeID: c.NodeID(), Argv: p.Command, Command: p.RawCommand, Cwd: p.Cwd,
		Decision: audit.DecisionDeny, Reason: busy.Message, DecidedBy: "node",
		GatewayFields: audit.GatewayFields{Action: audit.ActionExec, ReasonCode: audit.ReasonBusy},
	}
	if err := c.opts.Audit.Record(rec); err != nil {
		c.log.Error("audit record failed", "event", rec.Event, "reason", rec.ReasonCode, "err", err)
	}
}
