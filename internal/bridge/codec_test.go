package bridge

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// handlerChecked is the codec of a connection whose handler checks
// node.invoke.result and node.event itself, as the gateway's node
// connections are.
func handlerChecked() Codec {
	return NewCodec(func(name string) bool { return name == MethodInvokeResult || name == MethodNodeEvent })
}

// ignoreWire leaves out the JSON a result read through KeepingWire keeps
// beside its text (checked by what it encodes to instead).
var ignoreWire = cmpopts.IgnoreFields(SystemRunResult{}, "Wire")

// codecSeeds are the inputs FuzzCodec starts from besides its corpus in
// testdata/fuzz/FuzzCodec (which holds the findings of the per-path fuzz
// targets it replaced): frames of every type as this build writes them,
// the layouts each fast path reads and near misses of them, strings for
// the quoting and unquoting paths.
func codecSeeds() [][]byte {
	var out [][]byte
	add := func(s string) { out = append(out, []byte(s)) }
	for _, s := range []string{
		// frames
		`{"type":"req","id":"1","method":"exec","params":{"command":"ls"}}`,
		`{"type":"res","id":"1","ok":false,"error":{"code":"X","message":"m"}}`,
		`{"type":"event","event":"node.invoke.request","payload":{"id":"a"},"seq":1}`,
		`{"type":"res","id":"1","ok":true}`,
		`{"type":"res","id":"1","ok":true,"payload":{"stdout":"a\nb","exitCode":0}}`,
		`{"type":"res","id":"1","ok":true,"payload":null}`,
		`{"type":"res","id":"1","ok":true,"error":{"code":"X","message":"m","x":{},"payload":{}}}`,
		`{"type":"res","id":"1","ok":true,"payload":{"stdout":"x"},"payload":{"stdout":"y"}}`,
		`{"type":"res","id":"1","ok":true,"payload":{"status":"completed","stdout":"\ud83d\ude00 \ud800","stderr":null}}`,
		`{"type":"res","ok":true,"payload":{}} x`,
		// laid out requests and events, and near misses
		`{"type":"req","id":"1","method":"node.invoke.result","params":{},"method":"exec"}`,
		`{"type":"event","payload":{},"event":"exec","seq":1,"event":"node.event","seq":2}`,
		`{"type":"req","method":"node.invoke.result","id":"1","params":{}}`,
		`{"type":"event","payload":{},"event":"node.event","seq":01}`,
		`{"type":"event","payload":{"tail":",\"event\":\"y\",\"seq\":3"},"event":"node.event","seq":9}`,
		`{"type":"event","payload":{"a":1,"a":2},"event":"node.event","seq":1}`,
		"{\"type\":\"req\",\"id\":\"1\",\"method\":\"node.invoke.result\",\"params\":\"\xff\"}",
		"{\"type\":\"event\",\"payload\":{\"tail\":\"\xfe\"},\"event\":\"node.event\",\"seq\":1}",
		`{"type":"req","id":"","method":"node.invoke.result","params":{}}`,
		`{"type":"req","id":"1","method":"node.invoke.result","params":{}} `,
		// system.run answers
		`{"id":"a","nodeId":"n","ok":true,"payload":{"exitCode":1,"stdout":"x"}}`,
		`{"id":"a","nodeId":"n","ok":false,"error":{"code":"DENIED","message":"m"}}`,
		`{"id":"a","ok":true,"payload":null}`,
		`{"id":"a","nodeId":"n","ok":true,"payload":{"stdout":"\u0041\n","stderr":"\ud800 \\"}}`,
		`{"id":"a","nodeId":"n","ok":true,"error":{"code":"","message":"","payload":{}}}`,
		`{"id":"x","nodeId":"n","ok":true,"id":"y","payload":{}}`,
		`{"id":"a","Id":"b","ok":true,"payload":{}}`,
		// system.run results and events
		`{"stdout":"\u00e9\ud800","stderr":null,"exitCode":1,"EXITCODE":2}`,
		`{"exitCode":-1,"timedOut":true,"success":false,"stdout":"a<b>&\u2028","stderr":"e\u0000","truncated":true,"droppedBytes":12345,"error":"timed out \"x\""}`,
		`{"event":"exec.finished","payload":{"runId":"r","tail":"x"}}`,
		`{"stdout":1}`, `[`, `{"a":{"b":[1,2,{}]}}`,
		// strings
		`""`, `"a"`, `"a\nb\"c\\d\/e\bf\fg\rh\ti"`, `"\u00e9\u2028\u0041\u001f"`, `"\ud83d\ude00"`,
		`"\ud800"`, "\"\xff\"", `"\uZZZZ"`, `"\u12"`, `"abc\"`, `"<>&"`, "\"日本\"", "\"\" \n", " \t\"a\"\r",
		"", "0123456", "01234567", "012345678", "a\x00\x01\x1f\x7f\b\f\n\r\t\"\\/<>&", "\xff\xfe",
		"\u2028\u2029\ufffd\u00e9", "\xed\xa0\x80", "\xe2\x82", "abcdefg\xe2\x82abcdefgh", "\U0001F600 ok",
		strings.Repeat("0123456789abcdef", 7) + "\n",
	} {
		add(s)
	}
	res, _ := NewRequest("17", MethodInvokeResult, InvokeResult{ID: "i", NodeID: "n", OK: true, Payload: json.RawMessage(`{"stdout":"x"}`)})
	ev, _ := NewEvent(MethodNodeEvent, NodeEvent{Event: "exec.started", Payload: json.RawMessage(`{"runId":"r"}`)}, 3)
	ok, _ := NewResult("5", ExecResult{Status: ExecCompleted, RunID: "r", SystemRunResult: SystemRunResult{Stdout: "out\n", Stderr: "<e>"}})
	for _, fr := range []Frame{res, ev, ok} {
		data, _ := fr.appendJSON(nil)
		out = append(out, data, fr.Params)
	}
	return out
}

// FuzzCodec is the wire codec's one differential harness: for any bytes,
// each fast path of Codec (see its doc) either declines, refuses, or reads
// exactly what the plain path reads — and refuses whatever the plain path
// refuses — and each fast encoder writes Marshal's bytes.
func FuzzCodec(f *testing.F) {
	for _, s := range codecSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		plain, plainErr := DecodeFrame(data)
		if plainErr == nil {
			checkPlainFrame(t, data, plain)
		}
		checkLaidOut(t, data, plain, plainErr)
		checkResponse(t, data, plain, plainErr)
		checkRunResult(t, data)
		checkOwn(t, data)
		checkUnquote(t, data)
		checkEncoders(t, data)
	})
}

// checkPlainFrame: a frame DecodeFrame accepts satisfies its type's
// invariants, and appendJSON (how WriteFrame encodes) writes it so that it
// decodes to the same frame.
func checkPlainFrame(t *testing.T, data []byte, fr Frame) {
	switch fr.Type {
	case TypeReq:
		if fr.ID == "" || fr.Method == "" {
			t.Fatalf("accepted req without id/method: %q", data)
		}
	case TypeRes:
		if fr.OK == nil || (!*fr.OK && fr.Error == nil) {
			t.Fatalf("accepted malformed res: %q", data)
		}
	case TypeEvent:
		if fr.Event == "" {
			t.Fatalf("accepted event without name: %q", data)
		}
	default:
		t.Fatalf("accepted unknown type %q", fr.Type)
	}
	w, err := fr.appendJSON(nil)
	if err != nil {
		t.Fatalf("appendJSON: %v", err)
	}
	again, err := DecodeFrame(w)
	if err != nil {
		t.Fatalf("re-decode of appendJSON %s: %v", w, err)
	}
	if !sameFrame(again, fr) || !cmp.Equal(again.Error, fr.Error) {
		t.Fatalf("appendJSON changed the frame: %q -> %q", data, w)
	}
}

// checkLaidOut: a frame the codec reads by its layout is the frame
// DecodeFrame reads, unless its params or payload are not JSON on their
// own, and then the handler's Unmarshal refuses them. Nothing is read as
// another method, event, id or value.
func checkLaidOut(t *testing.T, data []byte, plain Frame, plainErr error) {
	got, ok := handlerChecked().decodeLaidOut(data)
	if !ok {
		return
	}
	if _, ok := (Codec{}).decodeLaidOut(data); ok {
		t.Fatalf("a codec that no handler checks read %q by its layout", data)
	}
	raw := got.Params
	if got.Type == TypeEvent {
		raw = got.Payload
	}
	if !jsontext.Value(raw).IsValid() {
		if Unmarshal(raw, new(any)) == nil || UnmarshalOwn(raw, new(any)) == nil {
			t.Fatalf("%q: read by its layout with params %q, which the handler's decode takes but are not JSON", data, raw)
		}
		return
	}
	if plainErr != nil {
		t.Fatalf("%q read by its layout as %+v, but DecodeFrame refuses it: %v", data, got, plainErr)
	}
	if !sameFrame(got, plain) {
		t.Fatalf("%q:\nlaid out %+v\ndecoded  %+v", data, got, plain)
	}
}

// checkResponse: a response decodeResponse takes for a Call gives that
// Call what DecodeFrame and then Unmarshal of the payload give it (Call's
// plain path), for a result type of this package read the fast way (an
// ExecResult through OutputInto), one read by UnmarshalOwn and one of
// another package, read by Unmarshal.
func checkResponse(t *testing.T, data []byte, plain Frame, plainErr error) {
	id, ok := (Codec{}).responseID(data)
	if !ok {
		return
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[ExecResult](), reflect.TypeFor[SystemRunResult](), reflect.TypeFor[map[string]any]()} {
		r, ok := (Codec{}).decodeResponse(data, id, typ)
		if !ok {
			continue
		}
		if plainErr != nil {
			t.Fatalf("%s: decodeResponse took %q, which DecodeFrame refuses: %v", typ, data, plainErr)
		}
		if r.f.Type != plain.Type || r.f.ID != plain.ID || *r.f.OK != *plain.OK || !cmp.Equal(r.f.Error, plain.Error) {
			t.Fatalf("%s: %q: decodeResponse reads %+v, DecodeFrame %+v", typ, data, r.f, plain)
		}
		// Call sets its result from a value, and the plain path decodes
		// into it, exactly when there is a payload that is not null: with
		// neither, the caller's value is left as it was.
		if has := *plain.OK && len(plain.Payload) > 0 && string(plain.Payload) != "null"; r.value.IsValid() != has {
			t.Fatalf("%s: %q: decodeResponse sets the result: %v; the plain path decodes a payload: %v", typ, data, r.value.IsValid(), has)
		}
		want := reflect.New(typ)
		if *plain.OK && len(plain.Payload) > 0 {
			if err := Unmarshal(plain.Payload, want.Interface()); err != nil {
				t.Fatalf("%s: decodeResponse took %q, whose payload Unmarshal refuses: %v", typ, data, err)
			}
		}
		got := reflect.New(typ)
		if r.value.IsValid() {
			got = r.value
		}
		if d := cmp.Diff(want.Interface(), got.Interface(), ignoreWire); d != "" {
			t.Fatalf("%s: %q: the Call's result (-plain +fast):\n%s", typ, data, d)
		}
	}
}

// checkRunResult: a system.run answer Codec.DecodeRunResult takes is the
// one the gateway's plain path reads (Unmarshal of the InvokeResult, then
// UnmarshalOwn of its payload through KeepingWire), and the exec result
// passed on with the output's JSON as it came reads as the same text.
func checkRunResult(t *testing.T, data []byte) {
	var codec Codec
	id, ok := codec.PeekInvokeID(data)
	if !ok {
		return
	}
	res, run, err := codec.DecodeRunResult(data, id)
	if err != nil {
		return
	}
	var gen InvokeResult
	if err := Unmarshal(data, &gen); err != nil {
		t.Fatalf("DecodeRunResult took %q, which the plain path refuses: %v", data, err)
	}
	if gen.ID != res.ID || gen.NodeID != res.NodeID || gen.OK != res.OK || !cmp.Equal(gen.Error, res.Error) {
		t.Fatalf("%q: DecodeRunResult reads %+v, the plain path %+v", data, res, gen)
	}
	if run == nil {
		if gen.OK {
			t.Fatalf("%q: DecodeRunResult gave no result for an ok answer", data)
		}
		return
	}
	if !gen.OK {
		t.Fatalf("%q: DecodeRunResult gave a result for a failed answer", data)
	}
	var want SystemRunResult
	if err := UnmarshalOwn(gen.Payload, KeepingWire(&want)); err != nil {
		t.Fatalf("DecodeRunResult took %q, whose payload the plain path refuses: %v", data, err)
	}
	if d := cmp.Diff(want, *run, ignoreWire); d != "" {
		t.Fatalf("%q: the result (-plain +fast):\n%s", data, d)
	}
	f, err := NewResult("1", ExecResult{Status: ExecCompleted, SystemRunResult: *run})
	if err != nil {
		t.Fatal(err)
	}
	out := onTheWire(t, f)
	var back ExecResult
	if err := Unmarshal(out.Payload, &back); err != nil {
		t.Fatalf("the exec result passed on does not decode: %v: %s", err, out.Payload)
	}
	if d := cmp.Diff(want, back.SystemRunResult, ignoreWire); d != "" {
		t.Fatalf("%q: the agent reads (-plain +passed on):\n%s", data, d)
	}
}

// checkOwn: UnmarshalOwn (the plain path's decode of the bridge's own
// types, without v1's legacy pre-scan) accepts what Unmarshal accepts,
// into the same value; with KeepingWire too.
func checkOwn(t *testing.T, data []byte) {
	for _, mk := range []func() any{
		func() any { return new(Frame) },
		func() any { return new(SystemRunResult) },
		func() any { return new(NodeEvent) },
		func() any { return new(ExecEvent) },
		func() any { return new(ExecResult) },
	} {
		want, got := mk(), mk()
		werr, gerr := Unmarshal(data, want), UnmarshalOwn(data, got)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%T: Unmarshal: %v; UnmarshalOwn: %v", want, werr, gerr)
		}
		if werr == nil && !reflect.DeepEqual(want, got) {
			t.Fatalf("%T: Unmarshal %+v; UnmarshalOwn %+v", want, want, got)
		}
	}
	var want, got, kept SystemRunResult
	werr, gerr := Unmarshal(data, &want), UnmarshalOwn(data, KeepingWire(&got))
	if (werr == nil) != (gerr == nil) || werr == nil && !cmp.Equal(want, got, ignoreWire) {
		t.Fatalf("KeepingWire: Unmarshal %+v, %v; UnmarshalOwn %+v, %v", want, werr, got, gerr)
	}
	var x, fast ExecResult
	werr, gerr = Unmarshal(data, &x), Unmarshal(data, OutputInto(&fast))
	if (werr == nil) != (gerr == nil) || werr == nil && !cmp.Equal(x, fast, ignoreWire) {
		t.Fatalf("OutputInto: Unmarshal %+v, %v; through OutputInto %+v, %v", x, werr, fast, gerr)
	}
	if werr := Unmarshal(data, KeepingWire(&kept)); werr == nil {
		checkResultWire(t, want)
		checkResultWire(t, kept)
	}
}

// checkUnquote: for every JSON string Unmarshal decodes, unquoteFast
// either declines or gives the same text, and it declines only what it
// must (invalid UTF-8, a surrogate escape).
func checkUnquote(t *testing.T, data []byte) {
	var want string
	if err := Unmarshal(data, &want); err != nil {
		return
	}
	// The decoder hands UnmarshalJSON the value alone, without the
	// whitespace Unmarshal allows around it.
	data = bytes.Trim(data, " \t\r\n")
	if len(data) == 0 || data[0] != '"' {
		return
	}
	got, ok := unquoteFast(data)
	if ok && got != want {
		t.Fatalf("unquoteFast(%s) = %q, Unmarshal = %q", data, got, want)
	}
	if !ok && utf8.Valid(data) && !bytes.Contains(data, []byte(`\u`)) {
		t.Fatalf("unquoteFast declined %s", data)
	}
}

// checkEncoders: appendQuoted writes Marshal's bytes for the input as a
// string; the result encoders write Marshal's bytes for a result made of
// it.
func checkEncoders(t *testing.T, data []byte) {
	s := string(data)
	want, err := Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := appendQuoted([]byte("x"), s); !bytes.Equal(got[1:], want) || got[0] != 'x' {
		t.Fatalf("appendQuoted(%q) = %s, Marshal = %s", s, got, want)
	}
	n := len(data)
	checkResultWire(t, SystemRunResult{ExitCode: n - 3, TimedOut: n%2 == 1, Success: n%3 == 0, Stdout: s,
		Stderr: s[n/2:], Truncated: n%5 == 0, DroppedBytes: int64(n) * 7 % 11, Error: s[:n/3]})
}

// checkResultWire: SystemRunResult.appendWire and ExecResult.appendWire
// (with and without an event carrying the output's tail) write Marshal's
// bytes; a result whose Wire holds the JSON it was read from splices that
// JSON in, which decodes to the same text.
func checkResultWire(t *testing.T, r SystemRunResult) {
	if r.Wire == nil {
		want, err := Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.appendWire(nil); !bytes.Equal(got, want) {
			t.Fatalf("SystemRunResult.appendWire = %s\nMarshal = %s", got, want)
		}
	}
	for _, events := range [][]SystemEvent{nil, {{Text: "Exec finished\n" + r.Stdout, Kind: EventExecFinished, Tail: r.Stdout}}} {
		x := ExecResult{Status: ExecCompleted, RunID: "r<1>", Host: "node", SystemRunResult: r, Events: events}
		got := x.appendWire([]byte("{"))[1:]
		if r.Wire == nil {
			want, err := Marshal(x)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("ExecResult.appendWire = %s\nMarshal = %s", got, want)
			}
			continue
		}
		var back ExecResult
		if err := Unmarshal(got, &back); err != nil {
			t.Fatalf("ExecResult.appendWire wrote %s, which does not decode: %v", got, err)
		}
		x.Wire = nil
		// An event's tail is not sent (SystemEvent.Tail).
		if d := cmp.Diff(x, back, ignoreWire, cmpopts.IgnoreFields(SystemEvent{}, "Tail")); d != "" {
			t.Fatalf("ExecResult.appendWire with the kept JSON reads (-sent +read):\n%s", d)
		}
	}
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

// TestDecodeLaidOut checks that frames this build writes for the named
// methods and events are read without the decoder exactly as DecodeFrame
// reads them, and that anything else is left to DecodeFrame.
func TestDecodeLaidOut(t *testing.T) {
	c := handlerChecked()
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
	if _, ok := (Codec{}).decodeLaidOut(otherData); ok {
		t.Error("a codec without CheckedByHandler read a frame by its layout")
	}
}

// TestDecodeRunResult checks the one-pass decoding of a node's system.run
// answer against the plain path (InvokeResult, then its payload), and
// that anything it cannot vouch for is refused or left to the plain path.
func TestDecodeRunResult(t *testing.T) {
	var codec Codec
	want := SystemRunResult{ExitCode: 3, Stdout: "out \u2028 <x>\n", Stderr: "err", Truncated: true, Error: "e"}
	payload, _ := json.Marshal(want)
	ok := InvokeResult{ID: "abc-1", NodeID: "n1", OK: true, Payload: payload}
	line, err := NewRequest("1", MethodInvokeResult, ok)
	if err != nil {
		t.Fatal(err)
	}
	params := []byte(onTheWire(t, line).Params)
	id, found := codec.PeekInvokeID(params)
	if !found || id != "abc-1" {
		t.Fatalf("PeekInvokeID = %q, %v", id, found)
	}
	res, run, err := codec.DecodeRunResult(params, id)
	if err != nil {
		t.Fatal(err)
	}
	if run == nil || !res.OK || res.NodeID != "n1" {
		t.Fatalf("DecodeRunResult = %+v, %+v", res, run)
	}
	if d := cmp.Diff(want, *run, ignoreWire); d != "" {
		t.Errorf("decoded result (-want +got):\n%s", d)
	}

	failed := InvokeResult{ID: "abc-2", NodeID: "n1", Error: &Error{Code: CodeDenied, Message: "no"}}
	fp, _ := json.Marshal(failed)
	if res, run, err := codec.DecodeRunResult(fp, "abc-2"); err != nil || run != nil || res.OK || res.Error.Code != CodeDenied {
		t.Errorf("failed answer = %+v, %+v, %v", res, run, err)
	}
	for name, bad := range map[string]string{
		"ok without payload":     `{"id":"x","nodeId":"n","ok":true}`,
		"null payload":           `{"id":"x","nodeId":"n","ok":true,"payload":null}`,
		"payload not object":     `{"id":"x","nodeId":"n","ok":true,"payload":"s"}`,
		"id differs":             `{"id":"x","nodeId":"n","ok":true,"id":"y","payload":{}}`,
		"payload only in error":  `{"id":"x","nodeId":"n","ok":true,"error":{"code":"","message":"","payload":{}}}`,
		"payload twice":          `{"id":"x","nodeId":"n","ok":true,"payload":{"stdout":"a"},"payload":{"stderr":"b"}}`,
		"duplicate in the value": `{"id":"x","nodeId":"n","ok":true,"payload":{"stdout":"a","stdout":"b"}}`,
	} {
		if _, _, err := codec.DecodeRunResult([]byte(bad), "x"); err == nil {
			t.Errorf("%s: accepted %s", name, bad)
		}
	}
	for _, other := range []string{`{"nodeId":"n","id":"x"}`, `{"id":"a\"b"}`, ` {"id":"x"}`, `{"id":""}`} {
		if id, ok := codec.PeekInvokeID([]byte(other)); ok {
			t.Errorf("PeekInvokeID(%s) = %q; want the plain path", other, id)
		}
	}
}

// TestDecodeResponsePayloadPresence: a response whose only "payload" key
// is inside its error object has no payload, so the Call's result is left
// as the plain path leaves it; one with its payload gets it.
func TestDecodeResponsePayloadPresence(t *testing.T) {
	typ := reflect.TypeFor[SystemRunResult]()
	for _, tc := range []struct {
		in   string
		kept bool
	}{
		{`{"type":"res","id":"1","ok":true,"error":{"code":"X","message":"m","x":{"payload":{}}},"extra":{"payload":{"stdout":"z"}}}`, false},
		{`{"type":"res","id":"1","ok":true,"payload":null}`, false},
		{`{"type":"res","id":"1","ok":true}`, false},
		{`{"type":"res","id":"1","ok":true,"payload":{"stdout":"y"}}`, true},
	} {
		r, ok := (Codec{}).decodeResponse([]byte(tc.in), "1", typ)
		if !ok {
			t.Fatalf("%s: declined", tc.in)
		}
		if r.value.IsValid() != tc.kept {
			t.Errorf("%s: a result set: %v, want %v", tc.in, r.value.IsValid(), tc.kept)
		}
	}
}

// BenchmarkDecodeRunResult compares the one-pass decoding of a node's
// 100 KB system.run answer (PeekInvokeID + DecodeRunResult) with the
// plain path it short-cuts (InvokeResult, then its payload): the fast
// path stays only while its gain is outside the noise of a round trip.
func BenchmarkDecodeRunResult(b *testing.B) {
	out := strings.Repeat("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd\"\n", 100_000/64)
	payload, err := Marshal(SystemRunResult{ExitCode: 0, Stdout: out})
	if err != nil {
		b.Fatal(err)
	}
	params, err := Marshal(InvokeResult{ID: "0b6c4f8e-3c1d-4a59-9a77-5d2f0e7c1a22", NodeID: "n1", OK: true, Payload: payload})
	if err != nil {
		b.Fatal(err)
	}
	var codec Codec
	b.Run("one-pass", func(b *testing.B) {
		b.SetBytes(int64(len(params)))
		for b.Loop() {
			id, ok := codec.PeekInvokeID(params)
			if !ok {
				b.Fatal("peek")
			}
			if _, _, err := codec.DecodeRunResult(params, id); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("general", func(b *testing.B) {
		b.SetBytes(int64(len(params)))
		for b.Loop() {
			var r InvokeResult
			if err := Unmarshal(params, &r); err != nil {
				b.Fatal(err)
			}
			var res SystemRunResult
			if err := Unmarshal(r.Payload, &res); err != nil {
				b.Fatal(err)
			}
		}
	})
}
