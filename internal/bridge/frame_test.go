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
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(Frame{})); diff != "" {
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
	// A wire type handed to NewRequest, NewResult or NewEvent is written
	// straight into the frame: the bytes must be those of the frame with
	// its params or payload marshalled first.
	run := SystemRunResult{ExitCode: 3, Stdout: "a\nb \"<q>\" \u2028", Stderr: "e", Truncated: true, DroppedBytes: 9}
	for _, tt := range []struct {
		name string
		make func(v any) (Frame, error)
		v    any
	}{
		{"request", func(v any) (Frame, error) { return NewRequest("9", MethodInvokeResult, v) }, InvokeResult{ID: "i", NodeID: "n", OK: true, Payload: json.RawMessage(`{"stdout":"x\ny"}`)}},
		{"result", func(v any) (Frame, error) { return NewResult("9", v) }, ExecResult{Status: "completed", Host: "node", SystemRunResult: SystemRunResult{Stdout: "a\nb", Stderr: "c"}, Events: []SystemEvent{{Text: "x"}}}},
		{"run result", func(v any) (Frame, error) { return NewResult("9", v) }, run},
		{"event", func(v any) (Frame, error) { return NewEvent("node.event", v, 4) }, NodeEvent{Event: "exec.finished", Payload: json.RawMessage(`{"tail":"t"}`)}},
	} {
		f, err := tt.make(tt.v)
		if err != nil {
			t.Fatal(err)
		}
		if f.body == nil {
			t.Errorf("%s: the frame does not carry its %T to write itself", tt.name, tt.v)
		}
		raw, err := Marshal(tt.v)
		if err != nil {
			t.Fatal(err)
		}
		plain := f
		plain.body = nil
		if f.Type == TypeReq {
			plain.Params = raw
		} else {
			plain.Payload = raw
		}
		want, _ := Marshal(plain)
		got, err := f.appendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: appendJSON = %s\nwant          %s", tt.name, got, want)
		}
	}
	// A node's answer with a run result written into its frame: the bytes
	// of the answer with the result marshalled into Payload first.
	inv, err := InvokeOK(run)
	if err != nil || inv.run == nil || inv.Held() != len(run.Stdout)+len(run.Stderr) {
		t.Fatalf("InvokeOK(%T) = %+v, %v: not kept to write itself", run, inv, err)
	}
	inv.ID, inv.NodeID = "i", "n"
	plainInv := inv
	plainInv.run = nil
	plainInv.Payload, _ = Marshal(run)
	want, _ := Marshal(plainInv)
	if got := inv.appendWire(nil); string(got) != string(want) {
		t.Errorf("InvokeOK's appendWire = %s\nwant                  %s", got, want)
	}
	if inv, err := InvokeOK(WhichResult{Bins: map[string]string{"a": "/b"}}); err != nil || inv.run != nil || inv.Held() != len(inv.Payload) || string(inv.Payload) != `{"bins":{"a":"/b"}}` {
		t.Errorf("InvokeOK of a plain value = %+v, %v", inv, err)
	}
	if _, err := NewResult("1", json.RawMessage(`1,"ok":false`)); err == nil {
		t.Error("NewResult accepted raw JSON that would forge a frame field")
	}
}
