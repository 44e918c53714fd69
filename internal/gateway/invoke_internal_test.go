package gateway

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/exechost/exechost/internal/bridge"
)

// TestDecodeRunResult checks the one-pass decoding of a node's system.run
// answer against the general path (InvokeResult, then its payload), and
// that anything it cannot vouch for is refused or left to the general path.
func TestDecodeRunResult(t *testing.T) {
	want := bridge.SystemRunResult{ExitCode: 3, Stdout: "out \u2028 <x>\n", Stderr: "err", Truncated: true, Error: "e"}
	payload, _ := json.Marshal(want)
	ok := bridge.InvokeResult{ID: "abc-1", NodeID: "n1", OK: true, Payload: payload}
	line, err := bridge.NewRequest("1", bridge.MethodInvokeResult, ok)
	if err != nil {
		t.Fatal(err)
	}
	params := []byte(line.Params)
	id, found := peekInvokeID(params)
	if !found || id != "abc-1" {
		t.Fatalf("peekInvokeID = %q, %v", id, found)
	}
	r, err := decodeRunResult(params, id)
	if err != nil {
		t.Fatal(err)
	}
	if r.run == nil || !r.res.OK || r.res.NodeID != "n1" {
		t.Fatalf("decodeRunResult = %+v", r)
	}
	if d := cmp.Diff(want, *r.run, cmpopts.IgnoreFields(bridge.SystemRunResult{}, "Wire")); d != "" {
		t.Errorf("decoded result (-want +got):\n%s", d)
	}

	failed := bridge.InvokeResult{ID: "abc-2", NodeID: "n1", Error: &bridge.Error{Code: bridge.CodeDenied, Message: "no"}}
	fp, _ := json.Marshal(failed)
	if r, err := decodeRunResult(fp, "abc-2"); err != nil || r.run != nil || r.res.OK || r.res.Error.Code != bridge.CodeDenied {
		t.Errorf("failed answer = %+v, %v", r, err)
	}
	for name, bad := range map[string]string{
		"ok without payload": `{"id":"x","nodeId":"n","ok":true}`,
		"null payload":       `{"id":"x","nodeId":"n","ok":true,"payload":null}`,
		"payload not object": `{"id":"x","nodeId":"n","ok":true,"payload":"s"}`,
		"id differs":         `{"id":"x","nodeId":"n","ok":true,"id":"y","payload":{}}`,
	} {
		if _, err := decodeRunResult([]byte(bad), "x"); err == nil {
			t.Errorf("%s: accepted %s", name, bad)
		}
	}
	for _, other := range []string{`{"nodeId":"n","id":"x"}`, `{"id":"a\"b"}`, ` {"id":"x"}`, `{"id":""}`} {
		if id, ok := peekInvokeID([]byte(other)); ok {
			t.Errorf("peekInvokeID(%s) = %q; want the general path", other, id)
		}
	}
}

// FuzzDecodeRunResult feeds node answers to the one-pass decoder: it must
// never panic, and whatever it accepts the general path (InvokeResult, then
// its payload) must read the same way.
func FuzzDecodeRunResult(f *testing.F) {
	f.Add([]byte(`{"id":"a","nodeId":"n","ok":true,"payload":{"exitCode":1,"stdout":"x"}}`))
	f.Add([]byte(`{"id":"a","nodeId":"n","ok":false,"error":{"code":"DENIED","message":"m"}}`))
	f.Add([]byte(`{"id":"a","ok":true,"payload":null}`))
	f.Add([]byte(`{"id":"a","nodeId":"n","ok":true,"payload":{"stdout":"\u0041\n","stderr":"\ud800 \\"}}`))
	f.Fuzz(func(t *testing.T, params []byte) {
		id, ok := peekInvokeID(params)
		if !ok {
			return
		}
		r, err := decodeRunResult(params, id)
		if err != nil {
			return
		}
		var gen bridge.InvokeResult
		// bridge.Unmarshal is the general path invokeResult takes: exact
		// names, no duplicates (encoding/json would match "Id" to id).
		if err := bridge.Unmarshal(params, &gen); err != nil {
			t.Fatalf("one-pass accepted what the general path refuses: %v: %q", err, params)
		}
		if gen.ID != r.res.ID || gen.OK != r.res.OK {
			t.Fatalf("one-pass read %+v, general %+v: %q", r.res, gen, params)
		}
		// A payload key given twice is merged by the one-pass decoder and
		// replaced by the general one; only a node that forges its own
		// answers writes that, and it controls those anyway.
		if r.run == nil || bytes.Count(params, []byte(`payload`)) > 1 {
			return
		}
		var want bridge.SystemRunResult
		if err := bridge.Unmarshal(gen.Payload, &want); err != nil {
			t.Fatalf("general path cannot decode the payload one-pass accepted: %v: %q", err, params)
		}
		if d := cmp.Diff(want, *r.run, cmpopts.IgnoreFields(bridge.SystemRunResult{}, "Wire")); d != "" {
			t.Fatalf("payloads differ (-general +one-pass):\n%s\n%q", d, params)
		}
		// Passed on to the agent (the output's JSON spliced in as it
		// came), the result reads as the general path's text.
		out, err := bridge.NewResult("1", bridge.ExecResult{Status: bridge.ExecCompleted, SystemRunResult: *r.run})
		if err != nil {
			t.Fatal(err)
		}
		var back bridge.ExecResult
		if err := bridge.Unmarshal(out.Payload, &back); err != nil {
			t.Fatalf("the exec result passed on does not decode: %v: %s", err, out.Payload)
		}
		if d := cmp.Diff(want, back.SystemRunResult, cmpopts.IgnoreFields(bridge.SystemRunResult{}, "Wire")); d != "" {
			t.Fatalf("agent reads (-general +passed on):\n%s\n%q", d, params)
		}
	})
}
