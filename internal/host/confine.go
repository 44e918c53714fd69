package host

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/shellrun"
)

// confinement returns the kernel confinement a run of p gets (see
// docs/policy.md, "Confinement"), with tmp as its private temporary
// directory ("" before one exists, for `approvals check` and prompts):
//
//   - security=allowlist, or any "confine" member in exec-approvals.json:
//     the jail. Writes only in the run's cwd, tmp and confine.writable;
//     network as confine.network says (none by default); no socket but
//     confine.sockets; the default hidden set and confine.hidden out of
//     sight, less confine.readable; the persistence paths inside the
//     writable roots read-only, less confine.writablePersistence; a kernel
//     or platform that cannot build it refuses the run unless
//     confine.unsupported says warn;
//   - security=full without a "confine" member: only the protected set is
//     out of reach, and a kernel that cannot enforce that warns.
//
// The state directory is protected whatever the policy says.
func (e *Engine) confinement(p *Prepared, tmp string) *confine.Confinement {
	if p.jail == nil {
		r := e.jail(p) // once per run: its reach and its start
		p.jail = &r
	}
	c := *p.jail
	if tmp != "" && !slices.Contains(c.Writable, "/") {
		// The tmp directory is the run's own: nothing persists there.
		c = c.WithWritable(tmp)
	}
	return &c
}

// jail is confinement, resolved (confine.Confinement.Resolve), without
// the run's temporary directory. What a confined run's jail is worked out
// from — its cwd, the confine member, the home's part (homeReachOf) — is
// kept between runs (cwdjail.go). The slices of what it returns are
// shared: copy before changing them.
func (e *Engine) jail(p *Prepared) confine.Confinement {
	asked := p.Resolved.Confine
	if asked == nil && p.Effective.Security == policy.SecurityFull {
		c := confine.Confinement{Protected: []string{e.StateDir}, Unsupported: confine.UnsupportedWarn,
			Writable: []string{"/"}, Network: confine.NetworkAll}
		r, _ := c.Resolve()
		return r
	}
	// The state directory is looked up for every run, outside what is
	// kept: it usually lies far from the cwd (a test's under /tmp, whose
	// every new entry would be a change to a kept jail watching it).
	return e.cwdJail(p.Cwd, asked).WithProtected(e.StateDir)
}

// jailFrom works out the jail of a run in cwd confined as asked says (nil:
// the default jail), given the home's part, but for the state directory
// (jail adds it); rec (nil: none) records every path it reads.
func (e *Engine) jailFrom(rec *lookups, cwd string, asked *approvals.ResolvedConfine, home *homeReach) confine.Confinement {
	res := newResolver()
	res.rec = rec
	c := confine.Confinement{Writable: []string{cwd}, Network: confine.NetworkNone, Unsupported: confine.UnsupportedDeny}
	if asked != nil {
		c.Writable = append(c.Writable, asked.Writable...)
		if asked.Network != "" {
			c.Network = asked.Network
		}
		if asked.Unsupported != "" {
			c.Unsupported = asked.Unsupported
		}
		for _, s := range asked.Sockets {
			if s = res.real(s); !slices.Contains(c.Sockets, s) {
				c.Sockets = append(c.Sockets, s)
			}
		}
	}
	c.Hidden = slices.Clone(home.hidden)
	// A root inside a hidden path is not granted (as one inside the
	// protected set): hidden wins, whatever the cwd or writable says.
	var writable []string
	for _, w := range c.Writable {
		if w = res.real(w); !slices.ContainsFunc(c.Hidden, func(h string) bool { return pathWithin(w, h) }) {
			writable = append(writable, w)
		}
	}
	c.Writable = writable
	c.ReadOnly = e.readOnly(res, cwd, writable, asked, home.persist)
	// Resolve looks the writable roots up again.
	for _, q := range c.Writable {
		if filepath.IsAbs(q) {
			rec.lookedUp(q)
		}
	}
	r, _ := c.Resolve()
	// Kept and shared between runs: an append by one must not write into
	// another's.
	r.Protected, r.Writable, r.ReadOnly = slices.Clip(r.Protected), slices.Clip(r.Writable), slices.Clip(r.ReadOnly)
	r.Hidden, r.Sockets = slices.Clip(r.Hidden), slices.Clip(r.Sockets)
	return r
}

// confineRules is the engine's Landlock rule builder: the rules around the
// state directory are built once and reused while they are exact
// (confine.Builder) by every in-thread start, and handed as a ruleset
// descriptor to every launcher and interpreter (fresh or warm), unless
// ConfineRulesAfresh: then each builds them itself.
func (e *Engine) confineRules() *confine.Builder {
	e.rulesOnce.Do(func() { e.rules = &confine.Builder{Afresh: e.ConfineRulesAfresh} })
	return e.rules
}

// handBase hands the interpreter the engine's base layer of the plan's
// confinement (runner.Spec.ConfineBase, as runner.BaseFD, which the plan
// names), so that it builds only its own layer, and returns done extended
// to close it. Without one (ConfineRulesAfresh, or it could not be had)
// the interpreter builds both layers itself.
func (e *Engine) handBase(spec *runner.Spec, plan *shellrun.Plan, done func()) func() {
	base, err := e.confineRules().Base(plan.Confine, confine.KernelABI()) // the interpreter's kernel
	if err != nil || base == nil {
		return done
	}
	c, err := base.Hand(plan.Confine, runner.BaseFD)
	if err != nil { // cannot be: built for it just now
		base.Close()
		return done
	}
	plan.Confine, spec.ConfineBase = c, base
	return func() {
		base.Close()
		done()
	}
}

// kernelABI is the Landlock ABI runs are confined with.
func (e *Engine) kernelABI() int {
	if e.LandlockABI != nil {
		return e.LandlockABI()
	}
	return confine.KernelABI()
}

// confineSpec says how a run starts confined as c says: enforce is false
// when there is nothing to enforce here (no confinement, or no Landlock at
// all and c says warn: the warning is in the run's description, not on
// its stderr); otherwise the interpreter applies c itself (its plan) and
// the runner confines anything else (runner.Spec.Confine: in-thread or
// through the launcher, as runner.StartOf decides). It
// refuses a run the kernel cannot confine when c says deny.
func (e *Engine) confineSpec(c *confine.Confinement, how string) (forRunner *confine.Confinement, enforce bool, err error) {
	if e.noConfine || !c.Active() {
		return nil, false, nil
	}
	abi := e.kernelABI()
	if _, err := c.Check(abi); err != nil {
		return nil, false, err
	}
	if !confine.Supported || abi == 0 {
		return nil, false, nil
	}
	if how == RunsInterpreted || how == RunsUnchecked {
		return nil, true, nil
	}
	return c, true, nil
}

// ConfinementText says in one line what a run of p may reach (the reach
// line: writes, network, sockets, hidden secrets, read-only persistence
// paths, the protected set, with the run's cwd shown as "cwd" and its
// private temporary directory as "tmp"), which layers of the jail hold for
// it on this host, and whether this host refuses or only warns about what
// it cannot build, for prompts, `approvals check`, doctor and the audit
// log.
func (e *Engine) ConfinementText(p *Prepared) string {
	r := e.reachOf(p)
	c := r.c
	text := c.Reach(map[string]string{p.realCwd(): "cwd", "$TMPDIR": "tmp"})
	text = egressReach(p, text)
	if !c.Active() {
		return text
	}
	held, jailErr := r.held, r.err
	layers := "none"
	if len(held) > 0 {
		layers = strings.Join(held, ", ")
	}
	text += " · layers: " + layers
	warning, err := c.Check(e.kernelABI())
	if err == nil && jailErr != nil {
		if c.Unsupported == confine.UnsupportedWarn {
			warning = jailErr.Error() + "; runs with the layers that hold (unsupported: warn)"
		} else {
			err = jailErr
		}
	}
	switch {
	case err != nil:
		return text + " — refused on this host: " + err.Error()
	case warning != "":
		return text + " — " + warning
	}
	return text
}

// CheckJail says whether this host can build the jail of a run of p: nil
// when it can (or p's run is not confined); a warning when it builds less
// and the policy says unsupported=warn; an error wrapping
// confine.ErrUnsupported, with a hint, when such a run is refused.
func (e *Engine) CheckJail(p *Prepared) (warning string, err error) {
	r := e.reachOf(p)
	c := r.c
	if e.noConfine || !c.Active() {
		return "", nil
	}
	if warning, err = c.Check(e.kernelABI()); err != nil {
		return warning, err
	}
	if jailErr := r.err; jailErr != nil {
		if c.Unsupported != confine.UnsupportedWarn {
			return "", jailErr
		}
		return jailErr.Error() + "; runs with the layers that hold (unsupported: warn)", nil
	}
	return warning, nil
}

// Jail is the confinement a run of p would get, its private temporary
// directory shown as "$TMPDIR", for `approvals check --json`.
func (e *Engine) Jail(p *Prepared) *confine.Confinement {
	c := *e.reachOf(p).c
	return &c
}

// Layers are the layers of the jail that hold for a run of p on this host
// (confine.Layer names), for `approvals check --json` and the audit
// record; nil when the run is not confined or nothing can confine it.
func (e *Engine) Layers(p *Prepared) []string {
	return slices.Clone(e.reachOf(p).held)
}

// reachReport is a run's confinement as its reports show it (its
// temporary directory as "$TMPDIR") and the layers of its jail that hold
// on this host (jailReport).
type reachReport struct {
	c    *confine.Confinement
	held []string
	err  error
}

// reachOf is p's reachReport, worked out on first use. What enforces the
// run is worked out again at its start (spec: confinement with its real
// temporary directory, the jail the pool hands out then); this one only
// describes it, once, so the reach line, the layers and the receipt agree.
func (e *Engine) reachOf(p *Prepared) *reachReport {
	if p.reach == nil {
		c := e.confinement(p, "$TMPDIR")
		held, err := e.jailReport(p, c)
		p.reach = &reachReport{c: c, held: held, err: err}
	}
	return p.reach
}

// jailReport says which layers hold for a run of p confined by c on this
// host, and, when its start goes to the jail (takeJail: a direct start or
// shell text, not security=full's write-anywhere confinement), why the
// jail falls short here (err wraps confine.ErrUnsupported; it refuses the
// run unless c says warn). The layers are the jail's own (jail.Pool.Layers
// builds it, or finds it standing, as the run will) when it can be built;
// otherwise Landlock, given the ABI c needs (MinABI), as the start that
// runs without the jail (interpreted runs, PTY runs, NoJail) gets.
func (e *Engine) jailReport(p *Prepared, c *confine.Confinement) (held []string, err error) {
	if e.noConfine || !c.Active() || !confine.Supported {
		return nil, nil
	}
	var landlock []string
	if abi := e.kernelABI(); abi > 0 && abi >= c.MinABI() {
		landlock = []string{string(confine.LayerLandlock)}
	}
	how := p.RunsAs()
	pool := e.jails()
	if pool == nil || slices.Contains(c.Writable, "/") {
		return landlock, nil
	}
	relay := e.egressRelayIfRunning(p)
	o := e.jailOptions(c, "$TMPDIR", relay)
	if how == RunsInterpreted || how == RunsUnchecked {
		// The interpreter starts in the jail too (jailInterpreter).
		if exe, err := os.Executable(); err == nil {
			o = e.interpJailOptions(c, "$TMPDIR", exe, relay)
		}
	}
	got, missing, jerr := pool.Layers(o)
	switch {
	case jerr != nil:
		return landlock, fmt.Errorf("%w: the jail cannot be built on this host: %w (hint: run `exechost doctor`)", confine.ErrUnsupported, jerr)
	case len(missing) > 0:
		err = fmt.Errorf("%w: the jail lacks %s on this host (hint: run `exechost doctor`; confine.unsupported \"warn\" runs with the layers that hold)", confine.ErrUnsupported, layerList(missing))
	}
	for _, l := range got {
		// The engine's probe (LandlockABI) has the last word on Landlock.
		if l != confine.LayerLandlock || landlock != nil {
			held = append(held, string(l))
		}
	}
	return held, err
}

// ranLayers are the layers that held a run that has ended: the jail's
// (runner.Result.Layers) when one ran it; otherwise Landlock when it was
// to hold (pre, the layers reported before the start), as the start
// without a jail confines with it alone; none when unconfined.
func ranLayers(pre []string, rr runner.Result) []string {
	landlock := slices.Contains(pre, string(confine.LayerLandlock))
	if len(rr.Layers) > 0 {
		var out []string
		for _, l := range rr.Layers {
			if l != confine.LayerLandlock || landlock {
				out = append(out, string(l))
			}
		}
		return out
	}
	if landlock {
		return []string{string(confine.LayerLandlock)}
	}
	return nil
}
