package host

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/jail"
	"github.com/exechost/exechost/internal/runner"
)

// jails returns the engine's pool of standing jails, started on first
// use; nil where jails cannot be built (not Linux), when the engine was
// built with NoJail (or the exechost_jail_off test tag), or once the
// engine is closed.
func (e *Engine) jails() *jail.Pool {
	if !jail.Supported || e.NoJail || jailOff {
		return nil
	}
	e.jailMu.Lock()
	defer e.jailMu.Unlock()
	if e.jailPool == nil && !e.jailClosed {
		p, err := jail.NewPool(jail.WithClock(e.now))
		if err != nil {
			return nil
		}
		e.jailPool = p
	}
	return e.jailPool
}

// closeJails ends the engine's jails (and any run still in one).
func (e *Engine) closeJails() {
	e.jailMu.Lock()
	p := e.jailPool
	e.jailPool, e.jailClosed = nil, true
	e.jailMu.Unlock()
	if p != nil {
		p.Close()
	}
}

// jailOptions is the jail a run confined by c starts in. The run's own
// temporary directory is left out (it would make every run's jail a new
// one): a jailed run's TMPDIR is the jail's private /tmp.
func (e *Engine) jailOptions(c *confine.Confinement, tmp string, relay *jail.EgressRelay) jail.Options {
	jc := *c
	jc.Writable = slices.DeleteFunc(slices.Clone(c.Writable), func(p string) bool { return p == tmp })
	var dirs []string
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		dirs = append(dirs, d)
	}
	if e.Home != "" {
		dirs = append(dirs, filepath.Join(e.Home, ".docker", "run"))
	}
	// The search path stays reachable where the view replaces /tmp: a
	// program decided on there must be found there.
	readable := filepath.SplitList(e.runPATH())
	return jail.Options{Confine: jc, Layers: slices.Clone(e.JailLayers), SocketDirs: dirs, Readable: readable, Egress: relay}
}

// takeJail starts spec in the standing jail for c (runner.Spec.Jail),
// when there is one to be had, and returns done extended to release it.
// A jail that cannot be built here, or lacks a layer c needs
// (jail.Missing), refuses the run with an error wrapping
// confine.ErrUnsupported when c says deny (security=allowlist, or any
// "confine" member, unless confine.unsupported says warn); with warn the
// run starts with what held (the jail's layers, or Landlock alone, as
// spec already says) and its result names them.
func (e *Engine) takeJail(spec *runner.Spec, c *confine.Confinement, tmp string, relay *jail.EgressRelay, done func()) (func(), error) {
	pool := e.jails()
	// security=full without a "confine" member writes anywhere and keeps
	// only the protected set out of reach (docs/policy.md): its sockets,
	// network and tools (ptrace) stay as they were, with Landlock alone.
	if pool == nil || spec.PTY || slices.Contains(c.Writable, "/") {
		return done, nil
	}
	o := e.jailOptions(c, tmp, relay)
	if len(spec.Argv) > 0 && pathWithin(spec.Argv[0], os.TempDir()) {
		// The view's /tmp is its own: a program decided on in the host's
		// temporary directory is made readable there (that file alone),
		// or it could not be found (everything else of / is in the view
		// already).
		// (The view skips it where a readable directory shows it.)
		o.Readable = append(o.Readable, spec.Argv[0])
	}
	return e.enterJail(spec, pool, o, c, done)
}

// enterJail sets spec.Jail to the pool's jail for o when it holds every
// layer c needs, or says why not as takeJail does.
func (e *Engine) enterJail(spec *runner.Spec, pool *jail.Pool, o jail.Options, c *confine.Confinement, done func()) (func(), error) {
	j, release, err := pool.Get(o)
	deny := c.Unsupported != confine.UnsupportedWarn
	if err != nil {
		if deny {
			return done, fmt.Errorf("%w: the jail cannot be built on this host: %w (hint: run `exechost doctor`; set confine.unsupported to \"warn\" in exec-approvals.json to run with Landlock alone)", confine.ErrUnsupported, err)
		}
		return done, nil
	}
	if missing := jail.Missing(&o.Confine, j.Held()); len(missing) > 0 && deny {
		release()
		return done, fmt.Errorf("%w: the jail lacks %s on this host (hint: run `exechost doctor`; set confine.unsupported to \"warn\" in exec-approvals.json to run with the layers that hold)", confine.ErrUnsupported, layerList(missing))
	}
	spec.Jail = j
	if spec.Env != nil {
		spec.Env["TMPDIR"] = "/tmp"
	}
	return func() {
		release()
		done()
	}, nil
}

// layerList names layers for a message: "view, pid".
func layerList(ls []confine.Layer) string {
	names := make([]string, len(ls))
	for i, l := range ls {
		names[i] = string(l)
	}
	return strings.Join(names, ", ")
}
