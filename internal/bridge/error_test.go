package bridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestErrorfKeepsTheChain: an *Error made with %w answers errors.Is and
// errors.As for what it wrapped in this process, with the message %v would
// give; the wire carries code and message only, and a decoded *Error wraps
// nothing.
func TestErrorfKeepsTheChain(t *testing.T) {
	errStale := errors.New("the file changed since it was read")
	inner := &CodedError{Code: CodeUnavailable, Err: errStale}
	e := Errorf(CodeStale, "set approvals: %w", fmt.Errorf("store: %w", inner))
	if !errors.Is(e, errStale) {
		t.Errorf("errors.Is(Errorf(%%w), sentinel) = false: %v", e)
	}
	var ce *CodedError
	if !errors.As(e, &ce) || ce != inner {
		t.Errorf("errors.As lost the wrapped *CodedError")
	}
	if want := "set approvals: store: " + errStale.Error(); e.Message != want {
		t.Errorf("message %q, want %q", e.Message, want)
	}
	if got := AsError(e); got != e {
		t.Errorf("AsError = %+v, want the outer *Error (code %s)", got, e.Code)
	}
	if v := Errorf(CodeStale, "%v", errStale); errors.Is(v, errStale) || v.Unwrap() != nil {
		t.Errorf("%%v wraps: %v", v)
	}
	raw, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "ause") || string(raw) != `{"code":"STALE","message":"set approvals: store: the file changed since it was read"}` {
		t.Errorf("wire form %s", raw)
	}
	var back Error
	if err := Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if back.Unwrap() != nil || back.Code != CodeStale || back.Message != e.Message {
		t.Errorf("decoded %+v", back)
	}
}
