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

// ErrorHint returns the hint (Hinter).
func (e *Error) ErrorHint() string { return e.Hint }

// Hinter is an error that knows its hint: *Error, and error types that keep
// it as a field of their own (a parse error, an analysis failure).
type Hinter interface {
	error
	ErrorHint() string
}

// Of returns the hint of the outermost error in err's chain that has one
// (a Hinter with a non-empty hint), or "".
func Of(err error) string {
	for err != nil {
		var h Hinter
		if !errors.As(err, &h) {
			return ""
		}
		if s := h.ErrorHint(); s != "" {
			return s
		}
		err = errors.Unwrap(h)
	}
	return ""
}
