package runner

import (
	"fmt"
	"syscall"
	"time"

	"github.com/exechost/exechost/internal/confine"
)

// Jail is a jail that already stands (internal/jail's Jail): Run with
// Spec.Jail hands it the command, which its server forks and execs inside
// the jail, and supervises the run as it supervises a fresh start (the
// same output capture, timeout and kill; the kill is the jail's, which
// takes every process the run left). The command is the jail's: Spec's
// Confine is not applied again (the jail holds it, Held says with which
// layers), no launcher is put in front, and the pinned executable is
// started by its descriptor. Only the polled launcher (Linux with pidfds)
// starts jailed runs; PTY and Warm cannot be combined with it.
type Jail interface {
	// StartRun starts argv (argv[0] absolute) with env in dir, with
	// stdio as its descriptors 0-2 and, when exec >= 0, that file
	// executed by descriptor (it is the run's descriptor 3, ChildFD). A
	// start the kernel refused is an *os.PathError.
	StartRun(argv, env []string, dir string, stdio [3]int, exec int) (JailedRun, error)
	// Held are the layers the jail holds.
	Held() []confine.Layer
}

// JailedRun is a command a Jail started.
type JailedRun interface {
	// Pid is its pid in the jail; PidFD its pidfd (readable at its exit).
	Pid() int
	PidFD() int
	// Kill kills it and every process it left.
	Kill() error
	// Wait returns its wait status, waiting at most d.
	Wait(d time.Duration) (syscall.WaitStatus, error)
	// Close releases its descriptors.
	Close()
}

// checkJail refuses what a jailed start cannot do.
func checkJail(spec Spec, polled bool) error {
	switch {
	case !polled:
		return fmt.Errorf("%w: jailed runs need pidfds (Linux 5.3 or later)", ErrStart)
	case spec.PTY:
		return fmt.Errorf("%w: a jailed run has no terminal (start PTY runs otherwise)", ErrStart)
	case spec.Warm != nil:
		return fmt.Errorf("%w: a jailed run is not started by a warm process", ErrStart)
	}
	return nil
}
