package host

import (
	"errors"
	"fmt"
	"github.com/exechost/exechost/internal/confine"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/fschange"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/logging"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/shellcmd"
	"github.com/exechost/exechost/internal/shellrun"
)

// Prepared is a command analysed against this host's policy, before any
// prompt: what Check reports and what Run acts on.
type Prepared struct {
	Agent     string
	Cwd       string
	Text      string // the command as a human should read it
	Effective policy.Effective
	Resolved  approvals.Resolved
	Analysis  shellcmd.Analysis
	Matched   []string // per segment: the pattern that matched, or ""
	// ArgDenied names the deny rules (policy.ArgRule) that refused a
	// segment; each such segment is a miss.
	ArgDenied []string
	// ExpiredGrants names the grants that have ended and would have
	// allowed a segment that is now a miss.
	ExpiredGrants []string
	// argRules and argOnly are for the run-time guard (shellrun.Plan).
	argRules  []policy.ArgRule
	argOnly   []string
	Satisfied bool
	Decision  policy.Decision
	// Env is what the command's programs get beyond the host's own
	// environment: the request's env and every variable the command sets
	// for them (Analysis.Env), name → value as a human should read it
	// (secret-looking values redacted, a value set in the text shown as
	// "(set by the command)").
	Env map[string]string
	// EnvMissing lists the names of Env the policy does not permit
	// (policy.EnvPermitted): each is a miss, like an executable no pattern
	// matched.
	EnvMissing []string
	// envAllow is the agent's environment allowlist, for the interpreter's
	// run-time check.
	envAllow []string
	// Changed lists the executables whose allowlist entry recorded another
	// sha256 (allow-always) than the file now at the path.
	Changed []string
	// files are the file ids of the executables the run may start,
	// recorded at the decision: only those files start (runner.Pin).
	files map[string]runner.FileID
	// argv is the request's argv, when it sent one instead of text: under
	// security=full it runs as given.
	argv []string
	// unknownKeys are the keys of exec-approvals.json this version
	// ignores, for a denial.
	unknownKeys []string
	// jail is the run's confinement before its temporary directory is
	// known (confinement), computed and resolved once: the hidden and
	// read-only sets and the real paths look at the file system.
	jail *confine.Confinement
	// cwdReal is Cwd's real path, once looked up (realCwd).
	cwdReal string
	// reach is the run's confinement with its temporary directory shown
	// as "$TMPDIR", and its jail report, worked out once (reachOf): the
	// prompt's and the audit record's reach line, their layers and the
	// receipt all describe the one run, and each costs stat calls.
	reach *reachReport
	// Rules is the rule set the analysis applied (RulesStrict or
	// RulesContained) and RulesWhy says why, for `approvals check` and
	// the audit record.
	Rules, RulesWhy string
}

// The analysis's rule sets (docs/policy.md, "What the walls contain").
const (
	// RulesStrict: every construct whose effect the text alone does not
	// show is a miss.
	RulesStrict = "strict"
	// RulesContained: constructs the run's walls contain (the guard and
	// the jail) are allowed (shellcmd.Contained).
	RulesContained = "contained"
)

func (p *Prepared) input() policy.Input {
	return policy.Input{Effective: p.Effective, AnalysisOK: p.Analysis.OK, AnalysisError: p.Analysis.Error, AllowlistSatisfied: p.Satisfied}
}

// Prepare analyses req against the current exec-approvals.json and decides
// allow / ask / deny without running or prompting anything. A file that
// cannot be loaded fails closed with an error naming it. A fault of the
// request itself (a refused env name, a bad cwd, an empty command) is a
// bridge.InvalidRequest, so every host answers it with INVALID_REQUEST.
func (e *Engine) Prepare(req Request) (*Prepared, error) {
	for name := range req.Env {
		if policy.DangerousEnv(name) {
			return nil, bridge.InvalidRequest(hint.Wrap(fmt.Errorf("%w: env %s cannot be set by a request (it could change what runs)", runner.ErrDangerousEnv, name), "drop it from env"))
		}
	}
	agent := req.AgentID
	if agent == "" {
		agent = "*"
	}
	// One poll of the watches serves the whole decision: the policy
	// file's, the analysis memo's and the fact cache's Sets.
	var view fschange.View
	if !e.NoCache {
		view = e.watcher().Poll()
	}
	z := e.analyzer().Polled(view)
	ap, err := e.agentPolicy(agent, view)
	if err != nil {
		return nil, err
	}
	cwd, err := e.cwd(z, req.Cwd, agent)
	if err != nil {
		return nil, err
	}
	p := &Prepared{Agent: agent, Cwd: cwd, Resolved: ap.resolved, envAllow: ap.resolved.EnvAllowlist, unknownKeys: ap.unknownKeys}
	p.Effective = policy.Combine(req.Security, req.Ask, p.Resolved.Local)
	env := shellcmd.Env{Cwd: cwd, PATH: e.runPATH(), Home: e.Home}
	// An argv of exactly /bin/sh -c TEXT (what the gateway sends) is that
	// text. Any other argv is one simple command of literal words, analysed
	// and run by the same interpreter as text.
	if text, ok := shellText(req.Argv); ok {
		req.Argv, req.RawCommand = nil, text
	}
	switch {
	case len(req.Argv) > 0:
		p.argv = req.Argv
		p.Rules, p.RulesWhy = RulesStrict, "an argv of literal words needs nothing the walls contain"
		p.Analysis = z.AnalyzeArgv(req.Argv, env)
		p.Text = req.RawCommand
		if p.Text == "" {
			p.Text = strings.Join(req.Argv, " ")
		}
	case strings.TrimSpace(req.RawCommand) != "":
		p.Analysis = z.Analyze(req.RawCommand, env)
		p.Text = req.RawCommand
		p.Rules, p.RulesWhy = RulesStrict, "the text needs nothing the walls contain"
		if !p.Analysis.OK && p.Analysis.Interpretable() && !analysisOff {
			// What the strict rules refuse may be what the walls contain:
			// analysed again under the contained rules when they hold.
			c, why := e.contained(p)
			if c != nil {
				env.Contained = c
				p.Analysis = z.Analyze(req.RawCommand, env)
				p.Rules = RulesContained
			}
			p.RulesWhy = why
		}
	default:
		return nil, bridge.InvalidRequest(hint.Wrap(errors.New("empty command"), "pass command text or an argv"))
	}
	if analysisOff {
		p.Analysis = unanalysed(p.Analysis)
	}
	if p.Analysis.OK {
		list, rules := e.withGrants(ap, cwd, req.SessionKey)
		p.Matched, p.Satisfied, p.ArgDenied = permitSegments(list, rules, p.Analysis.Segments)
		p.argRules = rules.Rules()
		if p.Satisfied {
			// Only a run the allowlist allows holds its programs to the
			// argument rules that allowed them; one a human approved (or
			// askFallback=full let through) runs what was shown.
			p.argOnly = argOnly(list, e.planExecutables(p))
		}
		p.ExpiredGrants = e.expiredGrants(ap, p.Analysis.Segments, p.Matched)
	} else {
		p.Matched = make([]string, len(p.Analysis.Segments))
	}
	if p.Analysis.OK {
		p.files = e.fileIDs(p)
		p.Changed = e.changedSinceRecorded(p, ap.recorded)
	}
	p.checkEnv(req.Env)
	if len(p.EnvMissing) > 0 {
		p.Satisfied = false
	}
	p.Decision = policy.Decide(p.input())
	if len(p.ExpiredGrants) > 0 && p.Decision.Outcome != policy.Allow {
		// In the reason, so the audit log's record says it too.
		p.Decision.Reason += " (expired grant: " + strings.Join(p.ExpiredGrants, "; ") + ")"
	}
	return p, nil
}

// checkEnv fills Env and EnvMissing: the request's env and the variables
// the command sets are held against the agent's environment allowlist.
func (p *Prepared) checkEnv(reqEnv map[string]string) {
	missing := map[string]bool{}
	for name, val := range reqEnv {
		if p.Env == nil {
			p.Env = map[string]string{}
		}
		p.Env[name] = shownEnvValue(name, val)
		if !policy.EnvPermitted(name, p.envAllow) {
			missing[name] = true
		}
	}
	for _, name := range p.Analysis.Env {
		if p.Env == nil {
			p.Env = map[string]string{}
		}
		if _, ok := p.Env[name]; !ok {
			p.Env[name] = "(set by the command)"
		}
		if !policy.EnvPermitted(name, p.envAllow) {
			missing[name] = true
		}
	}
	if len(missing) > 0 {
		p.EnvMissing = slices.Sorted(maps.Keys(missing))
	}
}

// shownEnvValue is how a value appears in prompts, checks and audit
// records: a secret-looking name's value is redacted.
func shownEnvValue(name, val string) string {
	if logging.IsSecretKey(name) {
		return logging.Redacted
	}
	return val
}

// unanalysed is a's text as the analysis-off test build takes it: vouched
// for with nothing to match, whatever the analysis found, as long as it
// parses.
func unanalysed(a shellcmd.Analysis) shellcmd.Analysis {
	if !a.Interpretable() {
		return a
	}
	return shellcmd.Analysis{OK: true, Segments: []shellcmd.Segment{}, Canonical: a.Canonical, Hash: a.Hash}
}

// planExecutables are the executables the interpreter may start for p:
// the analysis's, or in the analysis-off test build the allowlist's
// literal paths.
func (e *Engine) planExecutables(p *Prepared) []string {
	if analysisOff {
		return unanalysedExecutables(append(p.Resolved.Patterns(), allowRulePatterns(p.Resolved)...))
	}
	return p.Analysis.Executables()
}

// shellText returns TEXT for an argv of exactly ["/bin/sh", "-c", TEXT]:
// running that argv and running TEXT as command text are the same thing.
func shellText(argv []string) (string, bool) {
	if len(argv) == 3 && argv[0] == "/bin/sh" && argv[1] == "-c" && strings.TrimSpace(argv[2]) != "" {
		return argv[2], true
	}
	return "", false
}

// cwd is the run's working directory: the request's (absolute or ~/…,
// an existing directory), or, when it names none, the agent's workspace
// (reach.go), never the home directory, where a run could plant
// ~/.bashrc or ~/.ssh/authorized_keys.
func (e *Engine) cwd(z *shellcmd.Analyzer, c, agent string) (string, error) {
	if c == "" {
		return e.defaultCwd(agent)
	}
	c = policy.ExpandHome(c, e.Home)
	if !filepath.IsAbs(c) {
		return "", bridge.InvalidRequest(hint.Wrap(fmt.Errorf("cwd %q is not absolute", c), "pass an absolute path or ~/…"))
	}
	fi, err := z.Stat(c) // through the analysis's fact cache
	if err != nil {
		return "", bridge.InvalidRequest(fmt.Errorf("cwd %s: %w", c, err))
	}
	if !fi.IsDir() {
		return "", bridge.InvalidRequest(fmt.Errorf("cwd %s: not a directory", c))
	}
	// No run reaches the state directory (the jail's view leaves it out),
	// so one cannot start there: say so rather than fail to chdir.
	if e.StateDir != "" && pathWithin(realPath(c), realPath(e.StateDir)) {
		return "", bridge.InvalidRequest(hint.Wrap(fmt.Errorf("cwd %s is inside this host's state directory %s, which no run can reach", c, e.StateDir), "run it from another directory"))
	}
	return filepath.Clean(c), nil
}

// contained returns the walls of a run of p for the analysis's contained
// rules (shellcmd.Contained), and why they hold; nil and why not when the
// strict rules must apply. They hold when the text will run in the guarded
// interpreter (not security=full, which runs text as written) confined by
// a jail this host builds with every layer the policy asks for: writes
// only beneath the writable roots, Landlock at the ABI the confinement
// needs. Where the jail cannot be built (no jail on this platform or in
// this engine, a kernel too old, a layer missing, even under
// confine.unsupported=warn) the strict rules apply.
func (e *Engine) contained(p *Prepared) (*shellcmd.Contained, string) {
	switch p.Effective.Security {
	case policy.SecurityFull:
		return nil, "security=full runs the text as written, with no guard"
	case policy.SecurityDeny:
		return nil, "security=deny runs nothing"
	}
	if e.noConfine || !shellrun.Supported || !confine.Supported {
		return nil, "runs on this host are not confined"
	}
	c := e.confinement(p, "")
	if !c.Active() || slices.Contains(c.Writable, "/") {
		return nil, "the run may write everywhere"
	}
	abi := e.kernelABI()
	if warning, err := c.Check(abi); err != nil || warning != "" || abi == 0 {
		return nil, "Landlock cannot enforce the run's confinement on this kernel"
	}
	pool := e.jails()
	if pool == nil {
		return nil, "no jail can be built on this host"
	}
	held, missing, err := pool.Layers(e.jailOptions(c, "", nil))
	switch {
	case err != nil:
		return nil, "the jail cannot be built on this host: " + err.Error()
	case len(missing) > 0:
		return nil, "the jail lacks " + layerList(missing) + " on this host"
	}
	names := make([]string, len(held))
	for i, l := range held {
		names[i] = string(l)
	}
	ro := slices.Concat(c.ReadOnly, c.Hidden, c.Protected)
	return &shellcmd.Contained{JailHolds: true, WritableRoots: slices.Clone(c.Writable), ReadOnly: ro},
		"the jail holds (" + strings.Join(names, ", ") + "; writes only in " + strings.Join(c.Writable, ", ") + ")"
}

// walls are the writable roots and read-only paths the interpreter holds
// a contained run's redirections to (shellrun.Plan.Contained), from the
// run's confinement conf; nil when the strict rules allowed the text, so
// the interpreter opens /dev/null only.
func (p *Prepared) walls(conf *confine.Confinement) *shellrun.Walls {
	if len(p.Analysis.Contained) == 0 || conf == nil {
		return nil
	}
	return &shellrun.Walls{Writable: slices.Clone(conf.Writable), ReadOnly: slices.Concat(conf.ReadOnly, conf.Hidden, conf.Protected)}
}
