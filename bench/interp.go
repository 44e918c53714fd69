//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/shellcmd"
	"github.com/exechost/exechost/internal/shellrun"
)

// interpRows: an allowlisted pipeline run the way the execution host runs
// it — the analysed tree in the interpreter (this binary re-executed, as
// exechost re-executes itself) — next to the same text through /bin/sh -c,
// both through runner.Run, interleaved.
func (b *bench) interpRows() {
	sec := "Interpreter vs /bin/sh for an allowlisted pipeline"
	text := "git status --short | head -n 5"
	cwd, err := os.Getwd()
	if err != nil {
		b.add(row{section: sec, what: "interpreter", err: err})
		return
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	a := shellcmd.Analyze(text, shellcmd.Env{Cwd: cwd, PATH: path, Home: os.Getenv("HOME")})
	if !a.OK {
		b.add(row{section: sec, what: "interpreter", err: fmt.Errorf("analysis: %s", a.Error)})
		return
	}
	argv, err := shellrun.Argv(shellrun.Plan{Text: a.Canonical, Hash: a.Hash, Enforce: true, Executables: a.Executables(), Files: runner.IDsOf(a.Executables()), PATH: path, Home: os.Getenv("HOME")})
	if err != nil {
		b.add(row{section: sec, what: "interpreter", err: err})
		return
	}
	env := []string{"PATH=" + path, "HOME=" + os.Getenv("HOME")}
	run := runSpec
	warm := b.warmOp(runner.Spec{Argv: argv, Cwd: cwd, BaseEnv: env}, env)
	defer warm.close()
	ops := []op{
		{name: "/bin/sh -c (baseline)", how: "runner.Run of `/bin/sh -c '" + text + "'`", run: run(runner.Spec{Command: text, Cwd: cwd, BaseEnv: env})},
		{name: "interpreter", how: "runner.Run of the analysed tree in the interpreter (exechost re-executed), run-time checks on", run: run(runner.Spec{Argv: argv, Cwd: cwd, BaseEnv: env})},
		warm.op,
	}
	s, errs := interleave(5, b.iters(200, 40), ops)
	b.add(row{section: sec, what: ops[0].name, s: s[0], note: ops[0].how, err: errs[0]})
	b.add(row{section: sec, what: ops[1].name, s: s[1], baseline: &s[0], note: ops[1].how, err: errs[1]})
	b.add(row{section: sec, what: ops[2].name, s: s[2], baseline: &s[0], note: ops[2].how, err: errs[2],
		target: "≤ 1.2 × /bin/sh p50", met: metRatio(s[2], s[0], 1.2, errs[2])})
}

// warmRun is the warm-interpreter op of interpRows: before each run a
// warm interpreter is started and made ready (untimed, as the host's pool
// starts its replacement off the run's path); the run is its hand-over
// and everything after, through runner.Run as the host engine runs it.
type warmRun struct {
	op      op
	starter *runner.WarmStarter
	w       *runner.Warm
}

func (b *bench) warmOp(spec runner.Spec, env []string) *warmRun {
	r := &warmRun{op: op{name: "warm interpreter", how: "runner.Run of the same plan handed to a warm interpreter (runner.Spec.Warm; started and ready before the timed run, as the host's pool keeps one)"}}
	warmArgv, err := shellrun.WarmArgv()
	if err != nil {
		r.op.skip = err
		return r
	}
	r.starter = runner.NewWarmStarter()
	r.op.before = func() error {
		w, err := r.starter.Start(warmArgv, env, 30*time.Second)
		r.w = w
		return err
	}
	r.op.run = func() error {
		s := spec
		s.Warm, r.w = r.w, nil
		return runSpec(s)()
	}
	return r
}

func (r *warmRun) close() {
	if r.w != nil {
		r.w.Close()
	}
	if r.starter != nil {
		r.starter.Close()
	}
}

// runSpec is an op that runs spec through runner.Run; a non-zero exit is
// an error.
func runSpec(spec runner.Spec) func() error {
	return func() error {
		res, err := runner.Run(context.Background(), spec)
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
		}
		return err
	}
}
