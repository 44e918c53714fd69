package host

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/shellcmd"
	"github.com/exechost/exechost/internal/trace"
)

// promptTimedOut starts the reason of a fallback after an approver let the
// prompt time out (denial.go gives it its own hint).
const promptTimedOut = "prompt timed out after"

// ask obtains a human's answer (or applies askFallback) for a prepared
// command whose decision is AskHuman.
func (e *Engine) ask(ctx context.Context, req Request, p *Prepared, rec AuditRecord) (policy.Decision, AuditRecord) {
	in := p.input()
	choices := []string{string(policy.AllowOnce), string(policy.AllowAlways), string(policy.Reject)}
	if p.Effective.Ask == policy.AskAlways {
		// allow-always would be meaningless: the next run asks anyway.
		choices = []string{string(policy.AllowOnce), string(policy.Reject)}
	}
	if e.Prompter == nil {
		rec.Fallback = true
		return policy.NoAnswer(in, errNoPrompter.Error()), rec
	}
	timeout := e.PromptTimeout
	if timeout <= 0 {
		timeout = DefaultPromptTimeout
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	allowlisted := make([]bool, len(p.Matched))
	for i, m := range p.Matched {
		allowlisted[i] = m != ""
	}
	pr := prompt.Request{
		Command: p.Text, Argv: req.Argv, Cwd: p.Cwd, Host: string(e.Host),
		Security: string(p.Effective.Security), Ask: string(p.Effective.Ask),
		AgentID: req.AgentID, SessionKey: req.SessionKey, NodeID: e.NodeID,
		ResolvedPaths: p.Analysis.Paths(), Reason: p.Decision.Reason, Allowlisted: allowlisted,
		Choices: choices, ExpiresAtMs: e.now().Add(timeout).UnixMilli(), Fallback: string(p.Effective.Fallback),
		Canonical: p.Analysis.Canonical, PlanHash: p.Analysis.Hash, RunsAs: p.runsAs(false),
		Env: p.Env, EnvMissing: p.EnvMissing, ExecutableSHA256: e.sha256s(p), Changed: p.Changed,
		Confinement: e.ConfinementText(p),
	}
	for _, s := range p.Analysis.Segments {
		pr.Executables = append(pr.Executables, s.Runs)
	}
	if slices.Contains(choices, string(policy.AllowAlways)) {
		// The same computation persist uses: what the human reads is what
		// gets written.
		paths, notes := shellcmd.Recordable(p.Analysis)
		pr.AllowAlways = &prompt.AllowAlwaysPlan{Add: paths, Skipped: notes}
	}
	trace.Event(ctx, trace.EventApprovalWait)
	a, by, err := e.Prompter.Prompt(pctx, pr)
	trace.Event(ctx, trace.EventApprovalDone, trace.AttrDecision.String(string(a)))
	if err != nil && ctx.Err() != nil {
		// The requester went away: its prompt was withdrawn, and nothing
		// runs for it, whatever askFallback says.
		rec.Fallback = false
		return policy.Decision{Outcome: policy.DenyRun, Reason: "requester-gone: " + ctx.Err().Error(), Err: policy.ErrApprovalRequired}, rec
	}
	if err != nil {
		why := err.Error()
		if errors.Is(pctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			why = fmt.Sprintf("%s %s: %v", promptTimedOut, timeout, err)
		}
		rec.Fallback = true
		return policy.NoAnswer(in, why), rec
	}
	rec.Approval, rec.DecidedBy = a, by
	return e.applyAnswer(a, by, p, choices), rec
}

func (e *Engine) applyAnswer(a policy.Approval, by string, p *Prepared, choices []string) policy.Decision {
	if a == policy.AllowAlways && !slices.Contains(choices, string(a)) {
		a = policy.AllowOnce
	}
	d := policy.Answer(a, by)
	if a == policy.AllowAlways {
		d.Reason += e.persist(p)
	}
	return d
}
