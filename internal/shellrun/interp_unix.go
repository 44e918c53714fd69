//go:build unix

package shellrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/reexec"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/shellcmd"
)

// Supported says the interpreter can run here.
const Supported = true

func init() {
	// Early: the interpreter needs only what this package imports, so a
	// fresh start (and a warm one's footprint) skips the rest of the
	// binary's package initialisation.
	reexec.RegisterEarly(arg, func() {
		plan := reexec.Args(1, 1, "PLAN|"+warmPlan)[0]
		// Started by descriptor (in a jail), this binary holds its own
		// file as runner.ChildFD: no program it starts inherits it.
		unix.CloseOnExec(runner.ChildFD)
		if plan == warmPlan {
			os.Exit(MainWarm())
		}
		os.Exit(Main(plan))
	})
}

// Main runs a JSON plan in this process and returns the exit status. It is
// what the interpreter child process does; tests call it directly.
func Main(planJSON string) int {
	var p Plan
	if err := json.Unmarshal([]byte(planJSON), &p); err != nil {
		fmt.Fprintf(os.Stderr, "exechost: interpreter: bad plan: %v\n", err)
		return DeniedExit
	}
	if err := applyConfinement(p); err != nil {
		fmt.Fprintf(os.Stderr, "exechost: interpreter: %v\n", err)
		return DeniedExit
	}
	watchBounds(p, func(why string) {
		fmt.Fprintf(os.Stderr, "exechost: interpreter: %s; the run was stopped (hint: bound the loop or the output captured in variables)\n", why)
		// The programs it started are killed with it; what they started in
		// turn is in the run's process group, which the runner kills when
		// this process ends.
		killChildren()
		os.Exit(BoundExit)
	})
	code, err := Run(context.Background(), p, os.Stdin, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "exechost: %v\n", err)
	}
	return code
}

// Run interprets plan with the given standard streams, in the current
// process's working directory and environment, and returns the exit
// status. A non-nil error (already reflected in the status) says why the
// run stopped early: a refused command, a plan that does not verify.
func Run(ctx context.Context, p Plan, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if shellcmd.Hash(p.Text) != p.Hash {
		return DeniedExit, fmt.Errorf("%w: the command does not match its approved hash", ErrDenied)
	}
	f, canonical, err := shellcmd.Canonical(p.Text)
	if err != nil || canonical != p.Text {
		return DeniedExit, fmt.Errorf("%w: the command is not in canonical form", ErrDenied)
	}
	dir, err := os.Getwd()
	if err != nil {
		return DeniedExit, fmt.Errorf("interpreter: %w", err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	root := &guard{plan: p, allowed: map[string]bool{}, base: map[string]bool{}, cancel: cancel,
		hostTMPDIR: os.Getenv("TMPDIR"), children: make(chan struct{}, MaxChildren)}
	for _, e := range p.Executables {
		root.allowed[e] = true
	}
	root.rules = policy.CompileArgRules(p.ArgRules, p.Home)
	root.argOnly = map[string]bool{}
	for _, e := range p.ArgOnly {
		root.argOnly[e] = true
	}
	env := os.Environ()
	for _, kv := range env {
		root.base[kv] = true
	}
	for _, name := range slices.Sorted(maps.Keys(p.Env)) {
		env = append(env, name+"="+p.Env[name])
	}
	x := &executor{guard: root}
	r, done, err := x.runner(env, dir, stdin, stdout, stderr)
	if err != nil {
		return DeniedExit, fmt.Errorf("interpreter: %w", err)
	}
	defer done()
	code, err := exitCode(r.Run(ctx, f))
	if denied := root.refused(); denied != nil {
		if errors.Is(denied, ErrBound) {
			return BoundExit, denied
		}
		return DeniedExit, denied
	}
	return code, err
}

// guard is one run's run-time enforcement, shared by the top runner and
// every nested one.
type guard struct {
	plan    Plan
	allowed map[string]bool
	// rules and argOnly hold every start's expanded argv against the
	// allowlist's argument rules (Plan.ArgRules, Plan.ArgOnly).
	rules   *policy.ArgRules
	argOnly map[string]bool
	// base is the host's own environment (name=value): a program may get
	// it unchanged; anything else passes the environment rule.
	base       map[string]bool
	hostTMPDIR string
	cancel     context.CancelCauseFunc
	children   chan struct{} // a slot per running program (MaxChildren)

	mu     sync.Mutex
	denied error
}

// refuse records the first refusal and stops the whole run: a refusal
// inside $(…), a pipeline or a background job ends it as one at the top.
func (g *guard) refuse(err error) error {
	g.mu.Lock()
	if g.denied == nil {
		g.denied = err
	}
	g.mu.Unlock()
	g.cancel(err)
	return err
}

func (g *guard) refused() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.denied
}

// argRefusal returns why a start of path with args (expanded, argv[0]
// left out) is refused by the argument rules, or "".
func (g *guard) argRefusal(path string, args []string) string {
	v := g.rules.Check(path, args, nil)
	switch {
	case v.Denied != "":
		return fmt.Sprintf("its arguments match the deny rule %q", v.Denied)
	case g.argOnly[path] && v.Allowed == "":
		return "its arguments match no argument rule of the allowlist"
	}
	return ""
}

// envRefusal returns why env may not be given to a program, or "".
func (g *guard) envRefusal(env []string) string {
	for _, kv := range env {
		if g.base[kv] {
			continue
		}
		name, _, _ := strings.Cut(kv, "=")
		if policy.RefusedEnv(name) {
			return fmt.Sprintf("env %s can change what a program loads or runs", name)
		}
		if !policy.EnvPermitted(name, g.plan.EnvAllow) {
			return fmt.Sprintf("env %s is not in the environment allowlist", name)
		}
	}
	return ""
}

// exitCode maps what interp.Runner.Run returned to an exit status.
func exitCode(err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	if st, ok := errors.AsType[interp.ExitStatus](err); ok {
		return int(st), nil
	}
	if errors.Is(err, ErrDenied) {
		return DeniedExit, err
	}
	return 2, err
}

// executor is one runner's handlers: the run's guard, the private
// directory for this runner's temporary files, and the wrappers applied
// around a nested shell, which apply to every program it starts.
type executor struct {
	*guard
	tmp   string
	outer []shellcmd.Applied
}

// runner builds an interpreter with this executor's handlers in a private
// temporary directory of its own; done removes it.
func (x *executor) runner(env []string, dir string, stdin io.Reader, stdout, stderr io.Writer, opts ...interp.RunnerOption) (*interp.Runner, func(), error) {
	tmp, err := os.MkdirTemp(x.privateRoot(), "exechost-interp-")
	if err != nil {
		return nil, nil, fmt.Errorf("private temporary directory: %w", err)
	}
	done := func() { _ = os.RemoveAll(tmp) }
	x.tmp = tmp
	// The interpreter takes its temporary directory from TMPDIR in the
	// environment it starts with: this one, never the command's.
	env = append(slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "TMPDIR=") }), "TMPDIR="+tmp)
	all := []interp.RunnerOption{
		interp.Env(expand.ListEnviron(env...)),
		interp.Dir(dir),
		interp.StdIO(stdin, stdout, stderr),
		interp.ExecHandlers(func(interp.ExecHandlerFunc) interp.ExecHandlerFunc { return x.exec }),
	}
	if x.plan.Enforce {
		all = append(all, interp.CallHandler(x.call), interp.OpenHandler(x.open))
	}
	r, err := interp.New(append(all, opts...)...)
	if err != nil {
		done()
		return nil, nil, err
	}
	return r, done, nil
}

// privateRoot is where private directories are made: the host's TMPDIR
// (the runner gives the interpreter the host's environment, never the
// request's), else the system default.
func (x *executor) privateRoot() string {
	if filepath.IsAbs(x.hostTMPDIR) {
		return x.hostTMPDIR
	}
	return os.TempDir()
}

// call refuses builtins the analysis does not vouch for, looking through
// `command`, which runs a builtin without the call handler seeing it.
func (x *executor) call(ctx context.Context, args []string) ([]string, error) {
	if why := builtinRefusal(args); why != "" {
		return nil, x.refuse(fmt.Errorf("%w: %s (refused at run time)", ErrDenied, why))
	}
	if n := runtime.NumGoroutine(); n > x.goroutineBound() {
		return nil, x.refuse(fmt.Errorf("%w: %d goroutines alive (bound %d): too many background jobs or subshells", ErrBound, n, x.goroutineBound()))
	}
	return args, nil
}

// builtinRefusal checks a call of a builtin and, through `command`, every
// builtin that call would run, as the interpreter's command builtin does.
func builtinRefusal(args []string) string {
	for len(args) > 0 && shellcmd.IsBuiltin(args[0]) {
		if why := shellcmd.BuiltinRefusal(args); why != "" {
			return why
		}
		if args[0] != "command" {
			return ""
		}
		args = args[1:]
		if len(args) > 0 && args[0] == "-v" {
			return "" // prints where names are; runs nothing
		}
		if len(args) > 0 && args[0] == "--" {
			args = args[1:]
		}
	}
	return ""
}

func (x *executor) goroutineBound() int {
	if x.plan.GoroutineBound > 0 {
		return x.plan.GoroutineBound
	}
	return DefaultGoroutineBound
}

// open allows /dev/null; under the contained rules (Plan.Contained) it
// also reads any file the confinement lets the run read, and writes a file
// whose real path lies beneath the writable roots and outside the
// read-only paths (openContained).
func (x *executor) open(ctx context.Context, path string, flag int, perm os.FileMode) (io.ReadWriteCloser, error) {
	if path == "/dev/null" {
		return os.OpenFile(path, flag, perm)
	}
	if x.plan.Contained == nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: only /dev/null may be opened", ErrDenied)}
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(interp.HandlerCtx(ctx).Dir, path)
	}
	f, err := openContained(x.plan.Contained, path, flag, perm)
	if errors.Is(err, ErrDenied) {
		// A refused write ends the run, as a refused start does.
		return nil, x.refuse(err)
	}
	return f, err
}

// exec runs one external command: an applied wrapper, an interpreted shell,
// or a program the analysis allowed.
func (x *executor) exec(ctx context.Context, args []string) error {
	hc := interp.HandlerCtx(ctx)
	return x.dispatch(ctx, hc, args, x.childEnv(hc.Env), x.outer)
}

// childEnv returns the exported variables, as a child process sees them:
// this runner's private TMPDIR is the interpreter's own and goes back to
// the host's value.
func (x *executor) childEnv(env expand.Environ) []string {
	out := exportedEnv(env)
	for i, kv := range out {
		if kv == "TMPDIR="+x.tmp {
			if x.hostTMPDIR != "" {
				out[i] = "TMPDIR=" + x.hostTMPDIR
			} else {
				out = slices.Delete(out, i, i+1)
			}
			break
		}
	}
	return out
}

func always(int) bool { return true }

// dispatch decides how args run, exactly as shellcmd's analysis of a
// command the interpreter starts: applied wrapper, interpreted shell, or
// program. env is the environment the command gets; applied lists the
// wrappers being applied around it (outermost first).
func (x *executor) dispatch(ctx context.Context, hc interp.HandlerContext, args []string, env []string, applied []shellcmd.Applied) error {
	name := args[0]
	if !strings.Contains(name, "/") && shellcmd.IsApplied(name) {
		// As in the analysis: applied when the runner can apply it, else
		// the wrapper's own program runs and must be allowed below.
		if ap, err := shellcmd.ParseApplied(args, always); err == nil {
			return x.dispatch(ctx, hc, args[ap.Inner:], applyEnv(ap, env), append(applied, ap))
		}
	}
	if sc, ok := shellcmd.ParseShellCall(args, always); ok {
		return x.shell(ctx, hc, sc, env, applied)
	}
	path, err := shellcmd.Resolve(name, shellcmd.Env{Cwd: hc.Dir, PATH: x.plan.PATH, Home: x.plan.Home})
	if err != nil && x.plan.Enforce {
		return x.refuse(fmt.Errorf("%w: %s: %v (refused at run time)", ErrDenied, name, err))
	}
	if path == "" {
		fmt.Fprintf(hc.Stderr, "%s: not found\n", name)
		return interp.ExitStatus(127)
	}
	if x.plan.Enforce && !x.allowed[path] {
		return x.refuse(fmt.Errorf("%w: %s is not an executable the analysis allowed (refused at run time)", ErrDenied, path))
	}
	if x.plan.Enforce {
		if why := x.argRefusal(path, args[1:]); why != "" {
			return x.refuse(fmt.Errorf("%w: %s: %s (refused at run time)", ErrDenied, path, why))
		}
		if why := x.envRefusal(env); why != "" {
			return x.refuse(fmt.Errorf("%w: %s: %s (refused at run time)", ErrDenied, path, why))
		}
	}
	var pin *os.File
	execPath := path
	if id, ok := x.plan.Files[path]; ok {
		f, p, err := runner.Pin(path, id)
		if err != nil {
			return x.refuse(fmt.Errorf("%w: %v (refused at run time)", ErrDenied, err))
		}
		defer f.Close()
		pin = f
		if p != "" {
			execPath = p
		}
	} else if x.plan.Enforce && runner.FileIDsSupported {
		return x.refuse(fmt.Errorf("%w: %s has no file id from the decision (refused at run time)", ErrDenied, path))
	}
	return x.spawn(ctx, hc, execPath, pin, args, env, applied)
}

// shell runs a `sh -c` payload in a nested interpreter with the same
// guard: the payload is parsed by shellcmd.Parse, as the analysis parsed
// it. Wrappers applied around the shell apply to the whole payload: a
// timeout ends it (every program it started is killed) with timeout's
// status, time reports it, and nice and nohup apply to every program it
// starts.
func (x *executor) shell(ctx context.Context, hc interp.HandlerContext, sc shellcmd.ShellCall, env []string, applied []shellcmd.Applied) error {
	f, err := shellcmd.Parse(sc.Payload)
	if err != nil {
		fmt.Fprintf(hc.Stderr, "%s: %v\n", sc.Name, err)
		return interp.ExitStatus(2)
	}
	params := append(append([]string(nil), sc.Options...), "--")
	params = append(params, sc.Params...)
	nested := &executor{guard: x.guard, outer: applied}
	r, done, err := nested.runner(env, hc.Dir, hc.Stdin, hc.Stdout, hc.Stderr, interp.Params(params...))
	if err != nil {
		fmt.Fprintf(hc.Stderr, "%s: %v\n", sc.Name, err)
		return interp.ExitStatus(2)
	}
	defer done()
	var timeout *shellcmd.Applied
	report := false
	for i, ap := range applied {
		report = report || ap.Time
		if ap.Timeout > 0 && (timeout == nil || ap.Timeout < timeout.Timeout) {
			timeout = &applied[i]
		}
	}
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if timeout != nil {
		runCtx, cancel = context.WithTimeout(ctx, timeout.Timeout)
	}
	defer cancel()
	start := time.Now()
	err = r.Run(runCtx, f)
	if report {
		fmt.Fprintf(hc.Stderr, "real %.2f\n", time.Since(start).Seconds())
	}
	if timeout != nil && runCtx.Err() != nil && ctx.Err() == nil && !timeout.PreserveStatus {
		return interp.ExitStatus(124)
	}
	if err == nil {
		return nil
	}
	if st, ok := errors.AsType[interp.ExitStatus](err); ok {
		return st
	}
	return err
}

// exportedEnv returns the exported variables, as a child process sees them.
func exportedEnv(env expand.Environ) []string {
	var out []string
	env.Each(func(name string, vr expand.Variable) bool {
		if vr.Exported && vr.IsSet() {
			out = append(out, name+"="+vr.String())
		}
		return true
	})
	return out
}

// applyEnv applies env's -i, -u and NAME=VALUE to an environment.
func applyEnv(ap shellcmd.Applied, env []string) []string {
	if ap.Tool != "env" {
		return env
	}
	out := []string{} // never nil: a nil Env would inherit this process's
	if !ap.ClearEnv {
		for _, kv := range env {
			n, _, _ := strings.Cut(kv, "=")
			drop := false
			for _, u := range ap.Unset {
				drop = drop || n == u
			}
			for _, s := range ap.Set {
				sn, _, _ := strings.Cut(s, "=")
				drop = drop || n == sn
			}
			if !drop {
				out = append(out, kv)
			}
		}
	}
	return append(out, ap.Set...)
}

// startMu keeps every other start out while SIGHUP is ignored for nohup:
// a child inherits an ignored signal, and the setting is process-wide.
var startMu sync.RWMutex

// spawn starts one allowed program in the run's process group, applies
// the wrappers around it and waits for it.
func (x *executor) spawn(ctx context.Context, hc interp.HandlerContext, path string, pin *os.File, args, env []string, applied []shellcmd.Applied) error {
	var ignoreHUP, report bool
	var nice int
	var timeouts []shellcmd.Applied
	for _, ap := range applied {
		ignoreHUP = ignoreHUP || ap.IgnoreHUP
		report = report || ap.Time
		nice += ap.Nice
		if ap.Timeout > 0 || ap.Tool == "timeout" {
			timeouts = append(timeouts, ap)
		}
	}
	newCmd := func() *exec.Cmd {
		cmd := &exec.Cmd{Path: path, Args: args, Env: env, Dir: hc.Dir, Stdin: hc.Stdin, Stdout: hc.Stdout, Stderr: hc.Stderr}
		if pin != nil {
			cmd.ExtraFiles = []*os.File{pin} // runner.ChildFD: what path names
		}
		cmd.SysProcAttr = runner.ChildAttr()
		// Output that is not a file is copied by goroutines; a background
		// grandchild holding it open must not hang the run.
		cmd.WaitDelay = runner.OutputGrace
		return cmd
	}
	select {
	case x.children <- struct{}{}:
		defer func() { <-x.children }()
	default:
		return x.refuse(fmt.Errorf("%w: %d programs running at once (bound %d)", ErrBound, MaxChildren, MaxChildren))
	}
	unpin := runner.PinThread()
	defer unpin()
	start := time.Now()
	cmd := newCmd()
	err := startCmd(cmd, ignoreHUP)
	if err == nil {
		trackChild(cmd.Process)
		defer untrackChild(cmd.Process)
	}
	// A concurrently forked sibling can briefly hold the file open for
	// writing (golang/go#22315); retry a few times.
	for delay := time.Millisecond; errors.Is(err, syscall.ETXTBSY) && delay < 300*time.Millisecond; delay *= 2 {
		time.Sleep(delay)
		cmd = newCmd()
		if err = startCmd(cmd, ignoreHUP); err == nil {
			trackChild(cmd.Process)
			defer untrackChild(cmd.Process)
		}
	}
	if err != nil {
		fmt.Fprintf(hc.Stderr, "%s: %v\n", args[0], err)
		if errors.Is(err, os.ErrNotExist) {
			return interp.ExitStatus(127)
		}
		return interp.ExitStatus(126)
	}
	if nice != 0 {
		cur, _ := unix.Getpriority(unix.PRIO_PROCESS, 0)
		_ = unix.Setpriority(unix.PRIO_PROCESS, cmd.Process.Pid, min(max(20-cur+nice, -20), 19))
	}
	var timedOut, killed bool
	var mu sync.Mutex
	for _, t := range timeouts {
		t := t
		timer := time.AfterFunc(t.Timeout, func() {
			mu.Lock()
			timedOut = true
			mu.Unlock()
			_ = cmd.Process.Signal(signalNamed(t.Signal))
			if t.KillAfter > 0 {
				time.AfterFunc(t.KillAfter, func() {
					mu.Lock()
					killed = true
					mu.Unlock()
					_ = cmd.Process.Kill()
				})
			}
		})
		defer timer.Stop()
	}
	stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() })
	defer stop()
	err = cmd.Wait()
	if report && cmd.ProcessState != nil {
		fmt.Fprintf(hc.Stderr, "real %.2f\nuser %.2f\nsys %.2f\n", time.Since(start).Seconds(),
			cmd.ProcessState.UserTime().Seconds(), cmd.ProcessState.SystemTime().Seconds())
	}
	code := 0
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	} else if err != nil && !errors.Is(err, exec.ErrWaitDelay) {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	if timedOut {
		preserve := false
		for _, t := range timeouts {
			preserve = preserve || t.PreserveStatus
		}
		switch {
		case killed:
			code = 128 + int(syscall.SIGKILL)
		case !preserve:
			code = 124
		}
	}
	if code == 0 {
		return nil
	}
	return interp.ExitStatus(uint8(code))
}

// startCmd starts cmd, with SIGHUP ignored in it when asked (nohup).
func startCmd(cmd *exec.Cmd, ignoreHUP bool) error {
	if !ignoreHUP {
		startMu.RLock()
		defer startMu.RUnlock()
		return cmd.Start()
	}
	startMu.Lock()
	defer startMu.Unlock()
	signal.Ignore(syscall.SIGHUP)
	defer signal.Reset(syscall.SIGHUP)
	return cmd.Start()
}

func signalNamed(name string) os.Signal {
	switch name {
	case "INT":
		return syscall.SIGINT
	case "HUP":
		return syscall.SIGHUP
	case "KILL":
		return syscall.SIGKILL
	case "QUIT":
		return syscall.SIGQUIT
	case "USR1":
		return syscall.SIGUSR1
	case "USR2":
		return syscall.SIGUSR2
	}
	return syscall.SIGTERM
}

// live holds the programs this interpreter process runs, for a bound that
// ends the process (killChildren). It is process-wide because the bound is.
var live = struct {
	sync.Mutex
	procs map[*os.Process]bool
}{procs: map[*os.Process]bool{}}

func trackChild(p *os.Process) {
	live.Lock()
	live.procs[p] = true
	live.Unlock()
}

func untrackChild(p *os.Process) {
	live.Lock()
	delete(live.procs, p)
	live.Unlock()
}

func killChildren() {
	live.Lock()
	defer live.Unlock()
	for p := range live.procs {
		_ = p.Kill()
	}
}
