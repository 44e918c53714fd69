package host

import (
	"errors"
	"strings"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/explain"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/shellcmd"
)

// DenialError is a decision that refused a command. It wraps the policy
// sentinel (errors.Is policy.ErrAllowlistMiss, …), its text is the
// design's SYSTEM_RUN_* message, and Denial says, structured, what was
// missing, so no caller ever parses the text: the node sends it as
// bridge.Error.Denial, the CLI renders it.
type DenialError struct {
	err    error // the policy sentinel, wrapped with the decision's reason
	msg    string
	detail string
	// Denial holds the reason, the missing executables and the construct
	// (with its position) that made the analysis fail; the gateway adds the
	// policy's provenance and the fixing command.
	Denial bridge.Denial
}

func (e *DenialError) Error() string { return e.msg + e.detail }

// Unwrap returns the policy sentinel.
func (e *DenialError) Unwrap() error { return e.err }

// Wire is the denial as every execution host answers it on the wire:
// CodeDenied, the SYSTEM_RUN_* message and the structured Denial.
func (e *DenialError) Wire() *bridge.Error {
	d := e.Denial
	return &bridge.Error{Code: bridge.CodeDenied, Message: e.Error(), Denial: &d}
}

// denial builds the DenialError for a prepared command refused by d;
// path is this host's exec-approvals.json.
func denial(p *Prepared, d policy.Decision, path string) *DenialError {
	e := &DenialError{err: d.Err, msg: denialMessage(d), detail: denialDetail(p, d)}
	e.Denial.Reason = explain.ReasonOf(d.Err)
	if strings.Contains(d.Reason, promptTimedOut) {
		// An approver was there and nobody answered in time: starting
		// one (explain's hint for no answer) is not the fix.
		e.Denial.Hint = "the approver was asked but nobody answered before the prompt timed out (" + d.Reason + "): answer the prompt sooner (in `exechost up`'s terminal or the approver's web page), raise --prompt-timeout on the execution host, or allowlist the executables"
	}
	if !p.Analysis.OK {
		e.Denial.Construct, e.Denial.Position = constructOf(p.Analysis)
	} else if p.Effective.Security == policy.SecurityAllowlist {
		e.Denial.Missing = missing(p)
	}
	// What decided and where, from the policy this host applied: the
	// gateway has nothing to ask the host afterwards.
	e.Denial.Policy = source(p, d, path)
	e.Denial.UnknownKeys = p.unknownKeys
	return e
}

// constructOf returns what made an analysis fail, without its position or
// hint ("command substitution $(…)"; for a command that does not even
// parse, or a name that does not resolve, the analysis' own words), and
// its "line:column" ("" when it has none); both "" for an analysis that
// did not fail. They come from the Failure's fields, never its message.
// Every denial this host sends carries them: the gateway does not analyse.
func constructOf(a shellcmd.Analysis) (construct, position string) {
	if a.OK || a.Failure == nil {
		return "", ""
	}
	return a.Failure.Construct(), a.Failure.Position()
}

// source is the provenance of the setting that decided d (nil when none
// did: a human's answer, a requester that went away). Host is left to
// whoever names this host to a person.
func source(p *Prepared, d policy.Decision, path string) *bridge.DenialSource {
	eff, r := p.Effective, p.Resolved
	src := &bridge.DenialSource{File: path, Key: d.Setting, Level: r.Sources[d.Setting]}
	switch d.Setting {
	case policy.SettingSecurity:
		src.Setting = "security=" + string(eff.Security)
		if eff.Security != r.Local.Security {
			// The file allows more; the caller's request made it stricter.
			src.Level, src.File = "request", ""
		}
	case policy.SettingAsk:
		src.Setting = "security=" + string(eff.Security) + " ask=" + string(eff.Ask)
	case policy.SettingFallback:
		src.Setting = "askFallback=" + string(eff.Fallback)
	default:
		return nil
	}
	return src
}

// missing lists the executables no pattern matched ("name (not found on
// PATH)" for one that did not resolve), then the environment variables the
// policy does not permit ("env NAME").
func missing(p *Prepared) (out []string) {
	defer func() {
		for _, n := range p.EnvMissing {
			out = append(out, "env "+n)
		}
	}()
	for i, s := range p.Analysis.Segments {
		if i < len(p.Matched) && p.Matched[i] == "" {
			name := s.ResolvedPath
			if name == "" {
				name = s.Name + " (not found on PATH)"
			}
			out = append(out, name)
		}
	}
	return out
}

// reasonCodes are the decision reasons that only repeat their sentinel's
// text (ReasonSecurityDeny is "security=deny" in "SYSTEM_RUN_DISABLED:
// security=deny").
var reasonCodes = map[error]string{
	policy.ErrDisabled:         policy.ReasonSecurityDeny,
	policy.ErrUserDenied:       policy.ReasonUserDenied,
	policy.ErrApprovalRequired: policy.ReasonApprovalRequired,
	policy.ErrAllowlistMiss:    policy.ReasonAllowlistMiss,
}

// denialMessage is the design's SYSTEM_RUN_* text, then what the reason
// adds to it in parentheses, once: "SYSTEM_RUN_DISABLED: security=deny"
// (not "… (security=deny)"), "SYSTEM_RUN_DENIED: user denied (by web)".
func denialMessage(d policy.Decision) string {
	for sentinel, code := range reasonCodes {
		if !errors.Is(d.Err, sentinel) {
			continue
		}
		rest := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(d.Reason, code), ":"))
		switch {
		case rest == "":
			return sentinel.Error()
		case strings.HasPrefix(rest, "(") && strings.HasSuffix(rest, ")"):
			return sentinel.Error() + " " + rest
		default:
			return sentinel.Error() + " (" + rest + ")"
		}
	}
	return d.Err.Error()
}

// denialDetail adds to a denial what an agent can act on: which
// executables were missing and what would fix it. A human's deny or
// security=deny gets none: the allowlist was not why it was refused.
func denialDetail(p *Prepared, d policy.Decision) string {
	if errors.Is(d.Err, policy.ErrUserDenied) || errors.Is(d.Err, policy.ErrDisabled) {
		return ""
	}
	var b strings.Builder
	if m := missing(p); p.Effective.Security == policy.SecurityAllowlist && p.Analysis.OK && len(m) > len(p.EnvMissing) {
		paths := m[:len(m)-len(p.EnvMissing)]
		b.WriteString("; not allowlisted: " + strings.Join(paths, ", "))
		b.WriteString(" (hint: `exechost approvals allowlist add --agent '" + p.Agent + "' " + paths[0] + "` on the execution host, or ask a human to approve)")
	}
	if p.Effective.Security == policy.SecurityAllowlist && p.Analysis.OK && len(p.EnvMissing) > 0 {
		b.WriteString("; environment not allowlisted: " + strings.Join(p.EnvMissing, ", "))
		b.WriteString(" (hint: add the names to envAllowlist in exec-approvals.json on the execution host — defaults or agents.'" + p.Agent + "' — or ask a human to approve)")
	}
	if !p.Analysis.OK {
		// The analysis error names the construct and its position
		// ("command substitution $(…) at 1:6").
		b.WriteString("; cannot be analysed: " + p.Analysis.Error)
		b.WriteString(" (hint: rewrite the command without that construct, or ask a human to approve it)")
	}
	return b.String()
}
