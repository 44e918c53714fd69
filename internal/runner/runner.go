// Package runner spawns one command on the local machine: argv or shell
// text, a working directory, an environment overlay, a timeout that kills the
// whole process tree, and output capped by Capture. It makes no policy
// decisions; callers (the host engine) decide first and then call Run.
//
// Outcomes are reported consistently:
//
//   - The process ran and exited: Run returns a nil error and Result.ExitCode
//     is its exit status (or 128+N when signal N killed it, as shells report
//     it, with Result.Error naming the signal).
//   - The timeout or the context ended it: a nil error, ExitCode -1, Error
//     saying why, and TimedOut true for a deadline (false for a
//     cancellation). The whole process group was killed.
//   - Nothing was spawned (invalid Spec, refused environment, missing
//     working directory, missing or non-executable program, context already
//     done): a non-nil error, wrapping ErrStart when the operating system
//     refused the start, and a Result with Error set and ExitCode 127
//     (program not found), 126 (not executable) or -1 (anything else), as a
//     shell would report the first two.
//
// Success is true only for exit status 0 without a timeout.
//
// Process lifetime: the command runs in a process group of its own (a
// session, with PTY), and a timeout or cancellation SIGKILLs the whole
// group. When the command exits by itself, background processes it left
// that still hold its output open get OutputGrace to finish, then are
// killed too (Result.Stragglers); ones that detached their output, or left
// the group (setsid, daemons), are left running, as a shell would leave
// them. On Linux the parent-death signal also kills the command if the
// runner itself dies. On Windows a job object stands in for the process
// group (processes the command starts before it joins the job escape it).
// The group's leader is reaped only after the last signal to its group and
// after the reaper stops listing it (on Linux; AwaitExit): while it is a
// zombie its pid, the group's id, cannot be reused, so no kill reaches a
// group that took the id after it (another run, a warm process, a user's
// shell job).
//
// How a run is watched: on Linux with pidfds (launch_linux.go) the calling
// goroutine, pinned to its thread, waits in poll(2) on the output pipes
// and the process's pidfd and reads output as it comes, so nothing passes
// between goroutines from the process's exit to the result (each such
// hand-off wakes an idle thread, tens of microseconds on a virtual
// machine). Elsewhere os/exec runs it, with a goroutine per output stream
// and one waiting for the exit. Both behave the same (TestPortableLauncher
// runs the package's tests through the portable one on Linux too).
package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"time"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/hint"
)

// Spec describes one process to run.
type Spec struct {
	// Argv runs a program directly when set (Argv[0] is resolved via the
	// host PATH unless it contains a slash).
	Argv []string
	// Command is shell text run as /bin/sh -c Command when Argv is empty
	// (cmd.exe /d /s /c on Windows).
	Command string
	// Cwd is the working directory; empty means the current one.
	Cwd string
	// Env is an overlay on BaseEnv. Names for which policy.DangerousEnv is
	// true, and names that make a shell read or run code at start-up, are
	// refused with ErrDangerousEnv.
	Env map[string]string
	// BaseEnv is the environment the overlay applies to; nil means the
	// runner's own environment. Variables that make a shell read files at
	// start-up (BASH_ENV, ENV, …) are removed from it either way.
	BaseEnv []string
	// Timeout kills the process group when exceeded; zero or negative
	// means no timeout (the context still applies).
	Timeout time.Duration
	// PTY attaches the process to a pseudo-terminal (local runs only; the
	// spec allows no PTY in the sandbox or for node exec). Output is then
	// one combined stream, reported as stdout.
	PTY bool
	// MaxOutput and TailSize override the spec's caps when positive.
	MaxOutput int
	TailSize  int
	// OnStart, when set, is called once the process has started (and the
	// reaper knows its group), before Run waits for it: the moment to say
	// that it started, while it runs rather than before. It must not
	// block for long. It is not called when nothing started.
	OnStart func()
	// StartNotice, when positive, is how long OnStart may wait: it is
	// called once the process has run that long, or as soon as its exit
	// is seen if that comes first (still before Run returns). A run
	// shorter than it reports its start together with its end, so a
	// notice that crosses a wire (a node's exec.started) costs a short
	// run nothing while it runs. Zero calls OnStart at once. Where runs
	// are not supervised by one poll loop, OnStart is called at once.
	StartNotice time.Duration
	// Executable, when set, is the file argv[0] was decided on: the
	// runner opens argv[0], refuses the start (ErrExecutableChanged) if it
	// is another file, and starts the open file by its descriptor (Pin),
	// so a file swapped in at the path after the decision never runs.
	Executable *FileID
	// Confine, when set and active, confines the command (Argv, or the
	// shell running Command) before its first exec, started as
	// confine.Confinement.InThread says: in-thread the runner restricts a fresh thread of
	// its own and forks the command from it (startConfined); otherwise
	// the command starts through the launcher (confine.Wrap), which execs
	// the pinned Executable's descriptor it inherits. An error applying
	// it starts nothing.
	Confine *confine.Confinement
	// ConfineRules, when set, builds the rules of an in-thread start
	// (a Builder its owner keeps, which reuses the rules around the
	// protected set while they are exact); nil builds them afresh. A
	// start through the launcher (fresh or warm) is handed its base
	// layer (Builder.Base) as descriptor BaseFD and builds only its own.
	ConfineRules *confine.Builder
	// ConfineBase, when set, is the base layer (confine.Builder.Base)
	// of the confinement the command's first process applies to itself,
	// handed to that process as descriptor BaseFD, at its start or with a
	// warm process's hand-over (never to a command started in-thread):
	// with Confine started through the launcher, Confine's, instead of
	// ConfineRules' (one built for another protected set is refused:
	// confine.ErrBaseMismatch, nothing starts); without Confine, the
	// interpreter's plan's, whose confinement the caller named it in
	// with confine.BaseLayer.Hand(c, BaseFD). The caller closes it after
	// Run.
	ConfineBase *confine.BaseLayer
	// Warm, when set, is a process started ahead of this run
	// (WarmStarter) that runs it instead of a fresh start: it is handed
	// Argv, the environment and Cwd, and becomes the process a fresh
	// start would be (warm.go). Once Run has adopted it, it is used,
	// whatever the outcome; one found dead at hand-over fails the run
	// with ErrWarmGone before anything started. With Confine it is handed
	// the launcher's argv (and the pinned executable's and the base
	// layer's descriptors). PTY, and Executable without Confine, cannot
	// be applied to it: Run refuses such a Spec (ErrStart) and leaves it
	// unused, for the caller to close.
	Warm *Warm
	// Jail, when set, starts the command inside that jail (see Jail):
	// the jail's confinement, not Confine, is what holds it.
	Jail Jail

	// withTimeout arms Timeout (context.WithTimeout when nil). Tests
	// replace it to fire the timeout at a chosen point rather than race
	// a real timer.
	withTimeout func(context.Context, time.Duration) (context.Context, context.CancelFunc)

	// confineStart is how Confine's command starts: ConfineAsk (the zero
	// value) has Run ask Confine.InThread, the only answer a caller gets;
	// a warm process always starts it through the launcher. Unexported:
	// no caller can force an in-thread start where InThread refuses it
	// (tests set it to run the in-thread start anyway).
	confineStart ConfineStart

	// tracked, when set, is called once the reaper lists the run's group
	// (a test that kills the runner knows the reaper can act from then on).
	tracked func(pgid int)

	// beforeReap, when set, is called with the leader's pid just before
	// it is reaped, after the last signal to its group: tests check the
	// leader is still there (a zombie) whenever the group can be killed.
	beforeReap func(pid int)
}

// Result is the outcome of Run. It is not a wire type: its fields carry no
// JSON names (Duration is nanoseconds), and the design's system.run result
// payload is bridge.SystemRunResult, which host.Result.Wire builds.
type Result struct {
	// ExitCode is the process's exit status, 128+N when signal N killed it,
	// -1 when it timed out or was canceled, and 127/126/-1 when it never
	// started (see the package documentation).
	ExitCode int
	// TimedOut is true when the timeout (or a context deadline) killed the
	// process group.
	TimedOut bool
	// Success is true for exit status 0 without a timeout.
	Success bool
	// Stdout and Stderr hold at most MaxOutput bytes together, plus
	// TruncatedSuffix on the stream that was cut.
	Stdout    string
	Stderr    string
	Truncated bool
	// DroppedBytes is how much output the cap dropped (0 unless Truncated).
	DroppedBytes int64
	// Error says why there is no ordinary exit status: the process never
	// started, timed out, was canceled or was killed by a signal. It is
	// empty when the process exited by itself.
	Error string
	// Tail is the last TailSize bytes of combined output, for events.
	Tail string
	// Duration is the wall time from start to exit.
	Duration time.Duration
	// Pid is the process (group) id while it ran, for diagnostics.
	Pid int
	// Stragglers is true when processes the command left behind kept its
	// output open after it exited; they were killed (when still in its
	// process group) and their output after OutputGrace is lost.
	Stragglers bool
	// Layers are the jail layers that held the run (Spec.Jail), for the
	// audit record; not part of the result payload.
	Layers []confine.Layer `json:"-"`
}

// Sentinel errors for outcomes a caller may act on.
var (
	// ErrDangerousEnv refuses an environment overlay that could change what
	// runs (the "environment prefix" bypass); nothing is spawned.
	ErrDangerousEnv = errors.New("dangerous environment variable")
	// ErrNoCommand means the Spec has neither Argv nor Command.
	ErrNoCommand = errors.New("no command to run")
	// ErrStart wraps every failure of the operating system to start the
	// process (missing program or working directory, permissions, limits).
	ErrStart = errors.New("cannot start process")
	// ErrPTYUnsupported means Spec.PTY was asked for on a platform without
	// pseudo-terminal support here (Windows).
	ErrPTYUnsupported = errors.New("pty not supported on this platform")
)

// OutputGrace bounds how long Run keeps reading output after the process
// exits (or is killed) when something else still holds its output open,
// such as a background grandchild. After it, the holders still in the
// process group are killed and the output is closed, so a caller never
// hangs on an escaped process.
const OutputGrace = 2 * time.Second

// Runner runs Specs through one launcher: on Linux with pidfds the polled
// one (one pinned thread polls the output pipes and the pidfd), elsewhere
// the portable one (os/exec and goroutines). The package-level Run uses a
// default Runner; New(Portable()) forces the portable launcher, which a
// test uses to hold both to the same behaviour (TestPortableLauncher).
type Runner struct {
	launch launcher
	polled bool // launch is the polled launcher: warm and jailed starts work
}

// Option configures a Runner.
type Option func(*Runner)

// Portable makes the Runner use the portable launcher even where the
// polled one exists. Warm and jailed starts then fail (WarmSupported).
func Portable() Option {
	return func(r *Runner) { r.launch, r.polled = launchWithGoroutines, false }
}

// New returns a Runner with the platform's launcher, then opts applied.
func New(opts ...Option) *Runner {
	r := &Runner{launch: launchWithGoroutines}
	if l := polledLauncher(); l != nil {
		r.launch, r.polled = l, true
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// std is the Runner of the package-level Run; it is never replaced.
var std = New()

// WarmSupported says Spec.Warm and Spec.Jail can be used by this Runner:
// only the polled launcher adopts a process started elsewhere.
func (r *Runner) WarmSupported() bool { return r.polled }

// WarmSupported says Spec.Warm and Spec.Jail can be used by the
// package-level Run: the platform's launcher is the polled one.
func WarmSupported() bool { return std.polled }

// Run runs spec with the default Runner (see Runner.Run).
func Run(ctx context.Context, spec Spec) (Result, error) { return std.Run(ctx, spec) }

// Run starts the process spec describes, waits for it to exit (or kills its
// process group on timeout or when ctx ends), and returns its capped output
// and exit status. See the package documentation for how outcomes map to
// the Result and the error; a non-nil error means nothing ran.
func (r *Runner) Run(ctx context.Context, spec Spec) (Result, error) {
	res := Result{ExitCode: -1}
	fail := func(err error) (Result, error) {
		res.Error = err.Error()
		return res, err
	}
	argv, err := commandArgv(spec)
	if err != nil {
		return fail(err)
	}
	if spec.Jail != nil {
		if err := checkJail(spec, r.polled); err != nil {
			return fail(err)
		}
		res.Layers = spec.Jail.Held()
	} else if spec.Warm != nil {
		if err := checkWarm(spec, r.polled); err != nil {
			return fail(err)
		}
	}
	// The decided file is opened before anything else: with a confining
	// launcher in front, the launcher execs the descriptor it inherits.
	var pin *pinned
	if spec.Executable != nil {
		f, path, err := Pin(argv[0], *spec.Executable)
		if err != nil {
			res.ExitCode = startExitCode(err)
			return fail(err)
		}
		defer f.Close()
		pin = &pinned{file: f, path: path}
	}
	var inThread *confine.Confinement
	base := spec.ConfineBase
	if spec.Confine.Active() && spec.Jail == nil {
		start := spec.confineStart
		if start == ConfineAsk {
			start = StartOf(spec.Confine)
		}
		// A warm process is handed the launcher's argv: it restricts
		// itself and execs the command in place, which costs no more.
		if spec.Warm == nil && start == ConfineInThread {
			inThread = spec.Confine
			base = nil // the command itself starts: it is handed no ruleset
		} else {
			if base == nil {
				if base = launcherBase(spec.ConfineRules, spec.Confine); base != nil {
					defer base.Close()
				}
			}
			if argv, err = wrapLauncher(spec.Confine, argv, pin, base); err != nil {
				if errors.Is(err, ErrStart) {
					res.ExitCode = startExitCode(err)
				}
				return fail(err)
			}
		}
	}
	env, err := buildEnv(spec.BaseEnv, spec.Env)
	if err != nil {
		return fail(err)
	}
	if spec.PTY && !ptySupported {
		return fail(hint.Wrap(fmt.Errorf("run %q: %w", argv[0], ErrPTYUnsupported), "run without a pty"))
	}
	if spec.Cwd != "" {
		if err := checkDir(spec.Cwd); err != nil {
			return fail(err)
		}
	}
	if err := ctx.Err(); err != nil {
		return fail(fmt.Errorf("run %q: %w", argv[0], err))
	}
	ls := launchSpec{Spec: spec, argv: argv, env: env, pinned: pin, base: base.File(), inThread: inThread}
	capture := NewCapture(spec.MaxOutput, spec.TailSize)
	ls.capture = capture
	out, err := r.launch(ctx, ls)
	if err != nil {
		if errors.Is(err, ErrStart) {
			res.ExitCode = startExitCode(err)
		}
		return fail(err)
	}
	res.Pid, res.Duration, res.Stragglers = out.pid, out.duration, out.stragglers
	res.Stdout, res.Stderr, res.Truncated = capture.Result()
	res.DroppedBytes = capture.Dropped()
	res.Tail = capture.Tail()
	switch {
	case out.killedBy != nil:
		res.TimedOut = errors.Is(out.killedBy, context.DeadlineExceeded)
		switch {
		case !res.TimedOut:
			res.Error = "canceled: process group killed"
		case ctx.Err() == nil: // our own timeout, not the caller's deadline
			res.Error = fmt.Sprintf("timed out after %s: process group killed", spec.Timeout)
		default:
			res.Error = "timed out (deadline exceeded): process group killed"
		}
	case out.lost != nil:
		// The exit status was lost (someone else reaped the child).
		res.Error = fmt.Sprintf("wait: %v", out.lost)
	default:
		res.ExitCode, res.Error = out.code, out.why
	}
	res.Success = res.ExitCode == 0 && !res.TimedOut
	return res, nil
}

// notice calls a started run's OnStart once, by its StartNotice.
type notice struct {
	f  func()
	at time.Time
}

// startNotice is ls's notice, called at once unless ls lets it wait.
func startNotice(ls launchSpec) *notice {
	n := &notice{f: ls.OnStart}
	if ls.StartNotice <= 0 {
		n.now()
	} else {
		n.at = time.Now().Add(ls.StartNotice)
	}
	return n
}

// now calls OnStart unless it was called.
func (n *notice) now() {
	if f := n.f; f != nil {
		n.f = nil
		f()
	}
}

// wait calls OnStart if it is due and returns how long a poll may wait
// for it in milliseconds: -1 once it was called.
func (n *notice) wait() int {
	if n.f == nil {
		return -1
	}
	left := time.Until(n.at)
	if left <= 0 {
		n.now()
		return -1
	}
	return int((left + time.Millisecond - 1) / time.Millisecond)
}

// launchSpec is a validated Spec: what a launcher starts.
type launchSpec struct {
	Spec
	argv, env []string
	capture   *Capture
	pinned    *pinned // the executable to start by descriptor, or nil
	// base is the base layer of the confinement the child applies,
	// handed to it as BaseFD, or nil.
	base *os.File
	// inThread, when set, is applied to the thread that forks the
	// command (startConfined); nil when it starts unconfined or through
	// the launcher (argv already wrapped).
	inThread *confine.Confinement
}

// start runs fork (which starts the command) on a thread confined as
// ls.inThread says, or on the calling one; release is called once the
// command has been reaped.
func (ls launchSpec) start(fork func() error) (release func(), err error) {
	if ls.inThread == nil {
		return func() {}, fork()
	}
	release, warning, err := startConfined(ls.ConfineRules, ls.inThread, fork)
	if err != nil {
		return nil, err
	}
	confineWarning(ls, warning)
	return release, nil
}

// execPath is what execve is given: argv[0], or the pinned executable's
// descriptor path.
func (ls launchSpec) execPath() string {
	if ls.pinned != nil && ls.pinned.path != "" {
		return ls.pinned.path
	}
	return ls.argv[0]
}

// ran is how a launched command ended.
type ran struct {
	pid        int
	duration   time.Duration // from start to exit
	killedBy   error         // the context error that had the group killed
	code       int           // the exit status as a shell reports it (128+N for signal N)
	why        string        // what killed it, for a signal; "" for a plain exit
	lost       error         // set when the exit status could not be read
	stragglers bool
}

// armTimeout returns ctx ended by ls.Timeout too, when there is one.
func (ls launchSpec) armTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if ls.Timeout <= 0 {
		return ctx, func() {}
	}
	arm := ls.withTimeout
	if arm == nil {
		arm = context.WithTimeout
	}
	return arm(ctx, ls.Timeout)
}

// A launcher starts ls, supervises it until it has exited and its output
// is drained (killing the process group when ctx ends or the timeout
// passes), and reports how it ended. An error means nothing ran; a start
// failure wraps ErrStart (see startFailed).
type launcher func(ctx context.Context, ls launchSpec) (ran, error)

// startFailed is the error of a start the operating system refused.
func startFailed(argv0 string, err error) error {
	return hint.Wrap(fmt.Errorf("%w %q: %w", ErrStart, argv0, err), startHint(err))
}

// launchWithGoroutines is the portable launcher: os/exec, one goroutine
// per output stream and one waiting for the exit.
func launchWithGoroutines(ctx context.Context, ls launchSpec) (ran, error) {
	var r ran
	argv := ls.argv
	ctx, cancel := ls.armTimeout(ctx)
	defer cancel()

	cmd := exec.Command(ls.execPath(), argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.ExtraFiles = ls.childFiles()
	cmd.Dir = ls.Cwd
	cmd.Env = ls.env
	cmd.SysProcAttr = sysProcAttr(ls.PTY)
	prepareCommand(cmd, ls.Spec)

	var outs outputs
	var err error
	if ls.PTY {
		err = outs.openPTY(cmd, ls.capture)
	} else {
		err = outs.openPipes(cmd, ls.capture)
	}
	if err != nil {
		return r, fmt.Errorf("run %q: open output: %w", argv[0], err)
	}
	defer outs.closeRead()

	// The process must be started and waited for with the thread pinned:
	// on Linux its parent-death signal fires when the thread that forked
	// it exits, which the Go runtime may otherwise do at any time.
	unlock := lockThread()
	defer unlock()
	start := time.Now()
	release, err := ls.start(cmd.Start)
	outs.closeWrite()
	if err != nil {
		if errors.Is(err, errConfine) {
			return r, err
		}
		return r, startFailed(argv[0], err)
	}
	defer release() // after the wait below: see startConfined
	r.pid = cmd.Process.Pid
	tree := newProcTree(cmd.Process)
	defer tree.release()
	// The group leader is the child (Setpgid/Setsid): the reaper kills the
	// group if this process dies before the command ends.
	untrack, err := reaperTrack(cmd.Process.Pid)
	if err != nil {
		tree.kill()
		_ = cmd.Wait()
		return r, err
	}
	if ls.tracked != nil {
		ls.tracked(cmd.Process.Pid)
	}
	tracked := true
	stopTracking := func() {
		if tracked {
			tracked = false
			untrack()
		}
	}
	defer stopTracking()
	if ls.OnStart != nil {
		ls.OnStart()
	}
	copied := outs.copy()

	// Where the platform can wait for the exit without reaping
	// (AwaitExit), the leader is reaped last, as superviseStarted does:
	// while it is a zombie its pid, the group's id, cannot be reused, so
	// the kills below reach this run's group and no other.
	waited := make(chan exitWait, 1)
	go func() {
		reaped, err := AwaitExit(cmd)
		waited <- exitWait{reaped, err}
	}()
	var w exitWait
	select {
	case w = <-waited:
	case <-ctx.Done():
		select {
		case w = <-waited: // it exited just as the context ended
		default:
			r.killedBy = ctx.Err()
			tree.kill()
			w = <-waited
		}
	}
	r.duration = time.Since(start)
	if r.killedBy != nil && !w.reaped {
		// Anything forked while the first kill was in flight dies now.
		tree.kill()
	}
	if !outs.drain(copied, OutputGrace) {
		r.stragglers = true
		if !w.reaped {
			tree.kill()
		}
		outs.closeRead()
		// Closing unblocks the readers on every platform but Windows,
		// where an abandoned reader writes into a Capture nobody reads.
		outs.drain(copied, OutputGrace)
	}
	if !w.reaped {
		stopTracking() // the reaper must not kill the id once it may be reused
		if ls.beforeReap != nil {
			ls.beforeReap(cmd.Process.Pid)
		}
		w.err = cmd.Wait()
	}
	if cmd.ProcessState == nil {
		r.lost = w.err
	} else {
		r.code, r.why = exitStatus(cmd.ProcessState)
	}
	return r, nil
}

// exitWait is how AwaitExit saw a command end: reaped by cmd.Wait (with its
// error), or still a zombie for the caller to reap.
type exitWait struct {
	reaped bool
	err    error
}

// commandArgv returns the argv that runs spec: Argv itself, or the
// platform shell with Command.
func commandArgv(spec Spec) ([]string, error) {
	if len(spec.Argv) > 0 {
		if spec.Argv[0] == "" {
			return nil, hint.Wrap(fmt.Errorf("run: empty program name: %w", ErrNoCommand), "set argv[0]")
		}
		return spec.Argv, nil
	}
	if spec.Command == "" {
		return nil, hint.Wrap(fmt.Errorf("run: %w", ErrNoCommand), "set argv or command text")
	}
	return shellArgv(spec.Command), nil
}

// checkDir makes a missing or unusable working directory a clear start
// error; with a SysProcAttr set, os/exec would otherwise report it as the
// program being missing.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return hint.Wrap(fmt.Errorf("%w: cwd: %w", ErrStart, err), "pass an existing directory")
	}
	if !fi.IsDir() {
		return hint.Wrap(fmt.Errorf("%w: cwd %s: not a directory", ErrStart, dir), "pass an existing directory")
	}
	return nil
}

// startExitCode maps a start failure to the status a shell reports for it.
func startExitCode(err error) int {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, exec.ErrDot), errors.Is(err, fs.ErrNotExist):
		return 127
	case errors.Is(err, fs.ErrPermission), isExecFormat(err), errors.Is(err, ErrExecutableChanged):
		return 126
	}
	return -1
}

func startHint(err error) string {
	switch startExitCode(err) {
	case 127:
		return "check the program name; bare names are looked up in the host's PATH, never one from the request"
	case 126:
		return "the file exists but cannot be executed; check its mode and format"
	}
	return "check the host's process limits and permissions"
}
