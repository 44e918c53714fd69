package hint_test

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/exechost/exechost/internal/hint"
)

// TestHint: the text reads as it always did, the chain still reaches the
// cause, and Of finds the outermost hint however deep it was attached.
func TestHint(t *testing.T) {
	err := hint.Wrap(fmt.Errorf("open x: %w", fs.ErrNotExist), "create it first")
	if got, want := err.Error(), "open x: file does not exist (hint: create it first)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Error("the cause is no longer in the chain")
	}
	outer := fmt.Errorf("load: %w", err)
	if got := hint.Of(outer); got != "create it first" {
		t.Errorf("Of(wrapped) = %q", got)
	}
	if got := hint.Of(hint.Wrap(outer, "outer")); got != "outer" {
		t.Errorf("Of = %q, want the outermost hint", got)
	}
	if hint.Of(errors.New("plain (hint: not one)")) != "" {
		t.Error("Of read a hint out of the text")
	}
	if got := hint.Of(fmt.Errorf("load: %w", ownHint{})); got != "its own" {
		t.Errorf("Of(a Hinter of another type) = %q", got)
	}
	if got := hint.Of(hint.Wrap(ownHint{empty: true}, "outer")); got != "outer" {
		t.Errorf("Of = %q: an empty hint is none", got)
	}
	if got := hint.Of(fmt.Errorf("x: %w", ownHint{empty: true, inner: hint.Wrap(errors.New("y"), "inner")})); got != "inner" {
		t.Errorf("Of = %q: past an empty hint the chain goes on", got)
	}
	if hint.Wrap(nil, "x") != nil {
		t.Error("Wrap(nil) is not nil")
	}
	plain := errors.New("plain")
	if hint.Wrap(plain, "") != plain {
		t.Error("an empty hint changed the error")
	}
}

// ownHint keeps its hint as a field of its own, as a parse error does.
type ownHint struct {
	empty bool
	inner error
}

func (o ownHint) Error() string { return "own" }
func (o ownHint) Unwrap() error { return o.inner }
func (o ownHint) ErrorHint() string {
	if o.empty {
		return ""
	}
	return "its own"
}
