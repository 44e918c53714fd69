package runner

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"

	"github.com/exechost/exechost/internal/confine"
)

// How a confined command starts (Spec.Confine): confine.InThread decides,
// in Run, once per run (a caller cannot choose it). In-thread,
// startConfined restricts a fresh thread and the run's start
// (launchPolled's or launchWithGoroutines') forks the command from it
// (launchSpec.start); otherwise wrapLauncher puts the confining launcher
// (this binary re-executed) in front of the argv.

// ConfineStart is how a confined command starts.
type ConfineStart uint8

// ConfineStart values.
const (
	// ConfineAsk has Run ask Confine.InThread.
	ConfineAsk ConfineStart = iota
	// ConfineInThread forks the command from a thread of the runner's
	// process restricted to the confinement. Only as InThread allows it:
	// where the process is not shielded the command could reach that
	// thread (tests set it to run the in-thread start anyway). A
	// confinement with resource limits is refused
	// (confine.Builder.ApplyForkingThread): nothing starts.
	ConfineInThread
	// ConfineLauncher starts the command through the launcher.
	ConfineLauncher
)

// StartOf is how a command confined by c starts, as c.InThread decides:
// the one question, asked once per run (a prctl(2) and a capget(2) each
// time, whose answers may change while the process runs).
func StartOf(c *confine.Confinement) ConfineStart {
	if ok, _ := c.InThread(); ok {
		return ConfineInThread
	}
	return ConfineLauncher
}

// BaseFD is the descriptor the base layer of a run's confinement has in
// the process that applies it (the launcher, the interpreter): inherited
// at a fresh start, put there (dup3) by a warm process from its
// hand-over (Spec.ConfineRules, Spec.ConfineBase). Fixed, after the
// pinned executable's ChildFD (closed in the child when there is none),
// so the confinement can name it before the start.
const BaseFD = ChildFD + 1

// launcherBase is the base layer of c for the launcher to be handed (as
// BaseFD), from rules; nil when there is none to hand. A failure to get
// it hands none: the launcher then builds it itself, as it always can.
func launcherBase(rules *confine.Builder, c *confine.Confinement) *confine.BaseLayer {
	f, err := rules.Base(c, confine.KernelABI())
	if err != nil {
		return nil
	}
	return f
}

// childFiles are the descriptors a start hands the child after its
// standard streams: the pinned executable (ChildFD) and the base layer
// (BaseFD), a nil file for a number left closed. None when neither.
func (ls launchSpec) childFiles() []*os.File {
	var pin *os.File
	if ls.pinned != nil {
		pin = ls.pinned.file
	}
	switch {
	case ls.base != nil:
		return []*os.File{pin, ls.base}
	case pin != nil:
		return []*os.File{pin}
	}
	return nil
}

// wrapLauncher returns the argv that starts argv confined by c through
// the launcher. A bare name is looked up here, as a start would look it
// up (the launcher searches no PATH), so that a missing program is
// reported as never started rather than as the launcher's exit status.
// pin, when set, is inherited by the launcher, which execs its
// descriptor: its path moves to the confinement's Exec. base, when set,
// is handed to the launcher as BaseFD; one built for another confinement
// refuses the run (confine.ErrBaseMismatch) rather than be used, or be
// dropped for a layer built afresh: it is the caller's mistake, which a
// refusal shows at once, while a silent rebuild would hide it and pay
// the full build on every run.
func wrapLauncher(c *confine.Confinement, argv []string, pin *pinned, base *confine.BaseLayer) ([]string, error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, startFailed(argv[0], err)
	}
	var run *confine.Confinement
	if base != nil {
		// Hand returns a copy of c naming the base layer.
		if run, err = base.Hand(c, BaseFD); err != nil {
			return nil, fmt.Errorf("%w: %w", errConfine, err)
		}
	} else {
		own := *c // a copy: pin changes its Exec
		run = &own
	}
	if pin != nil {
		run.Exec, pin.path = pin.path, "" // the launcher starts first, by its own path
	}
	return confine.Wrap(run, append([]string{path}, argv[1:]...))
}

// startConfined runs start (which forks the command) on a new thread
// restricted to c by rules' ApplyForkingThread (a Builder that builds
// afresh when rules is nil), so that the command inherits
// the restriction while no other thread of this process has it. The
// thread's goroutine never unlocks it: the Go runtime ends a thread whose
// goroutine exits locked, so it never runs anything else. It stays alive,
// parked, until release is called once the command has been reaped: the
// command's parent-death signal fires when the thread that forked it
// exits. Nothing else runs on it: the caller supervises from its own,
// unrestricted thread (signals, the reaper, /proc, output files).
// ApplyThread's warning, if any, is returned for the run's stderr; an
// error means nothing started (and release is nil).
func startConfined(rules *confine.Builder, c *confine.Confinement, start func() error) (release func(), warning string, err error) {
	if rules == nil {
		rules = &confine.Builder{Afresh: true}
	}
	type started struct {
		warning string
		err     error
	}
	done := make(chan started)
	parked := make(chan struct{})
	confined := func() {
		runtime.LockOSThread() // never unlocked (see above)
		w, err := rules.ApplyForkingThread(c, confine.KernelABI())
		if err != nil {
			err = fmt.Errorf("%w: %w", errConfine, err)
		} else {
			err = start()
		}
		done <- started{w, err}
		if err == nil {
			<-parked
		}
	}
	go func() {
		runtime.LockOSThread()
		if !onMainThread() {
			confined()
			return
		}
		// The runtime never ends the main thread: a goroutine exiting
		// locked on it wedges it instead, restricted for good. Hold it
		// while another thread does the work.
		inner := make(chan struct{})
		go func() {
			defer close(inner)
			confined()
		}()
		<-inner
		runtime.UnlockOSThread()
	}()
	s := <-done
	if s.err != nil {
		return nil, "", s.err
	}
	return func() { close(parked) }, s.warning, nil
}

// errConfine marks a confinement that could not be applied: nothing ran.
var errConfine = errors.New("cannot confine the command")

// confineWarning puts ApplyThread's warning where the launcher printed
// it: first on the run's stderr (its only stream on a pty).
func confineWarning(ls launchSpec, warning string) {
	if warning == "" {
		return
	}
	s := ls.capture.Stderr()
	if ls.PTY {
		s = ls.capture.Stdout()
	}
	s.Write([]byte("exechost: " + warning + "\n"))
}
