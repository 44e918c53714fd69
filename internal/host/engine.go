package host

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/fschange"
	"github.com/exechost/exechost/internal/shellcmd"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/egress"
	"github.com/exechost/exechost/internal/jail"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/state"
)

// Engine enforces this machine's exec-approvals.json in front of the runner.
// One Engine serves a whole process (gateway, node runner or CLI) and is
// safe for concurrent use; a slow prompt for one command never blocks
// another command's decision.
type Engine struct {
	// StateDir holds exec-approvals.json.
	StateDir string
	// Host is what this engine is (gateway or node), for prompts, events
	// and the audit log.
	Host policy.Host
	// NodeID names this host in events and prompts ("gateway" on the
	// gateway).
	NodeID string
	// Prompter asks a human; nil means no approver is configured and
	// askFallback applies at once.
	Prompter Prompter
	// PromptTimeout bounds a prompt; DefaultPromptTimeout when zero.
	PromptTimeout time.Duration
	// OnEvent receives lifecycle events; it must not block for long.
	OnEvent func(bridge.ExecEvent)
	// OnAudit receives one record per decision and per finished run; it
	// must not block for long. nil disables auditing.
	OnAudit func(AuditRecord)
	// PATH is the host PATH used to resolve executables; the process's own
	// PATH when empty. A request can never supply it.
	PATH string
	// Home is the host user's home for "~" in patterns and paths.
	Home string
	// Workspaces holds the per-agent workspaces, each the cwd of a run of
	// that agent that names none (reach.go); Home's
	// .local/share/exechost/workspaces when empty. It must lie outside
	// StateDir.
	Workspaces string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// NoCache turns off every cache the engine owns: the analysis's
	// (memo, parsed texts, absent names) and the approvals file's. Each
	// decision then reads the text, the file system and the file afresh.
	// The decisions are the same either way (TestCachesChangeNothing);
	// the switch is for that comparison and for ruling a cache out.
	NoCache bool
	// Watcher takes the watches that vouch for the engine's caches (the
	// approvals file's, and the analysis's it builds) and the one poll
	// each decision checks them against. Whoever builds the engine owns
	// it (the CLI makes one per process for all its engines); nil: a
	// Watcher of the engine's own. Set it before the first decision.
	Watcher *fschange.Watcher
	// WatchApprovals replaces Watcher's WatchContent for the approvals
	// file (a test checks the cache where the file cannot be watched).
	WatchApprovals func(paths []string) (fschange.Set, bool)
	// Analyzer is the analysis with its caches; built on first use
	// (uncached with NoCache; with the engine's Watcher and clock) when
	// nil. One given here should take the engine's Watcher: Sets of
	// another never count as unchanged to the engine's poll.
	Analyzer *shellcmd.Analyzer
	// LandlockABI probes the kernel's Landlock ABI for confining runs
	// (confine.KernelABI when nil); tests inject a kernel without it.
	LandlockABI func() int
	// WarmInterpreters is how many interpreter processes the engine keeps
	// started ahead of need (warm.go); 0 keeps none and starts every run
	// afresh. Set it before the first run.
	WarmInterpreters int
	// WarmIdle is how long a warm interpreter waits for a run before it
	// is ended (DefaultWarmIdle when zero), by the engine's clock (Now).
	WarmIdle time.Duration

	// ConfineRulesAfresh builds the rules around the protected set for
	// every run started in-thread instead of reusing them while they are
	// exact (confine.Builder.Afresh). Set it before the first run.
	ConfineRulesAfresh bool

	// JailLayers are the layers the jail builds (jail.Options.Layers);
	// nil builds every one this machine can. Tests leave one out to see a
	// missing layer refuse the run (or warn). Set it before the first run.
	JailLayers []confine.Layer

	// NoJail starts confined runs with Landlock alone (the launcher or
	// an in-thread start) instead of in a standing jail
	// (internal/jail). Set it before the first run.
	NoJail bool

	// noConfine turns confinement off: only the escape tests' controls
	// set it, to show that what the confined run was kept from happens
	// without it.
	noConfine bool

	store *approvals.Store
	// watchOnce settles watch: Watcher, or the engine's own.
	watchOnce sync.Once
	watch     *fschange.Watcher
	// closeAudit closes the audit log the engine owns (Options.CloseAudit).
	closeAudit func() error
	mu         sync.Mutex
	cache      cachedFile
	// rules builds the Landlock rules of in-thread starts (confineRules).
	rules      *confine.Builder
	rulesOnce  sync.Once
	warmMu     sync.Mutex // guards warmPool, warmClosed
	warmPool   *warmPool
	warmClosed bool
	jailMu     sync.Mutex // guards jailPool, jailClosed
	jailPool   *jail.Pool
	jailClosed bool
	homes      memos[*homeReach]          // the jails' hidden sets (homereach.go)
	homeGen    atomic.Uint64              // numbers the homeReaches worked out
	cwdJails   memos[confine.Confinement] // the jails without their tmp (cwdjail.go)
	temps      runTemps                   // the runs' private temporary directories
	usage      usageQueue
	digests    digests
	egr        egressState // the egress proxy (egress.go)
}

// AuditRecord is what the engine reports about one decision or run. The
// audit package turns it into a log line; keeping the engine's side a plain
// struct keeps the decision path free of file I/O concerns.
type AuditRecord struct {
	Event         string // "decision", "denied", "finished"
	Request       Request
	Host          policy.Host
	NodeID        string
	Effective     policy.Effective
	ResolvedPaths []string
	// Env is the environment the command gets beyond the host's own, as
	// Prepared.Env shows it.
	Env map[string]string
	// ResolvedSHA256 is the sha256 of each executable decided on.
	ResolvedSHA256 map[string]string
	// Changed lists executables that differ from what allow-always
	// recorded.
	Changed   []string
	Decision  policy.Decision
	DecidedBy string
	Approval  policy.Approval
	Fallback  bool
	Result    *runner.Result
	// Confinement describes the run's reach (confine.go's ConfinementText).
	Confinement string
	// Layers are the layers of the jail that held for the run
	// (confine.Layer names; Engine.Layers).
	Layers []string
	// egress is the connection an "egress" record is about (egress.go).
	egress *egress.Record
	// prepared is what the decision was made on, for the run's receipt
	// (receipt.go); nil when the request was refused before analysis.
	prepared *Prepared
}

// NewEngine returns an engine for the given state directory.
func NewEngine(stateDir string, h policy.Host, nodeID string) *Engine {
	return &Engine{StateDir: stateDir, Host: h, NodeID: nodeID, Home: state.Home()}
}

// watcher returns the Watcher of the engine's caches (Engine.Watcher).
func (e *Engine) watcher() *fschange.Watcher {
	e.watchOnce.Do(func() {
		e.watch = e.Watcher
		if e.watch == nil {
			e.watch = fschange.New()
		}
	})
	return e.watch
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// Run decides and, when allowed, runs one command. A denial returns the
// decision's error (errors.Is policy.ErrDisabled, ErrAllowlistMiss,
// ErrApprovalRequired or ErrUserDenied) along with a Result whose Decision
// says why; a command that ran returns a nil error whatever its exit code.
func (e *Engine) Run(ctx context.Context, req Request) (Result, error) {
	if req.RunID == "" {
		req.RunID = newRunID()
	}
	// The runs' temporary directories' own directory is made before the
	// first jail is worked out and kept: made after, it would be a new
	// entry in the host's temporary directory, which a kept jail watches
	// when the state directory or the cwd lies beneath it (cwdjail.go).
	// An error here is the run's to report (spec).
	_, _ = e.temps.parent("")
	p, err := e.Prepare(req)
	if err != nil {
		if errors.Is(err, runner.ErrDangerousEnv) {
			// A refused environment is a security refusal: on the record.
			env := map[string]string{}
			for n, v := range req.Env {
				env[n] = shownEnvValue(n, v)
			}
			e.audit(AuditRecord{Event: "denied", Request: req, Host: e.Host, NodeID: e.NodeID, Env: env,
				Decision: policy.Decision{Outcome: policy.DenyRun, Reason: "dangerous-env"}, DecidedBy: "policy"})
		}
		return Result{Result: runner.Result{ExitCode: -1, Error: err.Error()}}, err
	}
	res := Result{ResolvedPaths: p.Analysis.Paths()}
	rec := AuditRecord{Event: "decision", Request: req, Host: e.Host, NodeID: e.NodeID, Effective: p.Effective, ResolvedPaths: res.ResolvedPaths, Env: p.Env, ResolvedSHA256: e.sha256s(p), Changed: p.Changed, prepared: p}
	d := p.Decision
	if d.Outcome == policy.AskHuman {
		d, rec = e.ask(ctx, req, p, rec)
	}
	res.Decision = d
	rec.Decision = d
	if d.Outcome != policy.Allow {
		rec.Event = "denied"
		e.audit(rec)
		err := denial(p, d, e.approvalsStore().Path)
		e.emit(bridge.ExecEvent{Kind: bridge.EventExecDenied, RunID: req.RunID, SessionKey: req.SessionKey, AgentID: req.AgentID, NodeID: e.NodeID, Host: string(e.Host), Command: p.Text, Reason: d.Reason + denialDetail(p, d), ReasonCode: policy.DenialCode(d)})
		res.Error = err.Error()
		res.ExitCode = -1
		return res, err
	}
	// What the analysis vouched for runs as the analysed tree; only when
	// nothing was vouched for (security=full, askFallback=full) or the text
	// cannot be interpreted does it go to /bin/sh as text.
	unvouched := p.Effective.Security == policy.SecurityFull ||
		(rec.Fallback && p.Effective.Fallback == policy.FallbackFull)
	how := p.runsAs(unvouched)
	rec.Confinement, rec.Layers = e.ConfinementText(p), e.Layers(p)
	spec, done, err := e.spec(p, how, req)
	if err != nil {
		rec.Event = "denied"
		e.audit(rec)
		res.Error, res.ExitCode = err.Error(), -1
		return res, err
	}
	e.audit(rec)
	spec.StartNotice = StartNotice
	spec.OnStart = func() {
		e.emit(bridge.ExecEvent{Kind: bridge.EventExecStarted, RunID: req.RunID, SessionKey: req.SessionKey, AgentID: req.AgentID, NodeID: e.NodeID, Host: string(e.Host), Command: p.Text})
	}
	if req.TimeoutMs > 0 {
		spec.Timeout = time.Duration(req.TimeoutMs) * time.Millisecond
	}
	rr, runErr := e.run(ctx, spec)
	done()
	if runErr != nil && rr.Error == "" {
		rr.Error = runErr.Error()
	}
	res.Result = rr
	if p.Satisfied {
		e.recordUse(p)
	}
	code := rr.ExitCode
	e.emit(bridge.ExecEvent{Kind: bridge.EventExecFinished, RunID: req.RunID, SessionKey: req.SessionKey, AgentID: req.AgentID, NodeID: e.NodeID, Host: string(e.Host), Command: p.Text, ExitCode: &code, TimedOut: rr.TimedOut, Tail: rr.Tail})
	fin := rec
	fin.Event = "finished"
	fin.Result = &rr
	fin.Layers = ranLayers(rec.Layers, rr)
	e.audit(fin)
	return res, nil
}

func (e *Engine) emit(ev bridge.ExecEvent) {
	if e.OnEvent != nil {
		e.OnEvent(ev)
	}
}

func (e *Engine) audit(r AuditRecord) {
	if e.OnAudit != nil {
		e.OnAudit(r)
	}
}
