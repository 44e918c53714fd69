package bridge

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// laidOutConn is a Conn whose handler checks node.invoke.result and
// node.event itself, as the gateway's node connections are.
func laidOutConn() *Conn {
	return &Conn{opts: Options{CheckedByHandler: func(name string) bool {
		return name == MethodInvokeResult || name == MethodNodeEvent
	}}}
}

// TestDecodeLaidOut checks that frames this build writes for the named
// methods and events are read without the decoder exactly as DecodeFrame
// reads them, and that anything else is left to DecodeFrame.
func TestDecodeLaidOut(t *testing.T) {
	c := laidOutConn()
	res, _ := NewRequest("17", MethodInvokeResult, InvokeResult{ID: "i-1", NodeID: "n", OK: true,
		Payload: json.RawMessage(`{"stdout":"a\n\"b\",\"method\":\"x\"\u003c","exitCode":0}`)})
	ev, _ := NewEvent(MethodNodeEvent, NodeEvent{Event: "exec.finished", Payload: json.RawMessage(`{"tail":",\"event\":\"y\",\"seq\":3"}`)}, 9)
	for _, f := range []Frame{res, ev} {
		data, err := f.appendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := c.decodeLaidOut(data)
		if !ok {
			t.Fatalf("%s: not read by its layout", data)
		}
		want, err := DecodeFrame(data)
		if err != nil {
			t.Fatal(err)
		}
		if !sameFrame(got, want) {
			t.Errorf("%s:\nlaid out %+v\ndecoded  %+v", data, got, want)
		}
	}
	other, _ := NewRequest("1", MethodExec, ExecParams{Command: "ls"})
	otherData, _ := other.appendJSON(nil)
	for _, in := range []string{
		string(otherData), // a name the handler does not check
		`{"type":"req","method":"node.invoke.result","id":"1","params":{}}`, // another order
		`{"type":"req","id":"1\"","method":"node.invoke.result","params":{}}`,
		`{"type":"req","id":"1","method":"node.invoke.result","params":{}} `,
		`{"type":"event","payload":{},"event":"node.event"}`, // no seq
		`{"type":"event","payload":{},"event":"node.event","seq":01}`,
		"{\"type\":\"req\",\"id\":\"1\",\"method\":\"node.invoke.result\",\"params\":\"\xff\"}",
		`{"type":"req","id":"","method":"node.invoke.result","params":{}}`,
	} {
		if f, ok := c.decodeLaidOut([]byte(in)); ok {
			t.Errorf("%s: read by its layout as %+v, want DecodeFrame to take it", in, f)
		}
	}
	if _, ok := (&Conn{}).decodeLaidOut(otherData); ok {
		t.Error("a connection without CheckedByHandler read a frame by its layout")
	}
}

// FuzzDecodeLaidOut checks that whatever decodeLaidOut accepts and leaves
// unchecked is either what DecodeFrame would make of the same bytes, or
// params or payload that are not JSON on their own — which the handler's
// Unmarshal then refuses. Nothing can be read as a different method,
// event, id or value than the decoder would read it.
func FuzzDecodeLaidOut(f *testing.F) {
	res, _ := NewRequest("17", MethodInvokeResult, InvokeResult{ID: "i", NodeID: "n", OK: true, Payload: json.RawMessage(`{"stdout":"x"}`)})
	ev, _ := NewEvent(MethodNodeEvent, NodeEvent{Event: "exec.started", Payload: json.RawMessage(`{"runId":"r"}`)}, 3)
	for _, fr := range []Frame{res, ev} {
		data, _ := fr.appendJSON(nil)
		f.Add(data)
	}
	f.Add([]byte(`{"type":"req","id":"1","method":"node.invoke.result","params":{},"method":"exec"}`))
	f.Add([]byte(`{"type":"event","payload":{},"event":"exec","seq":1,"event":"node.event","seq":2}`))
	c := laidOutConn()
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := c.decodeLaidOut(data)
		if !ok {
			return
		}
		raw := got.Params
		if got.Type == TypeEvent {
			raw = got.Payload
		}
		// The handler reads with the wire's options: duplicate names
		// anywhere in the value are refused, as RFC 7493 has it.
		if !jsontext.Value(raw).IsValid() {
			return // the handler's Unmarshal refuses it
		}
		want, err := DecodeFrame(data)
		if err != nil {
			t.Fatalf("%q read by its layout as %+v, but DecodeFrame refuses it: %v", data, got, err)
		}
		if !sameFrame(got, want) {
			t.Fatalf("%q:\nlaid out %+v\ndecoded  %+v", data, got, want)
		}
	})
}

// sameFrame compares frames, their raw params and payload as compact JSON.
func sameFrame(a, b Frame) bool {
	compact := func(r json.RawMessage) string {
		var buf bytes.Buffer
		if len(r) > 0 && json.Compact(&buf, r) != nil {
			return "invalid:" + string(r)
		}
		return buf.String()
	}
	return a.Type == b.Type && a.ID == b.ID && a.Method == b.Method && a.Event == b.Event && a.Seq == b.Seq &&
		compact(a.Params) == compact(b.Params) && compact(a.Payload) == compact(b.Payload)
}
