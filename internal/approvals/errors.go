package approvals

import (
	"errors"
	"fmt"
)

// Sentinel errors. Test with errors.Is; the returned errors wrap them with
// the path and a hint.
var (
	// ErrStale is returned by UpdateIf when the file changed since the
	// caller read it, so an editor never overwrites someone else's change.
	ErrStale = errors.New("approvals file changed since it was read")
	// ErrSymlink is returned when the approvals file is a symlink: writing
	// would replace the link (or, elsewhere, write through it), so the store
	// refuses and lets the user decide.
	ErrSymlink = errors.New("approvals file is a symlink")
	// ErrForeignOwner is returned when the file or its directory belongs to
	// another user, who could otherwise plant policy for us.
	ErrForeignOwner = errors.New("owned by another user")
	// ErrUnsupportedVersion is wrapped by a ParseError when the file declares
	// a schema version this exechost does not know. Loading it anyway could
	// silently drop a newer file's restrictions.
	ErrUnsupportedVersion = errors.New("unsupported version")
)

// ParseError is a file that cannot be used as written: invalid JSON, a value
// of the wrong type, a duplicate key or an unsupported version. Line and Col
// are 1-based (Col counts bytes) and point at the offending token. The store
// never overwrites such a file.
type ParseError struct {
	Path      string
	Line, Col int
	Err       error
}

// Error returns "parse PATH:LINE:COL: WHAT (hint: …)", the form editors
// and terminals turn into a link.
func (e *ParseError) Error() string {
	return fmt.Sprintf("parse %s:%d:%d: %v (hint: %s)", e.Path, e.Line, e.Col, e.Err, e.ErrorHint())
}

// ErrorHint is what to do about it (hint.Hinter).
func (e *ParseError) ErrorHint() string {
	if errors.Is(e.Err, ErrUnsupportedVersion) {
		return "this file was written by a newer exechost; upgrade, or move the file aside; exechost will not overwrite it"
	}
	return "fix the JSON or move the file aside; exechost will not overwrite it"
}

// Unwrap returns the underlying error.
func (e *ParseError) Unwrap() error { return e.Err }
