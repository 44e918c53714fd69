package bridge

import (
	"errors"

	"github.com/exechost/exechost/internal/hint"

	"github.com/exechost/exechost/internal/policy"
)

// Wirer is an error that knows its own wire form: host.DenialError (the
// denial with its structured Denial) and the errors CodedError builds.
type Wirer interface {
	Wire() *Error
}

// AsError is the one mapping from any error to its wire error, used by
// every execution host (gateway, node, approver exec host) and every
// answer the gateway sends, so the same failure gets the same code
// everywhere:
//
//   - an *Error passes through unchanged;
//   - an error that implements Wirer answers with its Wire();
//   - an error wrapping a policy denial sentinel (policy.ErrDisabled, …) is
//     CodeDenied with the design's SYSTEM_RUN_* message and the reason;
//   - everything else is CodeInternal with the error's text.
//
// Nothing is recognised by its text.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var w Wirer
	if errors.As(err, &w) {
		if e := w.Wire(); e != nil {
			return e
		}
	}
	if r := DenialReason(err); r != "" {
		return &Error{Code: CodeDenied, Message: err.Error(), Denial: &Denial{Reason: r}, Hint: hint.Of(err)}
	}
	return &Error{Code: CodeInternal, Message: err.Error(), Hint: hint.Of(err)}
}

// CodedError gives an error a wire code while keeping it in the chain
// (errors.Is still finds runner.ErrDangerousEnv under an invalid request).
// Its wire message is the error's text.
type CodedError struct {
	Code string
	Err  error
}

func (e *CodedError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *CodedError) Unwrap() error { return e.Err }

// Wire implements Wirer.
func (e *CodedError) Wire() *Error {
	return &Error{Code: e.Code, Message: e.Err.Error(), Hint: hint.Of(e.Err)}
}

// InvalidRequest marks err as a fault of the request (a relative cwd, a
// refused env name, an empty command, a bad timeout): CodeInvalidRequest on
// the wire. It is applied where the request is validated.
func InvalidRequest(err error) error { return &CodedError{Code: CodeInvalidRequest, Err: err} }

// Unavailable marks err as "the target cannot take the request now" (an
// unreachable approver exec host under execFallback=deny):
// CodeUnavailable on the wire.
func Unavailable(err error) error { return &CodedError{Code: CodeUnavailable, Err: err} }

// The design's denial reasons, as they follow "SYSTEM_RUN_…: " in a
// denial's message (Denial.Reason).
const (
	ReasonDisabled         = "security=deny"
	ReasonAllowlistMiss    = "allowlist miss"
	ReasonApprovalRequired = "approval required"
	ReasonUserDenied       = "user denied"
)

// denialReasons maps each policy sentinel to its reason.
var denialReasons = []struct {
	err    error
	reason string
}{
	{policy.ErrDisabled, ReasonDisabled},
	{policy.ErrAllowlistMiss, ReasonAllowlistMiss},
	{policy.ErrApprovalRequired, ReasonApprovalRequired},
	{policy.ErrUserDenied, ReasonUserDenied},
}

// DenialReason returns the design's reason for the policy sentinel err
// wraps ("allowlist miss", …), or "" when it wraps none.
func DenialReason(err error) string {
	for _, r := range denialReasons {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	return ""
}
