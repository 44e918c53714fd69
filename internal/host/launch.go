package host

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/shellcmd"
	"github.com/exechost/exechost/internal/shellrun"
)

// How a decided command runs. What the analysis vouched for runs as the
// tree it analysed, never as text for another parser.
const (
	// RunsDirect: one plain command the analysis resolved, started by
	// its resolved path with no shell and no interpreter.
	RunsDirect = "direct"
	// RunsInterpreted: the analysed tree runs in the interpreter, which
	// refuses at run time anything the analysis did not allow.
	RunsInterpreted = "interpreter"
	// RunsUnchecked: a tree a human approved though the analysis could
	// not vouch for it runs in the interpreter without run-time checks.
	RunsUnchecked = "interpreter, unchecked"
	// RunsShellText: text the interpreter cannot run (bash-only syntax),
	// or any text under security=full, goes to /bin/sh -c as written.
	RunsShellText = "shell text"
)

// runsAs says how p will run if allowed: by the analysis (direct or
// interpreted) unless nothing was vouched for (security=full or
// askFallback=full) or the text cannot be interpreted.
func (p *Prepared) runsAs(unvouched bool) string {
	switch {
	case unvouched:
		return RunsShellText
	case p.Analysis.OK && p.Analysis.Interpretable():
		if _, ok := p.directArgv(); ok {
			return RunsDirect
		}
		// Where there is no interpreter (Windows) spec fails closed.
		return RunsInterpreted
	case p.Analysis.Interpretable() && shellrun.Supported:
		return RunsUnchecked
	}
	return RunsShellText
}

// RunsAs says how the command would run if allowed (RunsDirect,
// RunsInterpreted, RunsUnchecked or RunsShellText), for `approvals check`.
func (p *Prepared) RunsAs() string {
	return p.runsAs(p.Effective.Security == policy.SecurityFull)
}

// spec returns the runner spec that runs p as runsAs says, confined as
// e.confinement says, and the function that removes the run's private
// temporary directory once it has ended.
func (e *Engine) spec(p *Prepared, how string, req Request) (runner.Spec, func(), error) {
	tmp, env, done, err := e.temps.make(req.Env)
	if err != nil {
		return runner.Spec{}, nil, err
	}
	spec := runner.Spec{Cwd: p.Cwd, Env: env, PTY: req.PTY, BaseEnv: e.baseEnv()}
	conf := e.confinement(p, tmp)
	forRunner, enforce, err := e.confineSpec(conf, how)
	if err != nil {
		done()
		return spec, nil, err
	}
	spec.Confine = forRunner
	if forRunner != nil {
		spec.ConfineRules = e.confineRules()
	}
	switch how {
	case RunsDirect:
		spec.Argv, _ = p.directArgv()
		if runner.FileIDsSupported {
			id, ok := p.files[spec.Argv[0]]
			if !ok {
				done()
				return spec, nil, fmt.Errorf("%w: %s could not be found when it was decided on", runner.ErrStart, spec.Argv[0])
			}
			spec.Executable = &id
		}
	case RunsInterpreted, RunsUnchecked:
		if err := runner.CheckEnv(req.Env); err != nil {
			done()
			return spec, nil, err
		}
		plan := shellrun.Plan{
			Text: p.Analysis.Canonical, Hash: p.Analysis.Hash, Enforce: how == RunsInterpreted,
			Executables: e.planExecutables(p), PATH: e.runPATH(), Home: e.Home,
			Env: req.Env, EnvAllow: p.envAllow, Files: p.files,
			ArgRules: p.argRules, ArgOnly: p.argOnly,
			Contained: p.walls(conf), // prepare.go: the walls hold
		}
		// The request's env travels in the plan: the interpreter process
		// itself runs in the host's environment, with the run's private
		// TMPDIR (the host's, not the command's; the jail's /tmp in a
		// jail).
		spec.Env = map[string]string{"TMPDIR": tmp}
		if enforce {
			// In the standing jail of its confinement when there is one,
			// as a direct start: the interpreter and all it starts hold
			// the jail's layers (jailInterpreter).
			relay, err := e.egressRelay(p)
			if err != nil {
				done()
				return spec, nil, err
			}
			if done, err = e.jailInterpreter(&spec, conf, tmp, relay, done); err != nil {
				done()
				return spec, nil, err
			}
			if spec.Jail != nil && relay != nil {
				// The proxy's lease names this run; the programs the
				// interpreter starts get it from the plan's env.
				if done, err = e.takeEgress(&spec, p, req, done); err != nil {
					done()
					return spec, nil, err
				}
				plan.Env = maps.Clone(plan.Env)
				if plan.Env == nil {
					plan.Env = map[string]string{}
				}
				for _, n := range slices.Concat(egressEnv, []string{"NO_PROXY", "no_proxy"}) {
					plan.Env[n] = spec.Env[n]
					plan.EnvAllow = append(slices.Clip(plan.EnvAllow), n)
				}
			}
			if spec.Jail == nil {
				// No jail (none here, or unsupported: warn): the
				// interpreter confines itself with Landlock from its plan.
				plan.Confine = conf
				done = e.handBase(&spec, &plan, done)
			}
		}
		argv, err := shellrun.Argv(plan)
		if err != nil {
			done()
			return spec, nil, err
		}
		spec.Argv = argv
		if spec.Jail != nil {
			return spec, done, nil
		}
		// A warm interpreter, when one is ready, is handed this Argv, Env
		// and Cwd; it confines itself from the plan as a fresh one does.
		done = e.takeWarm(&spec, req, done)
	default:
		if len(p.argv) > 0 {
			spec.Argv = p.argv
		} else {
			spec.Command = p.Text
		}
	}
	if spec.Confine != nil && how != RunsInterpreted && how != RunsUnchecked {
		// A standing jail for this confinement starts it with a fork and
		// an exec, every layer built already.
		relay, err := e.egressRelay(p)
		if err != nil {
			done()
			return spec, nil, err
		}
		if done, err = e.takeJail(&spec, spec.Confine, tmp, relay, done); err != nil {
			done()
			return spec, nil, err
		}
		if spec.Jail != nil {
			if done, err = e.takeEgress(&spec, p, req, done); err != nil {
				done()
				return spec, nil, err
			}
			return spec, done, nil
		}
	}
	if spec.Confine != nil {
		// A warm process handed the launcher's argv is the launcher,
		// without a start of this binary on the run's path. Where the
		// runner may start the command from a restricted thread of its
		// own, that costs less still, and no warm process is used (the
		// runner asks again without one: either answer confines it).
		if runner.StartOf(spec.Confine) == runner.ConfineLauncher {
			done = e.takeWarm(&spec, req, done)
		}
	}
	return spec, done, nil
}

// takeWarm gives spec a warm process (runner.Spec.Warm) when one is ready,
// and returns done extended to let it go and have the pool start its
// replacement. A PTY run starts afresh: a warm process has no terminal.
func (e *Engine) takeWarm(spec *runner.Spec, req Request, done func()) func() {
	pool := e.warm()
	if pool == nil || req.PTY {
		return done
	}
	w := pool.take()
	if w == nil {
		return done
	}
	spec.Warm = w
	return func() {
		w.Close() // nothing once a run adopted it
		pool.done()
		done()
	}
}

// run runs spec. A warm interpreter that had died before its hand-over
// is replaced by a fresh start, as if none had been ready.
func (e *Engine) run(ctx context.Context, spec runner.Spec) (runner.Result, error) {
	rr, err := runner.Run(ctx, spec)
	if spec.Warm != nil && errors.Is(err, runner.ErrWarmGone) {
		spec.Warm = nil
		return runner.Run(ctx, spec)
	}
	return rr, err
}

// directArgv returns the argv to start directly when starting it is exactly
// what the interpreter would do: one simple command with no assignments,
// redirections or expansions, that the analysis resolved to one ordinary
// program started by the interpreter with no wrapper applied. argv[0] is
// the resolved path, so the process that runs is exactly the file the
// allowlist vouched for.
func (p *Prepared) directArgv() ([]string, bool) {
	a := p.Analysis
	if !a.OK || len(a.Segments) != 1 || len(a.Builtins) > 0 {
		return nil, false
	}
	seg := a.Segments[0]
	if seg.Role != shellcmd.RoleCommand || len(seg.Via) > 0 || seg.ResolvedPath == "" || seg.StartedBy != "" {
		return nil, false
	}
	words := strings.Fields(strings.TrimSuffix(a.Canonical, "\n"))
	if len(words) != len(seg.Argv) || len(words) == 0 {
		return nil, false
	}
	for i, w := range words {
		if w != seg.Argv[i] || strings.ContainsFunc(w, notPlain) {
			return nil, false
		}
	}
	argv := append([]string(nil), seg.Argv...)
	argv[0] = seg.ResolvedPath
	return argv, true
}

// notPlain reports characters that mean something to a shell: a word made
// only of the others is its own value.
func notPlain(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./:@%+,-", r))
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
	host := e.hostPATH()
	if allAbs(host) {
		return host // the common case: nothing to drop, nothing to build
	}
	var dirs []string
	for _, d := range filepath.SplitList(host) {
		if filepath.IsAbs(d) {
			dirs = append(dirs, d)
		}
	}
	return strings.Join(dirs, string(filepath.ListSeparator))
}

// allAbs reports whether every entry of the search path list is absolute
// (so runPATH keeps it as it is).
func allAbs(list string) bool {
	for d := range strings.SplitSeq(list, string(filepath.ListSeparator)) {
		if !filepath.IsAbs(d) {
			return false
		}
	}
	return true
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
