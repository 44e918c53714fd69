// Package hint attaches what to do about an error to the error itself, as
// a field: Wrap(err, "start one with `exechost gateway`") reads as
// "… (hint: start one with `exechost gateway`)", and Of finds the hint
// again anywhere up the chain, so a caller that reports errors as data
// (the CLI's --json, the wire's error object) never cuts it out of the
// message.
//
// It is a leaf: it imports only the standard library.
package hint

import "errors"

// Error is an error with a hint.
type Error struct {
	Err  error
	Hint string
}

// Error is the wrapped error's text, then the hint in parentheses.
func (e *Error) Error() string { return e.Err.Error() + " (hint: " + e.Hint + ")" }

// Unwrap returns the wrapped error.
func (e *Error) Unwrap() error { return e.Err }

// Wrap returns err with hint; a nil err stays nil and an empty hint adds
// nothing.
func Wrap(err error, hint string) error {
	if err == nil || hint == "" {
		return err
	}
	return &Error{Err: err, Hint: hint}
}

// Of returns the hint of the outermost error in err's chain that has one,
// or "".
func Of(err error) string {
	var h *Error
	if errors.As(err, &h) {
		return h.Hint
	}
	return ""
}
