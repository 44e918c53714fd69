package host

import (
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
//     writes only in the run's cwd, tmp and confine.writable, network as
//     confine.network says (none by default);
//   - security=full without a "confine" member: only the protected set is
//     out of reach.
//
// The state directory is protected whatever the policy says. A kernel that
// cannot enforce it refuses the run when a "confine" member asks for
// confinement (unless it says unsupported=warn) and warns otherwise.
func (e *Engine) confinement(p *Prepared, tmp string) *confine.Confinement {
	asked := p.Resolved.Confine
	c := &confine.Confinement{Protected: []string{e.StateDir}, Unsupported: confine.UnsupportedWarn}
	if asked == nil && p.Effective.Security == policy.SecurityFull {
		c.Writable, c.Network = []string{"/"}, confine.NetworkAll
	} else {
		c.Writable, c.Network = []string{p.Cwd}, confine.NetworkNone
		if tmp != "" {
			c.Writable = append(c.Writable, tmp)
		}
	}
	if asked != nil {
		c.Writable = append(c.Writable, asked.Writable...)
		c.Unsupported = confine.UnsupportedDeny
		if asked.Network != "" {
			c.Network = asked.Network
		}
		if asked.Unsupported != "" {
			c.Unsupported = asked.Unsupported
		}
	}
	r, _ := c.Resolve()
	return &r
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

// ConfinementText says in one line what the kernel will let a run of p
// touch, for prompts, `approvals check` and the audit log ("$TMPDIR" is the
// run's private temporary directory), and whether this kernel enforces it.
func (e *Engine) ConfinementText(p *Prepared) string {
	c := e.confinement(p, "$TMPDIR")
	text := c.Describe()
	if !c.Active() {
		return text
	}
	warning, err := c.Check(e.kernelABI())
	switch {
	case err != nil:
		return text + " — refused on this host: " + err.Error()
	case warning != "":
		return text + " — " + warning
	}
	return text
}
