//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/jail"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/shellcmd"
	"github.com/exechost/exechost/internal/shellrun"
)

// confineRows: what kernel confinement costs per run, for a command that
// starts directly (through the re-exec launcher) and for an interpreted one
// (the interpreter restricts its own process), each beside the same run
// unconfined, through runner.Run, interleaved. The confinement is the
// built-in one of security=allowlist with the state directory where it
// normally is, in the home directory: the rules are built around it.
func (b *bench) confineRows() {
	sec := "Kernel confinement per run (Landlock)"
	home, stateDir, cwd, ok := b.landlockRun(sec, "confined", "confine-work")
	if !ok {
		return
	}
	defer os.RemoveAll(stateDir)
	// The run's own temporary directory, writable as a host run's is (the
	// interpreter makes its private one beneath TMPDIR).
	tmp := filepath.Join(b.tmp, "confine-tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		b.add(row{section: sec, what: "confined", err: err})
		return
	}
	c := &confine.Confinement{Writable: []string{cwd, tmp}, Protected: []string{stateDir}, Network: confine.NetworkNone}
	path := "/usr/local/bin:/usr/bin:/bin"
	env := []string{"PATH=" + path, "HOME=" + home, "TMPDIR=" + tmp}
	text := "true && true"
	a := shellcmd.Analyze(text, shellcmd.Env{Cwd: cwd, PATH: path, Home: home})
	plan := shellrun.Plan{Text: a.Canonical, Hash: a.Hash, Enforce: true, Executables: a.Executables(), PATH: path, Home: home}
	interp, err := shellrun.Argv(plan)
	if err != nil || !a.OK {
		b.add(row{section: sec, what: "confined", err: fmt.Errorf("interpreter: %v %s", err, a.Error)})
		return
	}
	plan.Confine = c
	interpConfined, err := shellrun.Argv(plan)
	if err != nil {
		b.add(row{section: sec, what: "confined", err: err})
		return
	}
	run := runSpec
	// The engine keeps the rules around the protected set (a Builder) and
	// hands a launcher, fresh or warm, that base layer: it builds only the
	// run's own. The rows without it build both, as with
	// Engine.ConfineRulesAfresh.
	rules := &confine.Builder{}
	defer rules.Close()
	kept := runner.Spec{Argv: []string{"/bin/true"}, Cwd: cwd, BaseEnv: env, Confine: c, ConfineRules: rules}
	ops := []op{
		{name: "direct /bin/true (baseline)", how: "runner.Run of /bin/true", run: run(runner.Spec{Argv: []string{"/bin/true"}, Cwd: cwd, BaseEnv: env})},
		{name: "direct /bin/true, confined", baseline: "direct /bin/true (baseline)", how: "runner.Spec.Confine; network none starts through the launcher (confine.Confinement.InThread: this binary re-executed, both Landlock layers built (the rules around the state directory and the run's own), execve)", run: run(runner.Spec{Argv: []string{"/bin/true"}, Cwd: cwd, BaseEnv: env, Confine: c})},
		{name: "interpreted `" + text + "` (baseline)", how: "runner.Run of the interpreter", run: run(runner.Spec{Argv: interp, Cwd: cwd, BaseEnv: env})},
		{name: "interpreted `" + text + "`, confined", baseline: "interpreted `" + text + "` (baseline)", how: "the interpreter restricts every thread of its process before it runs anything", run: run(runner.Spec{Argv: interpConfined, Cwd: cwd, BaseEnv: env})},
		{name: "direct /bin/true, confined, base layer kept", baseline: "direct /bin/true (baseline)", how: "as the confined row, with runner.Spec.ConfineRules: the launcher is handed the kept base layer (descriptor 4) and builds only the run's own", run: run(kept)},
	}
	// The launcher in a warm process, as a daemon's pool hands it one.
	warm := b.warmOp(runner.Spec{Argv: []string{"/bin/true"}, Cwd: cwd, BaseEnv: env, Confine: c}, env)
	defer warm.close()
	warm.op.name = "direct /bin/true, confined, warm launcher"
	warm.op.baseline = "direct /bin/true (baseline)"
	warm.op.how = "as the confined row, the launcher's argv handed to a warm process (started and ready before the timed run, as a daemon's pool keeps one), which builds both layers, restricts its thread and execs /bin/true in place"
	warmKept := b.warmOp(kept, env)
	defer warmKept.close()
	warmKept.op.name = "direct /bin/true, confined, warm launcher, base layer kept"
	warmKept.op.baseline = "direct /bin/true (baseline)"
	warmKept.op.how = "as the warm launcher row, handed the kept base layer with its hand-over: what a daemon's run costs (host.Engine keeps a Builder)"
	ops = append(ops, warm.op, warmKept.op)
	// The standing jail (internal/jail): built once for the confinement,
	// each run one fork and one exec by its server.
	if pool, err := jail.NewPool(); err == nil {
		defer pool.Close()
		if j, release, err := pool.Get(jail.Options{Confine: *c}); err == nil {
			defer release()
			held := fmt.Sprint(j.Held())
			pipeline := "head -c 102400 /dev/zero | tr '\\0' a"
			ops = append(ops,
				op{name: "direct /bin/true, jailed", baseline: "direct /bin/true (baseline)", how: "runner.Spec.Jail: the standing jail's server (layers " + held + ") forks and execs /bin/true in a pid namespace of its own; the runner supervises it", run: run(runner.Spec{Argv: []string{"/bin/true"}, Cwd: cwd, BaseEnv: env, Jail: j})},
				op{name: "sh -c 100 KB pipeline (baseline)", how: "runner.Run of /bin/sh -c `" + pipeline + "`", run: run(runner.Spec{Argv: []string{"/bin/sh", "-c", pipeline}, Cwd: cwd, BaseEnv: env})},
				op{name: "sh -c 100 KB pipeline, jailed", baseline: "sh -c 100 KB pipeline (baseline)", how: "the same in the standing jail", run: run(runner.Spec{Argv: []string{"/bin/sh", "-c", pipeline}, Cwd: cwd, BaseEnv: env, Jail: j})},
			)
			// Its idle PSS once it has served (after the rows below).
			defer func() { b.jailPSSRows(sec, j.Pid()) }()
		} else {
			b.add(row{section: sec, what: "direct /bin/true, jailed", err: err})
		}
	}
	// Each confined row's baseline: the unconfined start of the same thing.
	index := map[string]int{}
	for i, o := range ops {
		index[o.name] = i
	}
	s, errs := interleave(5, b.iters(200, 40), ops)
	for i, o := range ops {
		r := row{section: sec, what: o.name, s: s[i], note: o.how, err: errs[i]}
		if base, ok := index[o.baseline]; ok && o.baseline != "" {
			r.baseline, r.target = &s[base], "≤ +0.3 ms p50"
			r.met = metDur(s[i].pct(0.5)-s[base].pct(0.5), 300*time.Microsecond, errs[i])
			if strings.HasSuffix(o.name, ", jailed") {
				// Issue 39's target for a jailed start: beside a spawn.
				r.target, r.met = "≤ 3× baseline p50", metRatio(s[i], s[base], 3, errs[i])
			}
		}
		b.add(r)
	}
}

// jailPSSRows reports the idle PSS of a jail's server beside the floor: a
// minimal static Go program (fmt.Println, then blocked on its stdin)
// measured the same way in the same run.
func (b *bench) jailPSSRows(sec string, pid int) {
	var floor sample
	floorErr := func() error {
		dir := filepath.Join(b.tmp, "sleeper")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		src := "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc main() { fmt.Println(\"ready\"); os.Stdin.Read(make([]byte, 1)) }\n"
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module sleeper\n\ngo 1.22\n"), 0o600); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o600); err != nil {
			return err
		}
		build := exec.Command("go", "build", "-trimpath", "-o", "sleeper", ".")
		build.Dir = dir
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOWORK=off")
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("build the floor program: %w: %s", err, out)
		}
		cmd := exec.Command(filepath.Join(dir, "sleeper"))
		in, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		defer func() { in.Close(); cmd.Wait() }()
		time.Sleep(time.Second)
		kb, err := pssKB(cmd.Process.Pid)
		floor = sample{value: float64(kb) / 1024, unit: "MB"}
		return err
	}()
	b.add(row{section: sec, what: "minimal Go program, idle PSS (floor)", s: floor, err: floorErr,
		note: "a static fmt.Println program blocked on its stdin, 1 s after start, /proc/PID/smaps_rollup"})
	kb, err := pssKB(pid)
	mb := float64(kb) / 1024
	b.add(row{section: sec, what: "jail server, idle PSS", s: sample{value: mb, unit: "MB"}, baseline: &floor, err: err, target: "≤ 10 MB", met: metMax(mb, 10),
		note: "/proc/PID/smaps_rollup of one standing jail's server (this binary re-executed, an early entry point), idle after serving the rows above; its runs are not counted"})
}

// pssKB is the proportional set size of process pid, in kB.
func pssKB(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Pss:"); ok {
			return strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
		}
	}
	return 0, fmt.Errorf("no Pss in smaps_rollup of %d", pid)
}

// landlockRun prepares a confined run's surroundings for section sec: the
// home directory, a state directory in it (where it normally is: the
// rules are built around it; the caller removes it) and a work directory
// named work. Where the kernel or the machine lacks one, it adds the row
// what with the reason and reports false.
func (b *bench) landlockRun(sec, what, work string) (home, stateDir, cwd string, ok bool) {
	fail := func(err error) (string, string, string, bool) {
		b.add(row{section: sec, what: what, err: err})
		return "", "", "", false
	}
	if abi := confine.KernelABI(); abi < 4 {
		return fail(fmt.Errorf("not available: this kernel offers Landlock ABI %d, %s runs need 4", abi, what))
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return fail(err)
	}
	stateDir, err = os.MkdirTemp(home, ".exechost-bench-state-")
	if err != nil {
		return fail(err)
	}
	cwd = filepath.Join(b.tmp, work)
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		os.RemoveAll(stateDir)
		return fail(err)
	}
	return home, stateDir, cwd, true
}
