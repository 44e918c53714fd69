package bridge

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeFrame(t *testing.T) {
	tru, fal := true, false
	tests := []struct {
		name string
		in   string
		want Frame
		bad  bool
	}{
		{"req", `{"type":"req","id":"1","method":"exec","params":{"command":"ls"}}`,
			Frame{Type: TypeReq, ID: "1", Method: "exec", Params: json.RawMessage(`{"command":"ls"}`)}, false},
		{"res ok", `{"type":"res","id":"1","ok":true,"payload":1}`,
			Frame{Type: TypeRes, ID: "1", OK: &tru, Payload: json.RawMessage(`1`)}, false},
		{"res error", `{"type":"res","id":"1","ok":false,"error":{"code":"X","message":"m"}}`,
			Frame{Type: TypeRes, ID: "1", OK: &fal, Error: &Error{Code: "X", Message: "m"}}, false},
		{"event", `{"type":"event","event":"e","payload":{},"seq":3}`,
			Frame{Type: TypeEvent, Event: "e", Payload: json.RawMessage(`{}`), Seq: 3}, false},
		{"req without id", `{"type":"req","method":"exec"}`, Frame{}, true},
		{"req without method", `{"type":"req","id":"1"}`, Frame{}, true},
		{"res without ok", `{"type":"res","id":"1"}`, Frame{}, true},
		{"failed res without error", `{"type":"res","id":"1","ok":false}`, Frame{}, true},
		{"event without name", `{"type":"event"}`, Frame{}, true},
		{"unknown type", `{"type":"hello"}`, Frame{}, true},
		{"not json", `hello`, Frame{}, true},
		{"trailing", `{"type":"event","event":"e"} {}`, Frame{}, true},
		{"array", `[]`, Frame{}, true},
		{"bad utf8", "{\"type\":\"event\",\"event\":\"\xff\"}", Frame{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeFrame([]byte(tt.in))
			if tt.bad {
				if !errors.Is(err, ErrBadFrame) {
					t.Fatalf("DecodeFrame(%s) = %v, want ErrBadFrame", tt.in, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeFrame(%s): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("DecodeFrame(%s) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

// TestAppendJSONMatchesMarshal checks that the frame encoder that splices
// params and payload gives exactly Marshal's bytes (the wire encoder), and
// that InvokeResult's and NodeEvent's do too.
func TestAppendJSONMatchesMarshal(t *testing.T) {
	tru, fal := true, false
	frames := []Frame{
		{Type: TypeReq, ID: "1", Method: "exec", Params: json.RawMessage(`{"command":"echo \u003cb\u003e \"x\""}`)},
		{Type: TypeRes, ID: "7", OK: &tru, Payload: json.RawMessage(`{"stdout":"a\nb"}`)},
		{Type: TypeRes, ID: "8", OK: &fal, Error: &Error{Code: CodeDenied, Message: "no <way> & \"never\""}},
		{Type: TypeEvent, Event: "node.invoke.request", Payload: json.RawMessage(`[1,2]`), Seq: 42},
		{Type: TypeEvent, Event: "e\u2028\xff"},
	}
	for _, f := range frames {
		want, err := Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.appendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("appendJSON = %s\nwant          %s", got, want)
		}
	}
	for _, r := range []InvokeResult{
		{ID: "i", NodeID: "n", OK: true, Payload: json.RawMessage(`{"stdout":"x"}`)},
		{ID: "i", NodeID: "n", Error: &Error{Code: "X", Message: "m"}},
	} {
		want, _ := Marshal(r)
		if got := r.appendWire(nil); string(got) != string(want) {
			t.Errorf("appendWire = %s\nwant         %s", got, want)
		}
	}
	for _, e := range []NodeEvent{
		{Event: "exec.finished", Payload: json.RawMessage(`{"tail":"a\nb"}`)},
		{Event: "e\u2028<"},
	} {
		want, _ := Marshal(e)
		if got := e.appendWire(nil); string(got) != string(want) {
			t.Errorf("appendWire = %s\nwant         %s", got, want)
		}
	}
	if _, err := NewResult("1", json.RawMessage(`1,"ok":false`)); err == nil {
		t.Error("NewResult accepted raw JSON that would forge a frame field")
	}
}
