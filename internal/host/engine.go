package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/approver"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/shellcmd"
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
	// TrustApprovalDecision lets Request.ApprovalDecision (an answer the
	// gateway obtained from an operator) settle an ask. Off by default: a
	// host only trusts answers it verified itself unless configured to
	// route approvals through the gateway.
	TrustApprovalDecision bool
	// OnEvent receives lifecycle events; it must not block for long.
	OnEvent func(Event)
	// OnAudit receives one record per decision and per finished run; it
	// must not block for long. nil disables auditing.
	OnAudit func(AuditRecord)
	// PATH is the host PATH used to resolve executables; the process's own
	// PATH when empty. A request can never supply it.
	PATH string
	// Home is the host user's home for "~" in patterns and paths.
	Home string
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	store *approvals.Store
	mu    sync.Mutex
	cache cachedFile
	usage usageQueue
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
	Decision      policy.Decision
	DecidedBy     string
	Approval      policy.Approval
	Fallback      bool
	Result        *runner.Result
}

// NewEngine returns an engine for the given state directory.
func NewEngine(stateDir string, h policy.Host, nodeID string) *Engine {
	return &Engine{StateDir: stateDir, Host: h, NodeID: nodeID, Home: state.Home()}
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

func (e *Engine) approvalsStore() *approvals.Store {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.store == nil {
		e.store = approvals.NewStore(e.StateDir)
		if e.Home != "" {
			e.store.Home = e.Home
		}
	}
	return e.store
}

// cachedFile avoids re-parsing exec-approvals.json, re-resolving an agent
// and recompiling its allowlist on every exec: all three are redone whenever
// the file's size, mtime or inode changes (an atomic rewrite always gives a
// new inode, so no edit is missed).
type cachedFile struct {
	key    string
	file   *approvals.File
	agents map[string]*agentPolicy
}

// agentPolicy is one agent's resolved policy and compiled allowlist.
type agentPolicy struct {
	resolved approvals.Resolved
	allow    *policy.Allowlist
}

// agentPolicy returns the cached resolution for agent in the current file.
func (e *Engine) agentPolicy(agent string) (*agentPolicy, error) {
	f, err := e.loadApprovals()
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cache.file == f && e.cache.agents != nil {
		if ap, ok := e.cache.agents[agent]; ok {
			return ap, nil
		}
	}
	// Resolution is pure; ResolvePolicy skips the filesystem lint that
	// `approvals get` shows, which has no say in the decision.
	r := f.ResolvePolicy(agent)
	ap := &agentPolicy{resolved: r, allow: policy.CompileAllowlist(r.Patterns(), e.Home)}
	if e.cache.file == f {
		if e.cache.agents == nil {
			e.cache.agents = map[string]*agentPolicy{}
		}
		e.cache.agents[agent] = ap
	}
	return ap, nil
}

func (e *Engine) loadApprovals() (*approvals.File, error) {
	s := e.approvalsStore()
	fi, err := os.Stat(s.Path)
	key := ""
	if err == nil {
		key = fmt.Sprintf("%d/%d/%v", fi.Size(), fi.ModTime().UnixNano(), fileID(fi))
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("load approvals %s: %w", s.Path, err)
	}
	e.mu.Lock()
	if key != "" && e.cache.key == key {
		f := e.cache.file
		e.mu.Unlock()
		return f, nil
	}
	e.mu.Unlock()
	f, err := s.Load()
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.cache = cachedFile{key: key, file: f}
	e.mu.Unlock()
	return f, nil
}

// Prepared is a command analysed against this host's policy, before any
// prompt: what Check reports and what Run acts on.
type Prepared struct {
	Agent      string
	Cwd        string
	Text       string // the command as a human should read it
	Effective  policy.Effective
	Resolved   approvals.Resolved
	Analysis   shellcmd.Analysis
	Matched    []string // per segment: the pattern that matched, or ""
	Satisfied  bool
	Decision   policy.Decision
	runArgv    []string
	runCommand string
}

func (p *Prepared) input() policy.Input {
	return policy.Input{Effective: p.Effective, AnalysisOK: p.Analysis.OK, AnalysisError: p.Analysis.Error, AllowlistSatisfied: p.Satisfied}
}

// Prepare analyses req against the current exec-approvals.json and decides
// allow / ask / deny without running or prompting anything. A file that
// cannot be loaded fails closed with an error naming it.
func (e *Engine) Prepare(req Request) (*Prepared, error) {
	for name := range req.Env {
		if policy.DangerousEnv(name) {
			return nil, fmt.Errorf("%w: env %s cannot be set by a request (it could change what runs) (hint: drop it from env)", runner.ErrDangerousEnv, name)
		}
	}
	agent := req.AgentID
	if agent == "" {
		agent = "*"
	}
	ap, err := e.agentPolicy(agent)
	if err != nil {
		return nil, err
	}
	cwd, err := e.cwd(req.Cwd)
	if err != nil {
		return nil, err
	}
	p := &Prepared{Agent: agent, Cwd: cwd, Resolved: ap.resolved}
	p.Effective = policy.Combine(req.Security, req.Ask, p.Resolved.Local)
	env := shellcmd.Env{Cwd: cwd, PATH: e.runPATH(), Home: e.Home}
	// Analyse exactly what will run: argv when given (rawCommand is then
	// only for display), else the raw text through /bin/sh -c. An argv of
	// exactly /bin/sh -c TEXT (what the gateway sends) is that text.
	if text, ok := shellText(req.Argv); ok {
		req.Argv, req.RawCommand = nil, text
	}
	switch {
	case len(req.Argv) > 0:
		p.runArgv = req.Argv
		p.Analysis = shellcmd.AnalyzeArgv(req.Argv, env)
		p.Text = req.RawCommand
		if p.Text == "" {
			p.Text = strings.Join(req.Argv, " ")
		}
	case strings.TrimSpace(req.RawCommand) != "":
		p.runCommand = req.RawCommand
		p.Analysis = shellcmd.Analyze(req.RawCommand, env)
		p.Text = req.RawCommand
		if argv, ok := plainArgv(req.RawCommand, p.Analysis); ok {
			// Same words /bin/sh would run, without spawning a shell.
			p.runArgv, p.runCommand = argv, ""
		}
	default:
		return nil, errors.New("empty command (hint: pass command text or an argv)")
	}
	if p.Analysis.OK {
		p.Matched, p.Satisfied = ap.allow.MatchAll(p.Analysis.Paths())
	} else {
		p.Matched = make([]string, len(p.Analysis.Segments))
	}
	p.Decision = policy.Decide(p.input())
	return p, nil
}

// shellText returns TEXT for an argv of exactly ["/bin/sh", "-c", TEXT]:
// running that argv and running TEXT as command text are the same thing.
func shellText(argv []string) (string, bool) {
	if len(argv) == 3 && argv[0] == "/bin/sh" && argv[1] == "-c" && strings.TrimSpace(argv[2]) != "" {
		return argv[2], true
	}
	return "", false
}

// plainArgv returns the words of text when running them directly is exactly
// what /bin/sh -c text would do: one command of plain words (no quoting,
// expansion, globbing, operators, assignments or redirections — only
// characters that mean nothing to a shell) that the analysis resolved to one
// ordinary program which is not a shell builtin with semantics of its own.
// Anything else goes through the shell as written.
func plainArgv(text string, a shellcmd.Analysis) ([]string, bool) {
	words := strings.Fields(text)
	if len(words) == 0 || !a.OK || len(a.Segments) != 1 {
		return nil, false
	}
	for _, w := range words {
		for _, r := range w {
			if !plainRune(r) {
				return nil, false
			}
		}
	}
	seg := a.Segments[0]
	if strings.Contains(words[0], "=") || seg.Role != shellcmd.RoleCommand || len(seg.Via) > 0 ||
		seg.ResolvedPath == "" || seg.Name != words[0] || shellBuiltin[words[0]] ||
		len(seg.Argv) != len(words) {
		return nil, false
	}
	for i := range words {
		if seg.Argv[i] != words[i] {
			return nil, false
		}
	}
	return words, true
}

func plainRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
		strings.ContainsRune("_./:@%+,=-", r) || r == ' ' || r == '\t'
}

// shellBuiltin lists commands /bin/sh runs as builtins whose behaviour
// differs from the program of the same name (echo's escapes, printf, test,
// kill's job specs, pwd's logical path, …); they always go through the shell.
var shellBuiltin = map[string]bool{
	"echo": true, "printf": true, "test": true, "[": true, "pwd": true, "kill": true, "cd": true,
	"exec": true, "command": true, "type": true, "time": true, "read": true, "wait": true,
	"exit": true, "export": true, "set": true, "trap": true, "umask": true, "ulimit": true,
}

// execArgv returns the argv to spawn: when argv[0] is itself the first
// analysed segment (no wrapper in front), it is replaced by the path the
// analysis resolved, so the process that runs is exactly the file the
// allowlist vouched for rather than whatever a second PATH lookup finds.
func (p *Prepared) execArgv() []string {
	if len(p.runArgv) == 0 {
		return nil
	}
	argv := append([]string(nil), p.runArgv...)
	if segs := p.Analysis.Segments; len(segs) > 0 && len(segs[0].Via) == 0 && segs[0].Name == argv[0] && segs[0].ResolvedPath != "" {
		argv[0] = segs[0].ResolvedPath
	}
	return argv
}

// baseEnv is the runner's environment: this process's, with PATH replaced
// by the host PATH the analysis resolved against, minus empty and relative
// entries, so that /bin/sh finds the same executables the analysis found,
// and without the variables that make a shell read files or find commands
// differently (BASH_ENV, CDPATH, EXECIGNORE, …).
func (e *Engine) baseEnv() []string {
	env := []string{"PATH=" + e.runPATH()}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name != "PATH" && !policy.ShellStartupEnv(name) {
			env = append(env, kv)
		}
	}
	return env
}

// runPATH is the host PATH with empty and relative entries removed: both
// the analysis and the spawned shell use exactly this value.
func (e *Engine) runPATH() string {
	var dirs []string
	for _, d := range filepath.SplitList(e.hostPATH()) {
		if filepath.IsAbs(d) {
			dirs = append(dirs, d)
		}
	}
	return strings.Join(dirs, string(filepath.ListSeparator))
}

func (e *Engine) hostPATH() string {
	if e.PATH != "" {
		return e.PATH
	}
	if p := os.Getenv("PATH"); p != "" {
		return p
	}
	return "/usr/local/bin:/usr/bin:/bin"
}

func (e *Engine) cwd(c string) (string, error) {
	if c == "" {
		if e.Home != "" {
			return e.Home, nil
		}
		return os.Getwd()
	}
	c = policy.ExpandHome(c, e.Home)
	if !filepath.IsAbs(c) {
		return "", fmt.Errorf("cwd %q is not absolute (hint: pass an absolute path or ~/…)", c)
	}
	fi, err := os.Stat(c)
	if err != nil {
		return "", fmt.Errorf("cwd %s: %w", c, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("cwd %s: not a directory", c)
	}
	return filepath.Clean(c), nil
}

// Run decides and, when allowed, runs one command. A denial returns the
// decision's error (errors.Is policy.ErrDisabled, ErrAllowlistMiss,
// ErrApprovalRequired or ErrUserDenied) along with a Result whose Decision
// says why; a command that ran returns a nil error whatever its exit code.
func (e *Engine) Run(ctx context.Context, req Request) (Result, error) {
	if req.RunID == "" {
		req.RunID = newRunID()
	}
	p, err := e.Prepare(req)
	if err != nil {
		return Result{Result: runner.Result{ExitCode: -1, Error: err.Error()}}, err
	}
	res := Result{ResolvedPaths: p.Analysis.Paths()}
	rec := AuditRecord{Event: "decision", Request: req, Host: e.Host, NodeID: e.NodeID, Effective: p.Effective, ResolvedPaths: res.ResolvedPaths}
	d := p.Decision
	if d.Outcome == policy.AskHuman {
		d, rec = e.ask(ctx, req, p, rec)
	}
	res.Decision = d
	rec.Decision = d
	if d.Outcome != policy.Allow {
		rec.Event = "denied"
		e.audit(rec)
		err := fmt.Errorf("%w%s", d.Err, denialDetail(p))
		e.emit(Event{Kind: EventDenied, RunID: req.RunID, SessionKey: req.SessionKey, AgentID: req.AgentID, NodeID: e.NodeID, Host: string(e.Host), Command: p.Text, Reason: d.Reason + denialDetail(p)})
		res.Error = err.Error()
		res.ExitCode = -1
		return res, err
	}
	e.audit(rec)
	e.emit(Event{Kind: EventStarted, RunID: req.RunID, SessionKey: req.SessionKey, AgentID: req.AgentID, NodeID: e.NodeID, Host: string(e.Host), Command: p.Text})
	spec := runner.Spec{Argv: p.execArgv(), Command: p.runCommand, Cwd: p.Cwd, Env: req.Env, PTY: req.PTY, BaseEnv: e.baseEnv()}
	if req.TimeoutMs > 0 {
		spec.Timeout = time.Duration(req.TimeoutMs) * time.Millisecond
	}
	rr, runErr := runner.Run(ctx, spec)
	if runErr != nil && rr.Error == "" {
		rr.Error = runErr.Error()
	}
	res.Result = rr
	if p.Satisfied {
		e.recordUse(p)
	}
	code := rr.ExitCode
	e.emit(Event{Kind: EventFinished, RunID: req.RunID, SessionKey: req.SessionKey, AgentID: req.AgentID, NodeID: e.NodeID, Host: string(e.Host), Command: p.Text, ExitCode: &code, TimedOut: rr.TimedOut, Tail: rr.Tail})
	fin := rec
	fin.Event = "finished"
	fin.Result = &rr
	e.audit(fin)
	return res, nil
}

// ask obtains a human's answer (or applies askFallback) for a prepared
// command whose decision is AskHuman.
func (e *Engine) ask(ctx context.Context, req Request, p *Prepared, rec AuditRecord) (policy.Decision, AuditRecord) {
	in := p.input()
	choices := []string{string(policy.AllowOnce), string(policy.AllowAlways), string(policy.Reject)}
	if p.Effective.Ask == policy.AskAlways {
		// allow-always would be meaningless: the next run asks anyway.
		choices = []string{string(policy.AllowOnce), string(policy.Reject)}
	}
	if req.ApprovalDecision != "" && e.TrustApprovalDecision {
		a, err := policy.ParseApproval(req.ApprovalDecision)
		if err == nil {
			rec.Approval, rec.DecidedBy = a, "gateway"
			return e.applyAnswer(a, "gateway", p, choices), rec
		}
	}
	if e.Prompter == nil {
		rec.Fallback = true
		return policy.NoAnswer(in, errNoPrompter.Error()), rec
	}
	timeout := e.PromptTimeout
	if timeout <= 0 {
		timeout = DefaultPromptTimeout
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	allowlisted := make([]bool, len(p.Matched))
	for i, m := range p.Matched {
		allowlisted[i] = m != ""
	}
	pr := approver.PromptRequest{
		Command: p.Text, Argv: req.Argv, Cwd: p.Cwd, Host: string(e.Host),
		Security: string(p.Effective.Security), Ask: string(p.Effective.Ask),
		AgentID: req.AgentID, SessionKey: req.SessionKey, NodeID: e.NodeID,
		ResolvedPaths: p.Analysis.Paths(), Reason: p.Decision.Reason, Allowlisted: allowlisted,
		Choices: choices, ExpiresAtMs: e.now().Add(timeout).UnixMilli(), Fallback: string(p.Effective.Fallback),
	}
	a, by, err := e.Prompter.Prompt(pctx, pr)
	if err != nil {
		why := err.Error()
		if errors.Is(pctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			why = fmt.Sprintf("prompt timed out after %s: %v", timeout, err)
		}
		rec.Fallback = true
		return policy.NoAnswer(in, why), rec
	}
	rec.Approval, rec.DecidedBy = a, by
	return e.applyAnswer(a, by, p, choices), rec
}

func (e *Engine) applyAnswer(a policy.Approval, by string, p *Prepared, choices []string) policy.Decision {
	if a == policy.AllowAlways && !contains(choices, string(a)) {
		a = policy.AllowOnce
	}
	d := policy.Answer(a, by)
	if a == policy.AllowAlways {
		d.Reason += e.persist(p)
	}
	return d
}

// persist records the command's executables in the agent's allowlist after
// an allow-always. Only exact, precise paths are recorded (never a shell,
// interpreter or wrapper); the returned text tells the caller what happened,
// including when nothing could be recorded.
func (e *Engine) persist(p *Prepared) string {
	paths, notes := shellcmd.Recordable(p.Analysis)
	if len(paths) == 0 {
		msg := "; nothing recorded for allow-always"
		if len(notes) > 0 {
			msg += ": " + strings.Join(notes, "; ")
		}
		return msg
	}
	_, err := e.approvalsStore().Update(func(f *approvals.File) error {
		for _, path := range paths {
			f.AddPattern(p.Agent, path)
		}
		return nil
	})
	if err != nil {
		return "; allow-always not recorded: " + err.Error()
	}
	msg := "; recorded " + strings.Join(paths, ", ") + " for agent " + p.Agent
	if len(notes) > 0 {
		msg += " (not recorded: " + strings.Join(notes, "; ") + ")"
	}
	return msg
}

// recordUse queues lastUsedAt/lastUsedCommand/lastResolvedPath stamps for
// the entries that matched; usage.go writes them in batches.
func (e *Engine) recordUse(p *Prepared) {
	now := e.now()
	segs := p.Analysis.Segments
	for i, pat := range p.Matched {
		if pat == "" || i >= len(segs) {
			continue
		}
		real := segs[i].RealPath
		if real == "" {
			real = segs[i].ResolvedPath
		}
		e.usage.add(e, useKey{agent: p.Agent, pattern: pat}, useStamp{command: p.Text, path: real, at: now})
	}
}

func (e *Engine) emit(ev Event) {
	if e.OnEvent != nil {
		e.OnEvent(ev)
	}
}

func (e *Engine) audit(r AuditRecord) {
	if e.OnAudit != nil {
		e.OnAudit(r)
	}
}

// denialDetail adds to a denial what an agent can act on: which
// executables were missing and what would fix it.
func denialDetail(p *Prepared) string {
	var b strings.Builder
	var missing []string
	for i, s := range p.Analysis.Segments {
		if i < len(p.Matched) && p.Matched[i] == "" {
			name := s.ResolvedPath
			if name == "" {
				name = s.Name + " (not found on PATH)"
			}
			missing = append(missing, name)
		}
	}
	if p.Effective.Security == policy.SecurityAllowlist && p.Analysis.OK && len(missing) > 0 {
		b.WriteString("; not allowlisted: " + strings.Join(missing, ", "))
		b.WriteString(" (hint: `exechost approvals allowlist add <path> --agent '" + p.Agent + "'` on the execution host, or ask a human to approve)")
	}
	if !p.Analysis.OK {
		b.WriteString(" (hint: rewrite the command without that construct, or ask a human to approve it)")
	}
	return b.String()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
