//go:build linux

package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/jail"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/shellcmd"
	"github.com/exechost/exechost/internal/shellrun"
)

// interpJailRows (issue 39, "the same for interpreted runs"): a text that
// needs the guarded interpreter, run as the host runs it under
// security=allowlist — this binary started by descriptor in the standing
// jail of the run's confinement, applying no Landlock of its own (the
// jail's layers are inherited) — beside `/bin/sh -c` of the same text,
// unconfined and in the same jail, through runner.Run, interleaved.
func (b *bench) interpJailRows() {
	sec := "Interpreted text in the standing jail vs sh -c"
	text := "echo a | tr a b && true"
	home, stateDir, cwd, ok := b.landlockRun(sec, "jailed", "interpjail-work")
	if !ok {
		return
	}
	defer os.RemoveAll(stateDir)
	path := "/usr/local/bin:/usr/bin:/bin"
	env := []string{"PATH=" + path, "HOME=" + home}
	a := shellcmd.Analyze(text, shellcmd.Env{Cwd: cwd, PATH: path, Home: home})
	if !a.OK {
		b.add(row{section: sec, what: "jailed", err: fmt.Errorf("analysis: %s", a.Error)})
		return
	}
	plan := shellrun.Plan{Text: a.Canonical, Hash: a.Hash, Enforce: true, Executables: a.Executables(), Files: runner.IDsOf(a.Executables()), PATH: path, Home: home}
	interp, err := shellrun.Argv(plan)
	if err != nil {
		b.add(row{section: sec, what: "jailed", err: err})
		return
	}
	exeID, err := runner.IDOf(interp[0])
	if err != nil {
		b.add(row{section: sec, what: "jailed", err: err})
		return
	}
	// The jail of security=allowlist's built-in confinement (the host
	// leaves the run's own temporary directory out: its TMPDIR is the
	// jail's /tmp); this binary is bound into the view when it lives in
	// the host's /tmp, as the host does for its interpreter.
	c := confine.Confinement{Writable: []string{cwd}, Protected: []string{stateDir}, Network: confine.NetworkNone}
	o := jail.Options{Confine: c, Readable: strings.Split(path, ":")}
	if strings.HasPrefix(interp[0], "/tmp/") {
		o.Readable = append(o.Readable, interp[0])
	}
	pool, err := jail.NewPool()
	if err != nil {
		b.add(row{section: sec, what: "jailed", err: err})
		return
	}
	defer pool.Close()
	j, release, err := pool.Get(o)
	if err != nil {
		b.add(row{section: sec, what: "jailed", err: err})
		return
	}
	defer release()
	jenv := append(env[:len(env):len(env)], "TMPDIR=/tmp")
	held := fmt.Sprint(j.Held())
	run := runSpec
	ops := []op{
		{name: "sh -c (baseline)", how: "runner.Run of `/bin/sh -c '" + text + "'`, unconfined", run: run(runner.Spec{Argv: []string{"/bin/sh", "-c", text}, Cwd: cwd, BaseEnv: env})},
		{name: "sh -c, jailed", baseline: "sh -c (baseline)", how: "the same in the standing jail (layers " + held + "): the floor for a jailed start of the text", run: run(runner.Spec{Argv: []string{"/bin/sh", "-c", text}, Cwd: cwd, BaseEnv: jenv, Jail: j})},
		{name: "interpreted, unconfined", baseline: "sh -c (baseline)", how: "runner.Run of the analysed tree in the interpreter (this binary re-executed), run-time checks on, no confinement", run: run(runner.Spec{Argv: interp, Cwd: cwd, BaseEnv: env})},
		{name: "interpreted, jailed, fresh start", baseline: "sh -c (baseline)", how: "the interpreter started by descriptor (runner.Spec.Executable) by the standing jail's server (fork and exec of this binary), every layer built already, no Landlock of its own: what a run pays when no warm interpreter stands ready", run: run(runner.Spec{Argv: interp, Executable: &exeID, Cwd: cwd, BaseEnv: jenv, Jail: j})},
	}
	warmArgv, err := shellrun.WarmArgv()
	warmed := j.Warmed(warmArgv)
	handed := 0
	warmOp := op{name: "interpreted, jailed", baseline: "sh -c (baseline)", how: "as the host runs it: the same start handed to the jail's warm interpreter (jail.Jail.Warmed: this binary forked by the jail's server from the decided file, every layer inherited, past its initialisation; made ready untimed before each run, as the server starts the next once a run is done and no request waits)", skip: err,
		before: func() error { handed = j.Handed(); return warmed.WaitWarm(30 * time.Second) },
		run: func() error {
			if err := run(runner.Spec{Argv: interp, Executable: &exeID, Cwd: cwd, BaseEnv: jenv, Jail: warmed})(); err != nil {
				return err
			}
			if j.Handed() != handed+1 {
				return fmt.Errorf("the run was not handed to the warm interpreter")
			}
			return nil
		}}
	if err == nil {
		// The server keeps a warm interpreter once a run asked for one:
		// this untimed run is that first ask.
		if err := run(runner.Spec{Argv: interp, Executable: &exeID, Cwd: cwd, BaseEnv: jenv, Jail: warmed})(); err != nil {
			warmOp.skip = err
		}
	}
	ops = append(ops, warmOp)
	index := map[string]int{}
	for i, o := range ops {
		index[o.name] = i
	}
	s, errs := interleave(5, b.iters(200, 40), ops)
	for i, o := range ops {
		r := row{section: sec, what: o.name, s: s[i], note: o.how, err: errs[i]}
		if base, ok := index[o.baseline]; ok && o.baseline != "" {
			r.baseline = &s[base]
		}
		if o.name == "interpreted, jailed" {
			r.target, r.met = "≤ 1.2 × sh -c p50", metRatio(s[i], s[0], 1.2, errs[i])
		}
		b.add(r)
	}
}
