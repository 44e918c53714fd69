package gateway

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/runner"
)

// TestDecodeRunResult checks the one-pass decoding of a node's system.run
// answer against the general path (InvokeResult, then its payload), and
// that anything it cannot vouch for is refused or left to the general path.
func TestDecodeRunResult(t *testing.T) {
	want := runner.Result{ExitCode: 3, Stdout: "out \u2028 <x>\n", Stderr: "err", Truncated: true, Error: "e"}
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
	if d := cmp.Diff(want, *r.run); d != "" {
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
