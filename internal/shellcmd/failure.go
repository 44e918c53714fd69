package shellcmd

import (
	"fmt"

	"mvdan.cc/sh/v3/syntax"
)

// Failure is why an analysis failed (as opposed to a miss), kept in parts
// so that a caller reads the construct and its position from fields and
// never from the message (explain fills a denial with them). Its Error is
// the message users read: What, " at LINE:COL" when the position is known,
// Detail, then " (hint: Hint)" when there is a hint.
type Failure struct {
	// What names what the analysis could not see through ("command
	// substitution $(…)", "eval runs its arguments as shell text").
	What string
	// Line and Col locate it in the command text (1-based); both are 0
	// when the failure has no position. Inside a shell payload (sh -c) they
	// count within the payload.
	Line, Col uint
	// Detail continues the sentence after the position, with its leading
	// space or comma (" reads or writes a file (…)"); "" when nothing does.
	Detail string
	// Hint says what to write instead; "" when there is none.
	Hint string
}

// Error returns the message as users read it.
func (f *Failure) Error() string {
	s := f.What
	if p := f.Position(); p != "" {
		s += " at " + p
	}
	s += f.Detail
	if f.Hint != "" {
		s += " (hint: " + f.Hint + ")"
	}
	return s
}

// ErrorHint returns Hint (hint.Hinter).
func (f *Failure) ErrorHint() string { return f.Hint }

// Construct is the failure without its position and hint: what no
// allowlist pattern can allow, as a denial names it.
func (f *Failure) Construct() string { return f.What + f.Detail }

// Position is "line:col", or "" when the failure has no position.
func (f *Failure) Position() string {
	if f.Line == 0 {
		return ""
	}
	return fmt.Sprintf("%d:%d", f.Line, f.Col)
}

// failf starts a failure whose What is formatted; hint and at add the
// other parts.
func failf(format string, args ...any) *Failure {
	return &Failure{What: fmt.Sprintf(format, args...)}
}

// hint sets the failure's hint, formatted.
func (f *Failure) hint(format string, args ...any) *Failure {
	f.Hint = fmt.Sprintf(format, args...)
	return f
}

// at places the failure at p (nowhere when p is not valid), with detail
// continuing the sentence after the position.
func (f *Failure) at(p syntax.Pos, detail string) *Failure {
	if p.IsValid() {
		f.Line, f.Col = p.Line(), p.Col()
	}
	f.Detail = detail
	return f
}

// failureOf returns err as a *Failure: itself when it is one, else a
// failure whose What is err's whole message. (Not errors.As: a failure
// wrapped with more words would lose them.)
func failureOf(err error) *Failure {
	if f, ok := err.(*Failure); ok {
		return f
	}
	return &Failure{What: err.Error()}
}

// within prefixes a failure found inside a shell payload with where it
// was found ("in sh -c payload: "), keeping its position and hint.
func within(prefix string, err error) *Failure {
	f := *failureOf(err)
	f.What = prefix + f.What
	return &f
}

// Builtin is a builtin the interpreter runs itself (no allowlist entry
// needed) and where it is in the command text.
type Builtin struct {
	// Name is the builtin's name ("cd", "echo").
	Name string `json:"name"`
	// Line and Col locate it (1-based); 0 when unknown. Inside a shell
	// payload they count within the payload.
	Line uint `json:"line,omitempty"`
	Col  uint `json:"col,omitempty"`
}

// String is "name at line:col" (or the name alone when the position is
// not known), as `exechost approvals check` prints it.
func (b Builtin) String() string {
	if b.Line == 0 {
		return b.Name
	}
	return fmt.Sprintf("%s at %d:%d", b.Name, b.Line, b.Col)
}

// builtinAt is the builtin name run at p.
func builtinAt(name string, p syntax.Pos) Builtin {
	b := Builtin{Name: name}
	if p.IsValid() {
		b.Line, b.Col = p.Line(), p.Col()
	}
	return b
}
