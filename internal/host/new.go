package host

import (
	"fmt"
	"os"
	"time"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/fschange"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/receipt"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/state"
)

// Options is everything a process needs to say about its host engine;
// New builds the engine from it in one step. Daemons whose identity or
// event sink exists only after the engine (a node learns its id when it
// loads node.json) pass late-bound functions, never a second set-up step.
type Options struct {
	// StateDir holds exec-approvals.json (created, with its socket token,
	// on first use) and is where the local approver socket is found.
	StateDir string
	// Host and NodeID name this engine in prompts, events and the audit
	// log ("gateway"/"gateway" on the gateway).
	Host   policy.Host
	NodeID string
	// Prompter asks a human: normally this machine's approver socket
	// (asksock.LocalPrompter(StateDir)); Route may wrap it to send prompts
	// elsewhere. Nil asks nobody, so askFallback decides every prompt.
	// host does not build the socket prompter itself: the approval socket
	// package sits above host (its exec host runs a host.Engine).
	Prompter Prompter
	// Route, when set, replaces the local prompter with the prompter
	// approvals.route names (it is given the local one to wrap or keep).
	Route func(local Prompter) (Prompter, error)
	// PromptTimeout bounds a prompt; DefaultPromptTimeout when zero.
	PromptTimeout time.Duration
	// OnEvent receives lifecycle events (Engine.OnEvent).
	OnEvent func(bridge.ExecEvent)
	// Audit receives one record per decision and finished run; nil
	// records nothing.
	Audit *audit.Recorder
	// Receipts receives a signed receipt per finished or refused run
	// (receipt.go); nil writes none. Its failures go to Warn.
	Receipts *receipt.Log
	// CloseAudit makes Engine.Close close Audit too, for a process whose
	// engine is the log's only user (`exechost run`, the OpenClaw node):
	// Close then waits for the finished records' syncs. Daemons that
	// record their own decisions in the same log close it themselves.
	CloseAudit bool
	// SweepRunTemps removes, before the first run, the run directories a
	// killed host left in the temporary directory (sweepRunTemps). Set by
	// long-lived daemons; a one-shot CLI run does not pay for reading the
	// temporary directory.
	SweepRunTemps bool
	// WarmInterpreters is how many interpreter processes the engine keeps
	// started ahead of need (Engine.WarmInterpreters): 0 keeps none.
	// Daemons pass their setting (DefaultWarmInterpreters unless told
	// otherwise); a one-shot `exechost run` keeps none.
	WarmInterpreters int
	// WarmIdle is how long a warm interpreter waits for a run before it
	// is ended; DefaultWarmIdle when zero.
	WarmIdle time.Duration
	// Watcher takes the watches that vouch for the engine's caches
	// (Engine.Watcher): the process's, which it makes once and gives to
	// every engine it builds. Nil: the engine's own.
	Watcher *fschange.Watcher
	// Now is the engine's clock (Engine.Now), which its analysis's
	// caches measure their racy windows by too. Nil: time.Now.
	Now func() time.Time
	// Warn hears about degraded operation that must not stop the process:
	// a reaper that could not start. Nil discards it.
	Warn func(error)
}

// New builds this machine's engine from opts. A malformed approvals file
// is an error here, before anything can run. It also starts the process
// reaper (runner.EnableReaper), so commands the engine starts die with the
// process even when it is SIGKILLed.
func New(opts Options) (*Engine, error) {
	if err := state.Ensure(opts.StateDir); err != nil {
		return nil, err
	}
	store := approvals.NewStore(opts.StateDir)
	// Ensure creates the file (with its token) on first use and refuses a
	// malformed one before anything can run.
	if _, err := store.Ensure(); err != nil {
		return nil, err
	}
	if opts.PromptTimeout < 0 {
		return nil, hint.Wrap(fmt.Errorf("prompt timeout %s is negative", opts.PromptTimeout), fmt.Sprintf("use a positive duration, or 0 for the default %s", DefaultPromptTimeout))
	}
	if opts.SweepRunTemps {
		sweepRunTemps(os.TempDir())
	}
	if err := runner.EnableReaper(); err != nil && opts.Warn != nil {
		opts.Warn(fmt.Errorf("%w; commands may outlive this process if it is killed", err))
	}
	e := NewEngine(opts.StateDir, opts.Host, opts.NodeID)
	e.PromptTimeout = opts.PromptTimeout
	e.OnEvent = opts.OnEvent
	e.OnAudit = both(AuditRecorder(opts.Audit), e.receiptHook(opts.Receipts, opts.Warn))
	if opts.CloseAudit && opts.Audit != nil {
		e.closeAudit = opts.Audit.Close
	}
	e.Prompter = opts.Prompter
	e.Watcher, e.Now = opts.Watcher, opts.Now
	if opts.WarmInterpreters < 0 || opts.WarmIdle < 0 {
		return nil, hint.Wrap(fmt.Errorf("warm interpreters %d, idle %s: negative", opts.WarmInterpreters, opts.WarmIdle), "0 turns the pool off")
	}
	e.WarmInterpreters, e.WarmIdle = opts.WarmInterpreters, opts.WarmIdle
	if opts.Route != nil {
		p, err := opts.Route(e.Prompter)
		if err != nil {
			return nil, err
		}
		e.Prompter = p
	}
	e.warm() // started ahead of the first run
	return e, nil
}

// AuditRecorder returns the OnAudit hook that records to rec (its failures
// reported through rec's warn function), or nil when rec is nil. It is the
// one place an engine is wired to an audit log.
func AuditRecorder(rec *audit.Recorder) func(AuditRecord) {
	if rec == nil {
		return nil
	}
	return AuditTo(rec.Log(), rec.Warn)
}

// OpenAudit opens stateDir's audit log for an engine (and, on the
// gateway, for its own decisions: one log, one hash chain). Every process
// opens it here. warn hears why it is unavailable and, later, about each
// failed append; an unavailable log returns nil, and commands still run
// unaudited, as they did before the log existed, rather than stopping
// the host.
func OpenAudit(stateDir string, warn func(error)) *audit.Recorder {
	if warn == nil {
		warn = func(error) {}
	}
	rec, err := audit.OpenRecorder(stateDir, func(err error) { warn(fmt.Errorf("audit append failed: %w", err)) })
	if err != nil {
		warn(fmt.Errorf("audit log unavailable: %w", err))
		return nil
	}
	return rec
}
