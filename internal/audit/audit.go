// Package audit keeps exechost's audit log: one JSON line per exec decision
// and outcome on an execution host, in <state>/audit.jsonl (0600). Lines are
// group-committed (concurrent appends share one fdatasync) at the end of the
// file, into disk blocks reserved past it, under a file lock, so the gateway
// and a local `exechost run` can share the file (docs/audit-durability.md
// says what is on disk when); the file is rotated by size
// (audit.jsonl.1 … audit.jsonl.N). Every line carries the hash of the line
// before it ("prev") and its own hash, so `exechost audit verify` can tell
// whether a recorded line was edited, removed or inserted after the fact —
// also across rotation, where the first line of a new file carries the last
// hash of the rotated one.
//
// What the chain cannot show: lines cut from the very end of the newest file
// or whole rotated files removed from the oldest end. Ship the log elsewhere
// if that matters.
package audit

import (
	"errors"
	"time"
)

// Event kinds: what a record reports.
const (
	// EventDecision records that a command was allowed to run (with how it
	// was decided: allowlist, human approval, fallback).
	EventDecision = "decision"
	// EventFinished records the outcome of a command that ran.
	EventFinished = "finished"
	// EventDenied records a command that did not run, and why.
	EventDenied = "denied"
	// EventEgress records one network connection of a run through the
	// egress proxy (Record.Egress), or a human's answer about one.
	EventEgress = "egress"
)

// Egress is one connection through the egress proxy: the name and port
// the run asked for, the address dialed, the bytes each way (Up: from the
// run), the rule or approval that allowed it (Rule) or why it was refused
// (Reason on the record), and identical refusals folded into it.
type Egress struct {
	Method  string `json:"method,omitempty"`
	Target  string `json:"target"`
	Addr    string `json:"addr,omitempty"`
	Rule    string `json:"rule,omitempty"`
	Up      int64  `json:"bytesUp"`
	Down    int64  `json:"bytesDown"`
	Repeats int    `json:"repeats,omitempty"`
}

// Decision values, as policy names them.
const (
	DecisionAllow = "allow"
	DecisionAsk   = "ask"
	DecisionDeny  = "deny"
)

// Record is one line of the audit log. Field names are the file format that
// users grep and script against; add fields, never rename them.
type Record struct {
	// Time is when the record was made (UTC); Append fills it when zero.
	Time time.Time `json:"time"`
	// Event is EventDecision, EventFinished or EventDenied.
	Event string `json:"event"`
	// RunID ties the decision and finished records of one run together.
	RunID      string `json:"runId,omitempty"`
	SessionKey string `json:"sessionKey,omitempty"`
	AgentID    string `json:"agentId,omitempty"`
	// Host is the execution host kind: "sandbox", "gateway" or "node".
	Host   string `json:"host,omitempty"`
	NodeID string `json:"nodeId,omitempty"`
	// Argv is the requested argv; Command the raw command text.
	Argv    []string `json:"argv,omitempty"`
	Command string   `json:"command,omitempty"`
	// CommandSHA256 and CommandBytes identify a command longer than
	// MaxRecordCommand, of which Command keeps only the first bytes
	// (bound.go): one refused 4 MB command no longer writes a 4 MB line.
	CommandSHA256 string `json:"commandSha256,omitempty"`
	CommandBytes  int    `json:"commandBytes,omitempty"`
	Cwd           string `json:"cwd,omitempty"`
	// ResolvedPaths are the executables the analysis resolved.
	ResolvedPaths []string `json:"resolvedPaths,omitempty"`
	// Env is what the command's programs get beyond the host's own
	// environment (secret-looking values redacted).
	Env map[string]string `json:"env,omitempty"`
	// ResolvedSHA256 maps each executable the run may start to the sha256
	// of the file decided on (the only file that starts).
	ResolvedSHA256 map[string]string `json:"resolvedSha256,omitempty"`
	// Changed lists executables that differ from the file an allow-always
	// recorded for their allowlist entry.
	Changed []string `json:"changedSinceAllowAlways,omitempty"`
	// Decision is the final policy decision: allow, ask or deny.
	Decision string `json:"decision,omitempty"`
	// Reason says why, in the words a denial gives the agent.
	Reason string `json:"reason,omitempty"`
	// DecidedBy names who decided: "policy", "askFallback", or the
	// approver UI and user that answered a prompt.
	DecidedBy string `json:"decidedBy,omitempty"`
	// Approval is a human's answer: allow-once, allow-always or deny.
	Approval string `json:"approval,omitempty"`
	// Fallback is true when askFallback decided because no human answered.
	Fallback bool `json:"fallback,omitempty"`
	// ExitCode is the command's exit status (finished records only).
	ExitCode   *int  `json:"exitCode,omitempty"`
	TimedOut   bool  `json:"timedOut,omitempty"`
	DurationMs int64 `json:"durationMs,omitempty"`
	Truncated  bool  `json:"truncated,omitempty"`
	// Error is a failure to start or run the command.
	Error string `json:"error,omitempty"`
	// Confinement says what the kernel let the run touch (host runs;
	// internal/confine's description).
	Confinement string `json:"confinement,omitempty"`
	// Layers are the layers of the jail that held for the run
	// (internal/confine's Layer names).
	Layers []string `json:"layers,omitempty"`
	// Egress is the connection an EventEgress record is about.
	Egress *Egress `json:"egress,omitempty"`
	// GatewayFields carry the gateway's own decisions (events.go); they
	// are flattened into the line and empty on execution hosts' records.
	GatewayFields
	// Prev is the hash of the previous line ("" for the first line ever).
	Prev string `json:"prev"`
	// Hash is the hex SHA-256 of this line without its hash field. It must
	// stay the last field: the line format depends on it.
	Hash string `json:"hash,omitempty"`
}

// Defaults for Options.
const (
	DefaultMaxBytes    = 10 << 20
	DefaultKeep        = 5
	DefaultLockTimeout = 5 * time.Second
	// MaxLine is the longest line Read and Verify accept; a longer one is
	// reported as corrupt rather than read into memory.
	MaxLine = 16 << 20
)

// Sentinel errors.
var (
	// ErrCorrupt marks a line that is not a well-formed audit record.
	ErrCorrupt = errors.New("corrupt audit line")
	// ErrTampered marks a line whose hash or chain link does not match:
	// it was edited, or lines were removed or inserted around it.
	ErrTampered = errors.New("audit chain broken")
	// ErrLockTimeout is returned by Append when another process held the
	// log's lock too long; the record was not written.
	ErrLockTimeout = errors.New("audit log lock timed out")
	// ErrClosed is returned by Append after Close.
	ErrClosed = errors.New("audit log closed")
	// ErrInvalid is returned by Append for a record it refuses to write.
	ErrInvalid = errors.New("invalid audit record")
)
