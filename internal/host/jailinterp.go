package host

import (
	"fmt"
	"os"
	"slices"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/jail"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/shellrun"
)

// jailInterpreter starts an interpreted run's interpreter (this binary)
// in the standing jail for c, as takeJail does for a direct start, with
// the same refusals: no jail, or one lacking a layer c needs, refuses the
// run unless c says warn, and then spec.Jail stays nil and the caller
// confines the interpreter with Landlock alone. It returns done extended
// to release the jail.
//
// In the jail the interpreter applies no Landlock of its own (its plan
// has no Confine): the jail's layers, Landlock among them, were built on
// the thread that forks it and are inherited, so it runs under exactly
// what a direct start in the same jail runs under. (A Landlock restriction
// of its own would also go wrong there: the runtime's all-threads call
// lists /proc/getpid()/task, and a run is pid 1 of its own namespace while
// the view's /proc is the jail's.) It is started by descriptor: the file
// this binary was when the run was decided is what runs (spec.Executable),
// found in the view where the host finds it (a binary in the host's /tmp,
// as under `go test`, is bound into the view's private /tmp, that file
// alone). The jail's server keeps a warm interpreter (jail.Jail.Warmed:
// started from the same file in the same jail, past the runtime's and
// the packages' initialisation) and hands the run to it when one stands;
// the engine's own warm pool (warm.go) serves only interpreted runs that
// start outside a jail. Its TMPDIR, and so the private directories it makes and the one
// its programs get, is the jail's /tmp.
func (e *Engine) jailInterpreter(spec *runner.Spec, c *confine.Confinement, tmp string, relay *jail.EgressRelay, done func()) (func(), error) {
	pool := e.jails()
	if pool == nil || spec.PTY || slices.Contains(c.Writable, "/") {
		return done, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return done, fmt.Errorf("%w: find this executable for the interpreter: %w", runner.ErrStart, err)
	}
	id, err := runner.IDOf(exe)
	if err != nil {
		return done, fmt.Errorf("%w: the interpreter %s: %w", runner.ErrStart, exe, err)
	}
	done, err = e.enterJail(spec, pool, e.interpJailOptions(c, tmp, exe, relay), c, done)
	if err == nil && spec.Jail != nil {
		spec.Executable = &id
		// Handed to the jail's warm interpreter when one stands (it is
		// this file, started in this jail): no start of this binary.
		if j, ok := spec.Jail.(*jail.Jail); ok {
			if warm, werr := shellrun.WarmArgv(); werr == nil {
				spec.Jail = j.Warmed(warm)
			}
		}
	}
	return done, err
}

// interpJailOptions is the jail an interpreted run confined by c starts
// in: a direct start's, with the interpreter exe bound into the view when
// it lives in the host's /tmp (where the view has a /tmp of its own).
func (e *Engine) interpJailOptions(c *confine.Confinement, tmp, exe string, relay *jail.EgressRelay) jail.Options {
	o := e.jailOptions(c, tmp, relay)
	if pathWithin(exe, "/tmp") {
		o.Readable = append(o.Readable, exe)
	}
	return o
}
