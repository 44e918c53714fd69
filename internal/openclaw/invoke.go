package openclaw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/google/uuid"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/runner"
)

// maxWhichBins bounds one system.which request.
const maxWhichBins = 256

// runParams is OpenClaw's system.run / system.run.prepare params. Fields
// exechost does not act on (needsScreenRecording, …) are ignored. The
// approval flags settle a prompt only on a node that accepts gateway
// approvals, and only for the exact plan it prepared (approve.go).
type runParams struct {
	Command              []string          `json:"command"`
	RawCommand           *string           `json:"rawCommand"`
	Cwd                  *string           `json:"cwd"`
	Env                  map[string]string `json:"env"`
	TimeoutMs            *int64            `json:"timeoutMs"`
	AgentID              *string           `json:"agentId"`
	SessionKey           *string           `json:"sessionKey"`
	RunID                *string           `json:"runId"`
	Security             string            `json:"security"`
	Ask                  string            `json:"ask"`
	SuppressNotifyOnExit bool              `json:"suppressNotifyOnExit"`
	SystemRunPlan        *runPlan          `json:"systemRunPlan"`
	Approved             bool              `json:"approved"`
	ApprovalDecision     string            `json:"approvalDecision"`
}

// runPlan is the canonical plan system.run.prepare returns and the gateway
// later forwards with system.run (approvals are bound to it).
type runPlan struct {
	Argv           []string `json:"argv"`
	Cwd            *string  `json:"cwd"`
	CommandText    string   `json:"commandText"`
	CommandPreview *string  `json:"commandPreview"`
	AgentID        *string  `json:"agentId"`
	SessionKey     *string  `json:"sessionKey"`
}

// prepareResult is system.run.prepare's payload.
type prepareResult struct {
	Plan                runPlan        `json:"plan"`
	ExecPolicy          execPolicy     `json:"execPolicy"`
	AllowAlwaysCoverage alwaysCoverage `json:"allowAlwaysCoverage"`
}

type execPolicy struct {
	Security string `json:"security"`
	Ask      string `json:"ask"`
}

// alwaysCoverage tells OpenClaw which allowlist patterns an allow-always
// would add. exechost records allow-always itself (through its own
// approver, with its own rules), so it never claims coverage here.
type alwaysCoverage struct {
	Complete bool     `json:"complete"`
	Patterns []string `json:"patterns"`
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// request turns OpenClaw's params into the engine's request. A plan the
// gateway forwards wins over the loose fields: it is what was prepared
// (and possibly approved).
func (p runParams) request(invokeTimeout int64) host.Request {
	req := host.Request{
		Argv: p.Command, RawCommand: str(p.RawCommand), Cwd: str(p.Cwd), Env: p.Env,
		AgentID: str(p.AgentID), SessionKey: str(p.SessionKey), RunID: str(p.RunID),
	}
	if pl := p.SystemRunPlan; pl != nil && len(pl.Argv) > 0 {
		req.Argv, req.Cwd, req.RawCommand = pl.Argv, str(pl.Cwd), pl.CommandText
		if a := str(pl.AgentID); a != "" {
			req.AgentID = a
		}
		if s := str(pl.SessionKey); s != "" {
			req.SessionKey = s
		}
	}
	req.Argv = canonicalArgv(req.Argv)
	if shellWrapper(req.Argv) || len(req.Argv) == 0 {
		// Command text runs under a shell wrapper; OpenClaw's node host
		// then passes on only locale and colour variables (shellEnv).
		req.Env = shellEnv(req.Env)
	}
	if req.SessionKey == "" {
		// OpenClaw's node host: the request's sessionKey, else "node"
		// (never the invoke's); its gateway routes events by it.
		req.SessionKey = defaultSessionKey
	}
	if req.RunID == "" {
		req.RunID = uuid.NewString() // as OpenClaw's host does: events need one
	}
	if p.TimeoutMs != nil && *p.TimeoutMs > 0 {
		req.TimeoutMs = *p.TimeoutMs
	} else {
		req.TimeoutMs = invokeTimeout
	}
	// The requested policy can only tighten this host's (Combine takes
	// the stricter); a value this version does not know tightens fully.
	if p.Security != "" {
		req.Security = policy.SecurityDeny
		if s, err := policy.ParseSecurity(p.Security); err == nil {
			req.Security = s
		}
	}
	if p.Ask != "" {
		req.Ask = policy.AskAlways
		if a, err := policy.ParseAsk(p.Ask); err == nil {
			req.Ask = a
		}
	}
	return req
}

// canonicalArgv turns the wrapper OpenClaw's exec tool sends on Linux,
// /bin/sh -lc TEXT, into /bin/sh -c TEXT, which the engine analyses and
// runs as TEXT. Dropping -l only removes what would run unseen (a login
// shell sources /etc/profile and ~/.profile before TEXT); it never adds
// anything. Other argv is left exactly as sent.
func canonicalArgv(argv []string) []string {
	if len(argv) == 3 && (argv[0] == "/bin/sh" || argv[0] == "sh") && argv[1] == "-lc" && strings.TrimSpace(argv[2]) != "" {
		return []string{"/bin/sh", "-c", argv[2]}
	}
	return argv
}

func failure(code, format string, args ...any) invokeResult {
	return invokeResult{OK: false, Error: &invokeError{Code: code, Message: fmt.Sprintf(format, args...)}}
}

func success(v any) invokeResult {
	js, err := jsonString(v)
	if err != nil {
		return failure(CodeUnavailable, "encode result: %v", err)
	}
	return invokeResult{OK: true, PayloadJSON: js}
}

func decodeParams(req invokeRequest, v any) error {
	if req.ParamsJSON == nil || *req.ParamsJSON == "" {
		return errors.New("INVALID_REQUEST: paramsJSON required")
	}
	if err := json.Unmarshal([]byte(*req.ParamsJSON), v); err != nil {
		return fmt.Errorf("INVALID_REQUEST: paramsJSON: %v", err)
	}
	return nil
}

// invoke answers one node.invoke.request.
func (n *Node) invoke(ctx context.Context, req invokeRequest) invokeResult {
	if !declared(req.Command) {
		return failure(CodeUnavailable, "command not supported: %s (this exechost node serves %s)", req.Command, strings.Join(Commands, ", "))
	}
	switch req.Command {
	case CmdSystemRun:
		return n.systemRun(ctx, req)
	case CmdSystemRunPrepare:
		return n.prepare(req)
	case CmdSystemWhich:
		return n.which(req)
	case CmdApprovalsGet:
		return n.approvalsGet()
	case CmdApprovalsSet:
		return n.approvalsSet(ctx, req)
	}
	return failure(CodeUnavailable, "command not supported")
}

func (n *Node) systemRun(ctx context.Context, req invokeRequest) invokeResult {
	var p runParams
	if err := decodeParams(req, &p); err != nil {
		return failure(CodeInvalidRequest, "%v", err)
	}
	if len(p.Command) == 0 && (p.SystemRunPlan == nil || len(p.SystemRunPlan.Argv) == 0) {
		return failure(CodeInvalidRequest, "command required")
	}
	if n.opts.Runner == nil {
		return failure(CodeDenied, "%s (no execution engine on this node)", policy.ErrDisabled)
	}
	if blocked := blockedEnv(p.Env); len(blocked) > 0 {
		// OpenClaw's wording and code for the same refusal, before policy.
		return failure(CodeInvalidRequest, "SYSTEM_RUN_DENIED: environment override rejected (blocked override keys: %s)", strings.Join(blocked, ", "))
	}
	hreq := p.request(req.TimeoutMs)
	text := hreq.RawCommand
	if text == "" {
		text = strings.Join(hreq.Argv, " ")
	}
	approved := p.Approved || p.ApprovalDecision != ""
	if approved && n.opts.GatewayApprovals {
		a, msg := n.bindApproval(p, hreq)
		if a == nil {
			n.deniedEvent(hreq, text, "execution-plan-miss", p.SuppressNotifyOnExit)
			return failure(CodeDenied, "SYSTEM_RUN_DENIED: execution plan mismatch (%s; request approval again)", msg)
		}
		if changed := a.plan.changedFiles(); len(changed) > 0 {
			// As OpenClaw's node host refuses it (exec.denied
			// approval-required), naming what changed.
			n.log.Warn("refused an approved run: a bound file changed since system.run.prepare", "runId", hreq.RunID, "files", changed)
			n.deniedEvent(hreq, text, "approval-required", p.SuppressNotifyOnExit)
			return failure(CodeDenied, "%s (changed since the approval: %s; request approval again)", ErrOperandChanged, strings.Join(changed, ", "))
		}
		ctx = withGatewayApproval(ctx, a)
	}
	run := n.track(hreq.RunID, p.SuppressNotifyOnExit)
	defer n.untrack(hreq.RunID)
	if msg := badCwd(hreq.Cwd); msg != "" {
		// OpenClaw's node host reports a working directory it cannot
		// enter as a run that failed to start, not as a protocol error:
		// its exec tool must not report "outcome unknown".
		res := runResult{Success: false, Error: &msg}
		n.finished(hreq, text, run, res, msg)
		return success(res)
	}
	res, err := n.opts.Runner.Run(ctx, hreq)
	if err != nil {
		r := runFailure(err)
		if approved && r.Error != nil && r.Error.Code == CodeDenied {
			r.Error.Message = n.approvedDenialHint(hreq, r.Error.Message)
		}
		return r
	}
	out := resultOf(res)
	command, tail := text, res.Tail
	if fin := run.finishedEvent(); fin != nil {
		command, tail = fin.Command, fin.Tail
	}
	cut := len(res.Stdout)+len(res.Stderr) > runner.TailSize || res.DroppedBytes > 0
	n.finished(hreq, command, run, out, eventOutput(tail, cut, out.Error))
	return success(out)
}

// defaultSessionKey is the session OpenClaw's node host names in its
// events when the request names none.
const defaultSessionKey = "node"

// blockedEnv lists the env names a request may not set, sorted.
func blockedEnv(env map[string]string) []string {
	var out []string
	for k := range env {
		if policy.DangerousEnv(k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// badCwd says, in OpenClaw's words, why cwd cannot be the working
// directory ("" when it can). A relative cwd is never resolved against
// this process's own directory: it is a failed run, as OpenClaw's host
// reports a cwd it cannot enter.
func badCwd(cwd string) string {
	if cwd == "" || strings.HasPrefix(cwd, "~") {
		return "" // the engine expands ~ itself
	}
	if !filepath.IsAbs(cwd) {
		return fmt.Sprintf("node exec working directory is not an absolute path on the node host: %s", cwd)
	}
	fi, err := os.Stat(cwd)
	switch {
	case err == nil && fi.IsDir():
		return ""
	case err == nil || errors.Is(err, syscall.ENOTDIR):
		return fmt.Sprintf("node exec working directory is not a directory on the node host: %s", cwd)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("node exec working directory does not exist on the node host: %s", cwd)
	}
	return fmt.Sprintf("node exec working directory is inaccessible on the node host: %s (%v)", cwd, err)
}

// runResult is system.run's payload as OpenClaw's node host sends it:
// exitCode only when the process exited by itself (124 when its timeout
// killed it, as OpenClaw's runner reports), error null unless it never
// ran to an exit of its own, truncated only when output was cut.
type runResult struct {
	ExitCode  *int    `json:"exitCode,omitempty"`
	TimedOut  bool    `json:"timedOut"`
	Success   bool    `json:"success"`
	Stdout    string  `json:"stdout"`
	Stderr    string  `json:"stderr"`
	Error     *string `json:"error"`
	Truncated bool    `json:"truncated,omitempty"` // OpenClaw's host sends it only when true
}

// timeoutExitCode is the exit code OpenClaw's runner reports for a
// command its timeout killed (the coreutils timeout(1) convention).
const timeoutExitCode = 124

// resultOf converts the engine's result. runner.Result.Error is empty
// exactly when the process exited by itself; otherwise (never started,
// killed by a signal, cancelled) OpenClaw reports no exit code.
func resultOf(r host.Result) runResult {
	out := runResult{TimedOut: r.TimedOut, Success: r.Success, Stdout: r.Stdout, Stderr: r.Stderr, Truncated: r.Truncated}
	switch {
	case r.TimedOut:
		code := timeoutExitCode
		out.ExitCode = &code
	case r.Error == "":
		code := r.ExitCode
		out.ExitCode = &code
	}
	if r.Error != "" && !r.TimedOut {
		// OpenClaw's host reports a timeout by timedOut and exit code 124
		// alone; an error text would become an extra line in its exec
		// tool's result.
		e := r.Error
		out.Error = &e
	}
	return out
}

// eventOutput is exec.finished's output: the combined output's tail, then
// the error, as OpenClaw's host joins them. A tail the runner cut (it
// starts with its "…" marker) starts with OpenClaw's marker instead,
// "... (truncated) ", so the gateway and the agent see that it is partial.
func eventOutput(tail string, cut bool, errText *string) string {
	var parts []string
	if cut {
		tail = eventTruncated + strings.TrimPrefix(tail, runnerTailMarker)
	}
	if t := strings.TrimSpace(tail); t != "" {
		parts = append(parts, t)
	}
	if errText != nil && *errText != "" {
		parts = append(parts, *errText)
	}
	return strings.Join(parts, "\n")
}

// runFailure maps the engine's refusal to OpenClaw's codes and texts:
// policy denials keep their SYSTEM_RUN_DENIED / SYSTEM_RUN_DISABLED
// message (which names what was missing) under code SYSTEM_RUN_DENIED, as
// OpenClaw's node host answers them.
func runFailure(err error) invokeResult {
	for _, s := range []error{policy.ErrDisabled, policy.ErrAllowlistMiss, policy.ErrApprovalRequired, policy.ErrUserDenied} {
		if errors.Is(err, s) {
			return failure(CodeDenied, "%s", err.Error())
		}
	}
	if errors.Is(err, runner.ErrDangerousEnv) {
		// OpenClaw's code for it; the engine's text does not repeat the
		// SYSTEM_RUN_DENIED prefix.
		return failure(CodeInvalidRequest, "SYSTEM_RUN_DENIED: environment override rejected (%v)", err)
	}
	return failure(CodeInvalidRequest, "%v", err)
}

func (n *Node) prepare(req invokeRequest) invokeResult {
	var p runParams
	if err := decodeParams(req, &p); err != nil {
		return failure(CodeInvalidRequest, "%v", err)
	}
	if len(p.Command) == 0 {
		return failure(CodeInvalidRequest, "command required")
	}
	if n.opts.Runner == nil {
		return failure(CodeDenied, "%s (no execution engine on this node)", policy.ErrDisabled)
	}
	hreq := p.request(req.TimeoutMs)
	hreq.Argv, hreq.Cwd, hreq.RawCommand = canonicalArgv(p.Command), str(p.Cwd), str(p.RawCommand)
	plan, err := n.opts.Runner.Plan(hreq)
	if err != nil {
		return runFailure(err)
	}
	text := plan.CommandText
	if text == "" {
		text = strings.Join(plan.Argv, " ")
	}
	out := prepareResult{
		Plan: runPlan{
			Argv: plan.Argv, Cwd: strPtr(plan.Cwd), CommandText: text,
			AgentID: p.AgentID, SessionKey: p.SessionKey,
		},
		ExecPolicy:          execPolicy{Security: plan.Security, Ask: plan.Ask},
		AllowAlwaysCoverage: alwaysCoverage{Patterns: []string{}},
	}
	if raw := str(p.RawCommand); raw != "" && raw != text {
		out.Plan.CommandPreview = &raw
	}
	if n.opts.GatewayApprovals {
		bound := bindFiles(plan.Programs, plan.Cwd)
		if desc := describeBound(bound); desc != "" {
			// OpenClaw shows commandPreview in the approval prompt: the
			// operator sees which files the approval is bound to.
			preview := text + "\n" + desc
			if raw := str(p.RawCommand); raw != "" && raw != text {
				preview = raw + "\n" + desc
			}
			out.Plan.CommandPreview = &preview
		}
		key := planKey(plan.Argv, plan.Cwd, text, str(p.AgentID), str(p.SessionKey), hreq.Env)
		n.prepared.add(key, preparedPlan{hash: plan.Hash, cwd: plan.Cwd, bound: bound, at: n.now()})
	}
	return success(out)
}

func (n *Node) which(req invokeRequest) invokeResult {
	var p struct {
		Bins []string `json:"bins"`
	}
	if err := decodeParams(req, &p); err != nil {
		return failure(CodeInvalidRequest, "%v", err)
	}
	if p.Bins == nil {
		return failure(CodeInvalidRequest, "INVALID_REQUEST: bins required")
	}
	if len(p.Bins) > maxWhichBins {
		return failure(CodeInvalidRequest, "INVALID_REQUEST: at most %d bins per request", maxWhichBins)
	}
	found := map[string]string{}
	for _, b := range p.Bins {
		b = strings.TrimSpace(b)
		// Bare names only: a path would let a caller probe the file system.
		if b == "" || strings.ContainsRune(b, os.PathSeparator) {
			continue
		}
		if path, err := exec.LookPath(b); err == nil {
			found[b] = path
		}
	}
	return success(map[string]any{"bins": found})
}

// approvalsSnapshot is OpenClaw's system.execApprovals.get/set payload:
// the file is exechost's exec-approvals.json (schema v1, the same schema
// OpenClaw's hosts keep in SQLite), with the socket token redacted.
type approvalsSnapshot struct {
	Path   string          `json:"path"`
	Exists bool            `json:"exists"`
	Hash   string          `json:"hash"`
	File   json.RawMessage `json:"file"`
}

func (n *Node) snapshot(st *approvals.Store, f *approvals.File, exists bool) invokeResult {
	// OpenClaw's gateway refuses a file with members its schema lacks, so
	// it sees only its own; the hash covers the whole file, so any change,
	// exechost-only ones included, makes an editor's baseHash stale.
	data, err := approvals.OpenClawView(f)
	if err != nil {
		return failure(CodeUnavailable, "encode approvals: %v", err)
	}
	return success(approvalsSnapshot{Path: st.Path, Exists: exists, Hash: f.Hash(), File: data})
}

// usageFlusher is implemented by a Runner that batches lastUsedAt stamps
// (exechost's engine does): flushing before a snapshot keeps an editor's
// baseHash from going stale on bookkeeping of runs that already finished.
type usageFlusher interface{ FlushUsage() error }

func (n *Node) approvalsGet() invokeResult {
	if f, ok := n.opts.Runner.(usageFlusher); ok {
		if err := f.FlushUsage(); err != nil {
			n.log.Warn("flush lastUsedAt before an approvals snapshot", "err", err)
		}
	}
	st := approvals.NewStore(n.opts.StateDir)
	f, err := st.Load()
	if err != nil {
		return failure(CodeUnavailable, "%v", err)
	}
	_, statErr := os.Stat(st.Path)
	return n.snapshot(st, f, statErr == nil)
}

// approvalsSet replaces exec-approvals.json with the sent file when the
// file is still what the editor saw (baseHash). The document is read as
// OpenClaw means it (openclawDocument); the file keeps exechost's schema.
// The socket section (path and token) always stays this host's own: a
// remote editor must not be able to redirect prompts to another socket or
// learn or set its key. A change that allows more than the current file is
// written only with this host's consent (Options.AllowRemoteWidening, or
// its approver confirming it), else refused INVALID_REQUEST (the code
// OpenClaw's own host uses for a refused set) naming each widening and how
// to apply it.
func (n *Node) approvalsSet(ctx context.Context, req invokeRequest) invokeResult {
	var p struct {
		File     json.RawMessage `json:"file"`
		BaseHash string          `json:"baseHash"`
	}
	if err := decodeParams(req, &p); err != nil {
		return failure(CodeInvalidRequest, "%v", err)
	}
	if len(p.File) == 0 || string(p.File) == "null" {
		return failure(CodeInvalidRequest, "INVALID_REQUEST: exec approvals file required")
	}
	st := approvals.NewStore(n.opts.StateDir)
	if _, err := os.Stat(st.Path); err == nil && p.BaseHash == "" {
		return failure(CodeInvalidRequest, "INVALID_REQUEST: exec approvals base hash required; reload and retry")
	}
	cur, err := st.Load()
	if err != nil {
		return failure(CodeUnavailable, "%v", err)
	}
	if p.BaseHash == "" {
		// No file yet: the merge below is against cur, so the write must
		// be too.
		p.BaseHash = cur.Hash()
	}
	// The document is OpenClaw's view: what it lacks of this host's file
	// (confine, envAllowlist, pins, …) is kept, never dropped.
	doc, err := approvals.MergeOpenClawEdit(cur, p.File)
	if err != nil {
		return failure(CodeInvalidRequest, "INVALID_REQUEST: %v", err)
	}
	next, err := openclawDocument(doc)
	if err != nil {
		return failure(CodeInvalidRequest, "INVALID_REQUEST: %v", err)
	}
	consent := approvals.RemoteConsent(ctx, n.opts.AllowRemoteWidening, n.opts.ConfirmWidening, "the OpenClaw gateway", n.DeviceID())
	f, err := st.ReplaceRemote(p.BaseHash, next, consent)
	switch {
	case errors.Is(err, approvals.ErrStale):
		return failure(CodeInvalidRequest, "INVALID_REQUEST: exec approvals changed; reload and retry")
	case errors.Is(err, approvals.ErrWidening):
		n.log.Warn("refused a remote approvals change that widens this node's policy", "err", err)
		return failure(CodeInvalidRequest, "INVALID_REQUEST: %v", err)
	case err != nil:
		return failure(CodeUnavailable, "%v", err)
	}
	return n.snapshot(st, f, true)
}

// OpenClaw's node host reads a missing defaults.security as full, a
// missing ask as off and a missing askFallback as deny (its
// resolveExecApprovalsFromFile); exechost's built-ins are deny, on-miss,
// deny. A document from OpenClaw is given OpenClaw's meaning before it
// becomes an exechost file, where every default is then written out.
var openclawDefaults = approvals.Defaults{
	Security:    string(policy.SecurityFull),
	Ask:         string(policy.AskOff),
	AskFallback: string(policy.FallbackDeny),
}

// openclawDocument parses an exec approvals document OpenClaw sent:
// exechost's schema v1 (the same as OpenClaw's), missing defaults filled
// with OpenClaw's, and every value checked: an invalid security, ask or
// askFallback, or an empty pattern, is refused with where it is and what
// is accepted (exechost's own file would skip an invalid value to the next
// level; a remote editor gets an error instead of a silent fallback).
func openclawDocument(data []byte) (*approvals.File, error) {
	f, err := approvals.Parse("(sent file)", data)
	if err != nil {
		return nil, err
	}
	var bad []string
	check := func(where, security, ask, fallback string) {
		for _, c := range []struct {
			field, v string
			parse    func(string) error
		}{
			{"security", security, func(s string) error { _, err := policy.ParseSecurity(s); return err }},
			{"ask", ask, func(s string) error { _, err := policy.ParseAsk(s); return err }},
			{"askFallback", fallback, func(s string) error { _, err := policy.ParseFallback(s); return err }},
		} {
			if c.v == "" {
				continue
			}
			if err := c.parse(c.v); err != nil {
				bad = append(bad, fmt.Sprintf("%s.%s: %v", where, c.field, err))
			}
		}
	}
	d := &f.Defaults
	check("defaults", d.Security, d.Ask, d.AskFallback)
	for _, id := range f.AgentIDs() {
		a := f.Agents[id]
		check("agents."+id, a.Security, a.Ask, a.AskFallback)
		for i, e := range a.Allowlist {
			if strings.TrimSpace(e.Pattern) == "" {
				bad = append(bad, fmt.Sprintf("agents.%s.allowlist[%d].pattern: empty", id, i))
			}
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("exec approvals file: %s", strings.Join(bad, "; "))
	}
	fill := func(s *string, v string) {
		if strings.TrimSpace(*s) == "" {
			*s = v
		}
	}
	fill(&d.Security, openclawDefaults.Security)
	fill(&d.Ask, openclawDefaults.Ask)
	fill(&d.AskFallback, openclawDefaults.AskFallback)
	return f, nil
}

// bindApproval matches a system.run that carries a gateway approval to
// the plan this node prepared: the forwarded systemRunPlan and the loose
// fields must agree (as OpenClaw's own host requires), and plan plus env
// must be exactly one this node returned from system.run.prepare. The
// plan is consumed. It returns nil and why when nothing matches.
func (n *Node) bindApproval(p runParams, hreq host.Request) (*gatewayApproval, string) {
	decision, err := policy.ParseApproval(p.ApprovalDecision)
	if p.ApprovalDecision == "" {
		decision, err = policy.AllowOnce, nil // approved: true alone
	}
	if err != nil || decision == policy.Reject {
		return nil, fmt.Sprintf("approvalDecision %q is not an allow", p.ApprovalDecision)
	}
	pl := p.SystemRunPlan
	if pl == nil || len(pl.Argv) == 0 {
		return nil, "an approval needs the systemRunPlan this node prepared"
	}
	argv := canonicalArgv(pl.Argv)
	if len(p.Command) > 0 && !slices.Equal(canonicalArgv(p.Command), argv) || str(p.Cwd) != str(pl.Cwd) ||
		str(p.AgentID) != str(pl.AgentID) || str(p.SessionKey) != str(pl.SessionKey) {
		return nil, "the command, cwd, agent or session differ from the approved plan"
	}
	key := planKey(argv, str(pl.Cwd), pl.CommandText, str(pl.AgentID), str(pl.SessionKey), hreq.Env)
	prep, ok := n.prepared.take(key, n.now())
	if !ok {
		return nil, "this node prepared no such plan, or already ran it: the text, cwd or environment differ from what was approved"
	}
	id := str(p.RunID)
	if id == "" {
		id = "without an id"
	}
	return &gatewayApproval{decision: decision, plan: prep, id: id}, ""
}

// Markers of a cut output tail: the runner's, and OpenClaw's for
// exec.finished (buildExecEventPayload's "... (truncated) " prefix).
const (
	runnerTailMarker = "…"
	eventTruncated   = "... (truncated) "
)

// shellWrapper reports whether argv runs command text through a POSIX
// shell's -c (sh -c TEXT, bash -lc TEXT, …), as OpenClaw's
// isShellWrapperInvocation sees it.
func shellWrapper(argv []string) bool {
	if len(argv) < 3 || interpreterKind(filepath.Base(argv[0])) != "sh" {
		return false
	}
	for _, a := range argv[1 : len(argv)-1] {
		if !strings.HasPrefix(a, "-") || a == "--" {
			return false
		}
		if strings.HasSuffix(a, "c") && !strings.HasPrefix(a, "--") {
			return true
		}
	}
	return false
}

// shellEnv is what OpenClaw's node host keeps of a request's env for
// command text run through a shell wrapper (sanitizeSystemRunEnvOverrides):
// locale and colour variables. Anything else is dropped: the shell text,
// not the caller's env, says what its programs get. (OpenClaw also passes
// PAGER=cat as PAGER=""; exechost refuses any PAGER override before this,
// as a dangerous name.)
func shellEnv(env map[string]string) map[string]string {
	var out map[string]string
	for k, v := range env {
		u := strings.ToUpper(strings.TrimSpace(k))
		if (slices.Contains(shellWrapperEnv, u) || strings.HasPrefix(u, "LC_")) && portableEnvName(k) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// shellWrapperEnv is OpenClaw's HOST_SHELL_WRAPPER_ALLOWED_OVERRIDE_ENV_KEYS.
var shellWrapperEnv = []string{"TERM", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "OPENCLAW_SUBAGENT_EXEC"}

// portableEnvName is OpenClaw's PORTABLE_ENV_VAR_KEY: [A-Za-z_][A-Za-z0-9_]*.
func portableEnvName(k string) bool {
	for i, c := range k {
		if c != '_' && !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return k != ""
}

// approvedDenialHint rewrites the hint of a denial of a run that came with
// an operator's approval from OpenClaw, so it names what decided. When
// this node's policy denied before any prompt (security=deny, or an
// allowlist miss with ask=off), no approval could have changed that: the
// node's exec-approvals.json decides, and "ask a human to approve" would
// send the operator round in circles. When the engine asked and this node
// does not take gateway approvals, the hint says how to accept them.
func (n *Node) approvedDenialHint(req host.Request, msg string) string {
	plan, err := n.opts.Runner.Plan(req)
	if err == nil && plan.Decision == string(policy.DenyRun) {
		for _, s := range []string{", or ask a human to approve it)", ", or ask a human to approve)", " — or ask a human to approve)"} {
			msg = strings.ReplaceAll(msg, s, ")")
		}
		return msg + fmt.Sprintf(" (an operator approved this run in OpenClaw, but this node's own policy denies it before any prompt: "+
			"its exec-approvals.json has security=%s ask=%s for this agent, and a gateway approval never overrides it; "+
			"change that policy on the node, e.g. `exechost approvals allowlist add <path>` or ask=on-miss there)", plan.Security, plan.Ask)
	}
	if !n.opts.GatewayApprovals {
		return msg + " (hint: an approval given through the OpenClaw gateway came with this run, but this node does not accept them; start it with `exechost node run --openclaw URL --approvals-route both` (or gateway) to accept them for exactly the plan it prepared)"
	}
	return msg
}
