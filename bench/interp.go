//go:build linux

package main

import (
	"context"
	"fmt"
	"os"

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
	argv, err := shellrun.Argv(shellrun.Plan{Text: a.Canonical, Hash: a.Hash, Enforce: true, Executables: a.Executables(), PATH: path, Home: os.Getenv("HOME")})
	if err != nil {
		b.add(row{section: sec, what: "interpreter", err: err})
		return
	}
	env := []string{"PATH=" + path, "HOME=" + os.Getenv("HOME")}
	run := runSpec
	ops := []op{
		{name: "/bin/sh -c (baseline)", how: "runner.Run of `/bin/sh -c '" + text + "'`", run: run(runner.Spec{Command: text, Cwd: cwd, BaseEnv: env})},
		{name: "interpreter", how: "runner.Run of the analysed tree in the interpreter (exechost re-executed), run-time checks on", run: run(runner.Spec{Argv: argv, Cwd: cwd, BaseEnv: env})},
	}
	s, errs := interleave(5, b.iters(200, 40), ops)
	b.add(row{section: sec, what: ops[0].name, s: s[0], note: ops[0].how, err: errs[0]})
	b.add(row{section: sec, what: ops[1].name, s: s[1], baseline: &s[0], note: ops[1].how, err: errs[1]})
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
