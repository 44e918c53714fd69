package bridge

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// strictSeeds are requests a loose decoder reads as something else than
// what a check on exact keys saw.
var strictSeeds = []string{
	`{"command":"true","agentId":"a"}`,
	`{"command":"true","agentid":"main"}`,
	`{"command":"true","AgentId":"main"}`,
	`{"command":"true","agentId":"a","agentId":"main"}`,
	`{"command":"true","agentId":"a","agent\u0049d":"main"}`,
	`{"command":"true","env":{"A":"1","A":"2"}}`,
	`{"command":"true","comand":"rm"}`,
	`{"command":"t\ud800"}`,
	`{"runId":"r","sessionKey":"s"}`,
	`{"text":"/exec security=full","agentId":""}`,
}

// FuzzUnmarshalRequest holds UnmarshalRequest to the typed structs: what
// it accepts has no duplicate name at any depth and only the struct's
// own field names, exactly spelt, at the top; and encoding/json (the
// loosest reader any peer could have) reads the same value from it, so
// no check and handler can disagree about what a request says.
func FuzzUnmarshalRequest(f *testing.F) {
	for _, s := range strictSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkStrict[ExecParams](t, data)
		checkStrict[ExecStatusParams](t, data)
		checkStrict[SessionParams](t, data)
		checkStrict[SessionCommandParams](t, data)
	})
}

func checkStrict[T any](t *testing.T, data []byte) {
	var strict T
	if UnmarshalRequest(data, &strict) != nil {
		return
	}
	if !jsontext.Value(data).IsValid() {
		t.Fatalf("accepted %q, which holds a duplicate name or is not valid JSON", data)
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) == nil && top != nil {
		names := jsonNames(reflect.TypeFor[T]())
		for k := range top {
			if !names[k] {
				t.Fatalf("accepted %q with member %q, not a field of %T", data, k, strict)
			}
		}
	}
	var loose T
	if err := json.Unmarshal(data, &loose); err != nil {
		t.Fatalf("accepted %q, which encoding/json refuses: %v", data, err)
	}
	if !reflect.DeepEqual(strict, loose) {
		t.Fatalf("%q: UnmarshalRequest reads %+v, encoding/json %+v", data, strict, loose)
	}
}

// jsonNames is the set of JSON names of a struct's fields.
func jsonNames(rt reflect.Type) map[string]bool {
	out := map[string]bool{}
	for i := range rt.NumField() {
		f := rt.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			for k := range jsonNames(f.Type) {
				out[k] = true
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = true
	}
	return out
}

// TestUnmarshalRequestRefuses: each loose reading is refused with an
// error that names the member; the plain request is read.
func TestUnmarshalRequestRefuses(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"command":"true","agentid":"main"}`, `"agentid"`},
		{`{"command":"true","AgentId":"main"}`, `"AgentId"`},
		{`{"command":"true","agentId":"a","agentId":"main"}`, `duplicate`},
		{`{"command":"true","agentId":"a","agent\u0049d":"main"}`, `duplicate`},
		{`{"command":"true","env":{"A":"1","A":"2"}}`, `duplicate`},
		{`{"command":"true","comand":"rm"}`, `"comand"`},
		{`{"command":"t\ud800"}`, `surrogate`},
	} {
		var p ExecParams
		err := UnmarshalRequest([]byte(tc.in), &p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("UnmarshalRequest(%s) = %v, want an error naming %s", tc.in, err, tc.want)
		}
		// Control: encoding/json takes each of them.
		var loose ExecParams
		if err := json.Unmarshal([]byte(tc.in), &loose); err != nil {
			t.Errorf("control: encoding/json refuses %s too (%v): not a loose reading", tc.in, err)
		}
	}
	var p ExecParams
	if err := UnmarshalRequest([]byte(`{"command":"true","agentId":"a","env":{"A":"1"}}`), &p); err != nil || p.AgentID != "a" || p.Env["A"] != "1" {
		t.Fatalf("plain request: %+v, %v", p, err)
	}
}
