package bridge

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// decodeKeeping decodes a node's system.run payload as the gateway does.
func decodeKeeping(t *testing.T, payload string) SystemRunResult {
	t.Helper()
	var r SystemRunResult
	if err := Unmarshal([]byte(payload), KeepingWire(&r)); err != nil {
		t.Fatalf("decode %s: %v", payload, err)
	}
	return r
}

// sent is the exec result's payload as a connection sends it.
func sent(t *testing.T, r ExecResult) []byte {
	t.Helper()
	f, err := NewResult("1", r)
	if err != nil {
		t.Fatal(err)
	}
	return onTheWire(t, f).Payload
}

// onTheWire is f as its peer reads it: encoded as a connection writes
// it (appendJSON, which writes a wire type's body straight into the
// frame) and decoded.
func onTheWire(t testing.TB, f Frame) Frame {
	t.Helper()
	data, err := f.appendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeFrame(data)
	if err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	return back
}

// TestPassThroughSameBytes: a result a node encoded with Marshal, decoded
// keeping its output's JSON, goes out in an exec result byte for byte as
// Marshal would write it from the decoded text.
func TestPassThroughSameBytes(t *testing.T) {
	node := SystemRunResult{ExitCode: 2, Stdout: strings.Repeat("line <a&b> \u2028 é \x01\n", 3000), Stderr: "warn \"x\"\n", Truncated: true, DroppedBytes: 9, Error: "e"}
	payload, err := Marshal(node)
	if err != nil {
		t.Fatal(err)
	}
	run := decodeKeeping(t, string(payload))
	if d := cmp.Diff(node, run, cmpopts.IgnoreFields(SystemRunResult{}, "Wire")); d != "" {
		t.Fatalf("decoded (-want +got):\n%s", d)
	}
	res := ExecResult{Status: ExecCompleted, RunID: "run-1", Host: "node", NodeID: "n<1>", SystemRunResult: run,
		Events: []SystemEvent{{Text: `"stdout":"","stderr":""`, TS: 1, Kind: EventExecFinished}}}
	want, err := Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if got := sent(t, res); !bytes.Equal(got, want) {
		t.Fatalf("pass-through differs from Marshal:\n got %.300s\nwant %.300s", got, want)
	}
}

// TestPassThroughSplices: the node's own JSON for the output is what the
// agent gets (an escape Marshal would not write survives), and it reads
// as the same text.
func TestPassThroughSplices(t *testing.T) {
	run := decodeKeeping(t, `{"exitCode":0,"success":true,"stdout":"\u0041\/b\n","stderr":"","truncated":false}`)
	if run.Stdout != "A/b\n" {
		t.Fatalf("stdout = %q", run.Stdout)
	}
	got := sent(t, ExecResult{Status: ExecCompleted, SystemRunResult: run})
	if !bytes.Contains(got, []byte(`"stdout":"\u0041\/b\n","stderr":""`)) {
		t.Fatalf("output escaped again instead of passed through: %s", got)
	}
	var back ExecResult
	if err := Unmarshal(got, &back); err != nil || back.Stdout != "A/b\n" || !back.Success {
		t.Fatalf("agent reads %+v, %v from %s", back, err, got)
	}
}

// TestPassThroughOnlyUnchanged: output changed after the decode, a
// result whose output was not both decoded, and one after DropWire are
// encoded from their text.
func TestPassThroughOnlyUnchanged(t *testing.T) {
	const payload = `{"exitCode":0,"stdout":"\u0041","stderr":"\u0042"}`
	for name, edit := range map[string]func(*SystemRunResult){
		"stdout changed":  func(r *SystemRunResult) { r.Stdout = "C" },
		"stderr changed":  func(r *SystemRunResult) { r.Stderr = "" },
		"dropped":         func(r *SystemRunResult) { r.Wire = nil },
		"copy kept, drop": func(r *SystemRunResult) { c := *r; c.Wire = nil; *r = c },
	} {
		run := decodeKeeping(t, payload)
		edit(&run)
		res := ExecResult{Status: ExecCompleted, SystemRunResult: run}
		want, _ := Marshal(res)
		if got := sent(t, res); !bytes.Equal(got, want) {
			t.Errorf("%s: sent %s, want %s", name, got, want)
		}
	}
	for _, partial := range []string{`{"exitCode":1,"stdout":"\u0041"}`, `{"exitCode":1}`, `{"stdout":null,"stderr":"\u0042"}`} {
		res := ExecResult{SystemRunResult: decodeKeeping(t, partial)}
		want, _ := Marshal(res)
		if got := sent(t, res); !bytes.Equal(got, want) {
			t.Errorf("%s: sent %s, want %s", partial, got, want)
		}
	}
	var r SystemRunResult
	if err := Unmarshal([]byte(`{"stdout":5}`), KeepingWire(&r)); err == nil {
		t.Error("a number for stdout was accepted")
	}
}

// TestPassThroughDecodesAsUnmarshal: the text kept beside the JSON is
// what Unmarshal reads, an escaped lone surrogate included.
func TestPassThroughDecodesAsUnmarshal(t *testing.T) {
	for _, s := range []string{`"\ud800 x"`, `"\u00e9\t\"\\"`, `""`, `"\udc00\ud800"`} {
		var want string
		if err := Unmarshal([]byte(s), &want); err != nil {
			t.Fatal(err)
		}
		run := decodeKeeping(t, `{"stdout":`+s+`,"stderr":`+s+`}`)
		if run.Stdout != want || run.Stderr != want {
			t.Errorf("%s: decoded %q, %q; Unmarshal reads %q", s, run.Stdout, run.Stderr, want)
		}
	}
}

// TestWithoutTailOf: only the result's own exec.finished event loses its
// tail, only when the result ends with that text, and the events given
// are left as they were.
func TestWithoutTailOf(t *testing.T) {
	head := "Exec finished (node=n, id=r1, code=0)"
	ev := func(run, tail string) SystemEvent {
		return SystemEvent{Kind: EventExecFinished, RunID: run, Text: head + "\n" + tail, Tail: tail}
	}
	res := ExecResult{RunID: "r1", SystemRunResult: SystemRunResult{Stdout: "0123456789", Stderr: "err\n"}}
	for _, c := range []struct {
		name string
		ev   SystemEvent
		cut  bool
	}{
		{"whole output", ev("r1", "0123456789err\n"), true},
		{"end of stdout and stderr", ev("r1", "…89err\n"), true},
		{"end of stderr", ev("r1", "…r\n"), true},
		{"another run", ev("r2", "0123456789err\n"), false},
		{"not the output's end", ev("r1", "…0123"), false},
		{"stderr before stdout", ev("r1", "err\n0123456789"), false},
		{"text without the tail", SystemEvent{Kind: EventExecFinished, RunID: "r1", Text: head, Tail: "err\n"}, false},
		{"another kind", SystemEvent{Kind: EventExecStarted, RunID: "r1", Text: "x\nerr\n", Tail: "err\n"}, false},
	} {
		in := []SystemEvent{{Kind: EventExecStarted, RunID: "r1", Text: "Exec started"}, c.ev}
		orig := slices.Clone(in)
		got := WithoutTailOf(in, res)
		want := slices.Clone(orig)
		if c.cut {
			want[1].Text, want[1].Tail = head, ""
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %+v, want %+v", c.name, got, want)
		}
		if !slices.Equal(in, orig) {
			t.Errorf("%s: the events given were changed", c.name)
		}
	}
}

// TestOutputInto: an exec result decoded through OutputInto is the one
// Unmarshal gives, every field, the fallback's inputs included.
func TestOutputInto(t *testing.T) {
	for _, out := range []string{"", "plain\n", "a<b>&\"\\\t\u2028\x01", "\xff\xfeinvalid", "\U0001F600 and \u00e9"} {
		x := ExecResult{Status: ExecCompleted, RunID: "r1", Host: "node", NodeID: "n",
			SystemRunResult: SystemRunResult{ExitCode: 3, Stdout: out, Stderr: "e:" + out, Truncated: true, DroppedBytes: 9, Error: "x"},
			Events:          []SystemEvent{{Text: "Exec finished", TS: 1, Kind: EventExecFinished, RunID: "r1"}}}
		data, err := Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		var want, got ExecResult
		if err := Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		if err := Unmarshal(data, OutputInto(&got)); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(SystemRunResult{})); diff != "" {
			t.Errorf("%q: OutputInto differs from Unmarshal (-want +got):\n%s", out, diff)
		}
	}
	// A surrogate escape, a null, a duplicate and a name in another case
	// take Unmarshal's way (the last two: refused by both).
	for _, data := range []string{`{"stdout":"\ud83d\ude00 \ud800","stderr":null}`, `{"stdout":"a","stdout":"b"}`, `{"STDOUT":"up\\n","Stderr":"x"}`} {
		var want, got ExecResult
		want.Stderr, got.Stderr = "kept", "kept"
		errWant := Unmarshal([]byte(data), &want)
		errGot := Unmarshal([]byte(data), OutputInto(&got))
		if (errWant == nil) != (errGot == nil) {
			t.Fatalf("%s: Unmarshal: %v, through OutputInto: %v", data, errWant, errGot)
		}
		if got.Stdout != want.Stdout || got.Stderr != want.Stderr {
			t.Errorf("%s: OutputInto gives %q/%q, Unmarshal %q/%q", data, got.Stdout, got.Stderr, want.Stdout, want.Stderr)
		}
	}
}

// TestKeptWireSharesOnlyAFrameGivenAway: DecodeRunResult keeps the
// output's JSON as a piece of the params it was given (no copy of a
// run's output), while KeepingWire, whose input stays the caller's,
// keeps a copy that a later change to the input does not reach.
func TestKeptWireSharesOnlyAFrameGivenAway(t *testing.T) {
	params := []byte(`{"id":"i","nodeId":"n","ok":true,"payload":{"exitCode":0,"stdout":"a\nb","stderr":"e"}}`)
	_, run, err := Codec{}.DecodeRunResult(params, "i")
	if err != nil || run == nil {
		t.Fatalf("DecodeRunResult: %v", err)
	}
	if !within(run.Wire.stdoutJSON, params) || !within(run.Wire.stderrJSON, params) {
		t.Error("the kept JSON was copied out of a frame given away")
	}
	if cap(run.Wire.stdoutJSON) != len(run.Wire.stdoutJSON) {
		t.Error("the kept JSON may be appended to over the frame's bytes")
	}
	input := []byte(`{"exitCode":0,"stdout":"a\nb","stderr":"e"}`)
	var r SystemRunResult
	if err := Unmarshal(input, KeepingWire(&r)); err != nil {
		t.Fatal(err)
	}
	if within(r.Wire.stdoutJSON, input) {
		t.Fatal("KeepingWire kept a piece of its caller's input")
	}
	for i := range input {
		input[i] = 'x'
	}
	if got := string(sent(t, ExecResult{SystemRunResult: r})); !strings.Contains(got, `"stdout":"a\nb","stderr":"e"`) {
		t.Errorf("a change to the input reached the result passed on: %s", got)
	}
}
