package policy

import (
	"errors"
	"fmt"
	"slices"
)

// Settings is one layer of exec settings (a tool parameter set, a session
// override, an agent's config, the global config). Empty fields are unset and
// defer to the next layer.
type Settings struct {
	Host     Host     `json:"host,omitempty"`
	Security Security `json:"security,omitempty"`
	Ask      Ask      `json:"ask,omitempty"`
	Node     string   `json:"node,omitempty"`
}

// Resolve applies the spec's precedence to layers given from highest to
// lowest priority (tool param, session override, agent, global): for each
// field the first valid value wins, and the built-in default fills the rest.
// Invalid values are skipped rather than trusted, so a typo in one layer can
// only fall back to a lower layer, never widen anything by itself.
func Resolve(layers ...Settings) Settings {
	out := Settings{Host: DefaultHost, Security: DefaultSecurity, Ask: DefaultAsk}
	setH, setS, setA, setN := false, false, false, false
	for _, l := range layers {
		if !setH && l.Host.Valid() {
			out.Host, setH = l.Host, true
		}
		if !setS && l.Security.Valid() {
			out.Security, setS = l.Security, true
		}
		if !setA && l.Ask.Valid() {
			out.Ask, setA = l.Ask, true
		}
		if !setN && l.Node != "" {
			out.Node, setN = l.Node, true
		}
	}
	return out
}

// Local is an execution host's own policy, read from its exec-approvals.json
// (already resolved agent → "*" → defaults → built-in).
type Local struct {
	Security Security `json:"security"`
	Ask      Ask      `json:"ask"`
	Fallback Fallback `json:"askFallback"`
}

// Effective is the policy one command runs under on an execution host.
type Effective struct {
	Security Security `json:"security"`
	Ask      Ask      `json:"ask"`
	Fallback Fallback `json:"askFallback"`
}

// Combine merges what the caller requested with the execution host's own
// policy: security is the stricter of the two and ask the more asking, so a
// caller can tighten a host but never loosen it. An empty requested value
// places no constraint (a local run with no gateway in front of it).
func Combine(requestedSecurity Security, requestedAsk Ask, local Local) Effective {
	e := Effective(local)
	if !e.Security.Valid() {
		e.Security = DefaultSecurity
	}
	if !e.Ask.Valid() {
		e.Ask = DefaultAsk
	}
	if !e.Fallback.Valid() {
		e.Fallback = DefaultFallback
	}
	if requestedSecurity != "" {
		e.Security = Stricter(e.Security, requestedSecurity)
	}
	if requestedAsk != "" {
		e.Ask = MoreAsking(e.Ask, requestedAsk)
	}
	return e
}

// Outcome is what happens to a command.
type Outcome string

// Outcomes of a decision.
const (
	Allow    Outcome = "allow"
	AskHuman Outcome = "ask"
	DenyRun  Outcome = "deny"
)

// Machine-readable reasons. Scripts match on these prefixes; the text after
// a colon is detail for humans.
const (
	ReasonSecurityDeny     = "security=deny"
	ReasonSecurityFull     = "security=full"
	ReasonAllowlistMatch   = "allowlist-match"
	ReasonAllowlistMiss    = "allowlist-miss"
	ReasonAnalysisFailed   = "analysis-failed"
	ReasonAskAlways        = "ask=always"
	ReasonApprovalRequired = "approval-required"
	ReasonUserAllowed      = "user-approved"
	ReasonUserDenied       = "user-denied"
	ReasonFallbackFull     = "askFallback=full"
	ReasonFallbackList     = "askFallback=allowlist"
)

// Sentinel errors for denials, carrying the wire error strings of the
// design so every host reports a denial the same way. Test with errors.Is.
var (
	ErrDisabled         = errors.New("SYSTEM_RUN_DISABLED: security=deny")
	ErrAllowlistMiss    = errors.New("SYSTEM_RUN_DENIED: allowlist miss")
	ErrApprovalRequired = errors.New("SYSTEM_RUN_DENIED: approval required")
	ErrUserDenied       = errors.New("SYSTEM_RUN_DENIED: user denied")
)

// Input is everything the decision depends on.
type Input struct {
	Effective
	// AnalysisOK is false when the command text could not be analysed
	// precisely (substitution, redirection to a file, eval, …).
	AnalysisOK bool
	// AnalysisError says what made the analysis fail, for the reason text.
	AnalysisError string
	// AllowlistSatisfied is true when the analysis succeeded and every
	// executed command matched an allowlist pattern.
	AllowlistSatisfied bool
}

func (in Input) satisfied() bool { return in.AnalysisOK && in.AllowlistSatisfied }

func (in Input) missReason() string {
	if !in.AnalysisOK {
		what := in.AnalysisError
		if what == "" {
			what = "unknown construct"
		}
		return ReasonAnalysisFailed + ": " + what
	}
	return ReasonAllowlistMiss
}

// Decision is the result of Decide (and of applying an answer or a fallback
// to an ask). Err is set exactly when Outcome is DenyRun.
type Decision struct {
	Outcome Outcome `json:"decision"`
	Reason  string  `json:"reason"`
	Err     error   `json:"-"`
	// Setting names, for a denial, the setting that decided it (Setting*
	// constants): the one to change for another outcome. Empty when no
	// setting did (a requester that went away).
	Setting string `json:"setting,omitempty"`
}

// The settings that can decide a denial (Decision.Setting).
const (
	SettingSecurity = "security"    // security=deny
	SettingAsk      = "ask"         // security=allowlist with ask=off: a miss is denied
	SettingFallback = "askFallback" // no approver answered an ask
	SettingApprover = "approver"    // a human's answer
)

// Decide returns allow, ask or deny for one command on an execution host.
// It never returns allow for a command whose analysis failed unless security
// is full (the host has chosen to run everything).
func Decide(in Input) Decision {
	switch in.Security {
	case SecurityFull:
		if in.Ask == AskAlways {
			return Decision{Outcome: AskHuman, Reason: ReasonAskAlways}
		}
		if in.Ask.Valid() {
			return Decision{Outcome: Allow, Reason: ReasonSecurityFull}
		}
		return Decision{Outcome: AskHuman, Reason: ReasonAskAlways}
	case SecurityAllowlist:
		switch in.Ask {
		case AskOff:
			if in.satisfied() {
				return Decision{Outcome: Allow, Reason: ReasonAllowlistMatch}
			}
			return deny(SettingAsk, in.missReason(), ErrAllowlistMiss)
		case AskOnMiss:
			if in.satisfied() {
				return Decision{Outcome: Allow, Reason: ReasonAllowlistMatch}
			}
			return Decision{Outcome: AskHuman, Reason: in.missReason()}
		default: // always, or anything unknown
			return Decision{Outcome: AskHuman, Reason: ReasonAskAlways}
		}
	default: // deny, or anything unknown: fail closed
		return deny(SettingSecurity, ReasonSecurityDeny, ErrDisabled)
	}
}

func deny(setting, reason string, sentinel error) Decision {
	return Decision{Outcome: DenyRun, Reason: reason, Err: fmt.Errorf("%w (%s)", sentinel, reason), Setting: setting}
}

// Approval is a human's answer to a prompt.
type Approval string

// The answers an approver can give.
const (
	AllowOnce   Approval = "allow-once"
	AllowAlways Approval = "allow-always"
	Reject      Approval = "deny"
)

// approvals lists the valid answers (unexported: see hosts).
var approvals = []Approval{AllowOnce, AllowAlways, Reject}

// Approvals returns the valid answers, a fresh copy on every call.
func Approvals() []Approval { return slices.Clone(approvals) }

// ParseApproval parses an approver's answer.
func ParseApproval(s string) (Approval, error) {
	return parseEnum("decision", s, approvals)
}

// Valid reports whether a is one of Approvals.
func (a Approval) Valid() bool {
	_, err := ParseApproval(string(a))
	return err == nil && string(a) != ""
}

// Answer turns a human's answer to an ask into the final decision. by names
// who (or which UI) answered, for the reason text and the audit log.
func Answer(a Approval, by string) Decision {
	suffix := ""
	if by != "" {
		suffix = " by " + by
	}
	switch a {
	case AllowOnce, AllowAlways:
		return Decision{Outcome: Allow, Reason: ReasonUserAllowed + ": " + string(a) + suffix}
	default:
		return deny(SettingApprover, ReasonUserDenied+suffix, ErrUserDenied)
	}
}

// NoAnswer applies askFallback when a human should have been asked but no
// approver answered; why says what happened ("no approver reachable",
// "prompt timed out after 2m0s", …) and ends up in the reason so callers and
// the audit log can tell a fallback from a human decision.
func NoAnswer(in Input, why string) Decision {
	if why == "" {
		why = "no approver answered"
	}
	switch in.Fallback {
	case FallbackFull:
		return Decision{Outcome: Allow, Reason: ReasonFallbackFull + " (" + why + ")"}
	case FallbackAllowlist:
		if in.satisfied() {
			return Decision{Outcome: Allow, Reason: ReasonFallbackList + ": " + ReasonAllowlistMatch + " (" + why + ")"}
		}
		return deny(SettingFallback, ReasonFallbackList+": "+in.missReason()+" ("+why+")", ErrAllowlistMiss)
	default:
		return deny(SettingFallback, ReasonApprovalRequired+" (askFallback=deny: "+why+")", ErrApprovalRequired)
	}
}

// DenialCode is a denial's machine-readable reason, from its sentinel
// error, never from its text: ReasonSecurityDeny, ReasonAllowlistMiss (a
// miss, or a command the analysis could not vouch for), ReasonUserDenied
// or ReasonApprovalRequired; "" for a decision that is not a denial.
func DenialCode(d Decision) string {
	switch {
	case d.Outcome != DenyRun:
		return ""
	case errors.Is(d.Err, ErrDisabled):
		return ReasonSecurityDeny
	case errors.Is(d.Err, ErrAllowlistMiss):
		return ReasonAllowlistMiss
	case errors.Is(d.Err, ErrUserDenied):
		return ReasonUserDenied
	}
	return ReasonApprovalRequired
}
