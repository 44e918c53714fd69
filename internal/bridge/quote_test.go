package bridge

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// FuzzAppendQuoted holds appendQuoted to Marshal's encoding of a string,
// byte for byte, over every kind of byte (plain runs of every length
// around the eight-byte step, escapes, HTML characters, U+2028/U+2029,
// invalid and cut UTF-8).
func FuzzAppendQuoted(f *testing.F) {
	for _, s := range []string{
		"", "a", "0123456", "01234567", "012345678", "0123456789abcdef\n",
		"a\x00\x01\x1f\x7f\b\f\n\r\t\"\\/<>&", "\xff\xfe", "\u2028\u2029\ufffd\u00e9",
		"\xed\xa0\x80", "\xe2\x82", "abcdefg\xe2\x82abcdefgh", "日本語のテキスト", "\U0001F600 ok",
		strings.Repeat("0123456789abcdef", 7) + "\n", "<script>&amp;</script>", "ab\"cdefg\\hijk",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendQuoted([]byte("x"), s); !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Fatalf("appendQuoted(%q) = %s, Marshal = %s", s, got, want)
		}
	})
}

// TestPlain8EveryByte checks the word-wide test against the per-byte one
// for every byte value in every position.
func TestPlain8EveryByte(t *testing.T) {
	for c := 0; c < 256; c++ {
		for pos := 0; pos < 8; pos++ {
			b := []byte("abcdefgh")
			b[pos] = byte(c)
			if got, want := plain8(string(b)), plainByte(byte(c)); got != want {
				t.Fatalf("plain8 with %#x at %d = %v, want %v", c, pos, got, want)
			}
		}
	}
}

// BenchmarkAppendQuoted: the bench's 100 KB output text (lines of hex
// digits) through appendQuoted and through Marshal.
func BenchmarkAppendQuoted(b *testing.B) {
	line := strings.Repeat("0123456789abcdef", 7) + "\n"
	out := strings.Repeat(line, 100_000/len(line)+1)[:100_000]
	b.Run("appendQuoted", func(b *testing.B) {
		b.SetBytes(int64(len(out)))
		buf := make([]byte, 0, 2*len(out))
		for b.Loop() {
			buf = appendQuoted(buf[:0], out)
		}
	})
	b.Run("Marshal", func(b *testing.B) {
		b.SetBytes(int64(len(out)))
		for b.Loop() {
			if _, err := Marshal(out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestResultWireFields: SystemRunResult.appendWire writes its fields by
// hand, and FuzzResultWire compares it with Marshal only over the fields it
// knows; a field added to the struct would be left off every reply
// unnoticed. This fails until both learn it.
func TestResultWireFields(t *testing.T) {
	var names []string
	for f := range reflect.TypeFor[SystemRunResult]().Fields() {
		names = append(names, f.Name)
	}
	want := []string{"ExitCode", "TimedOut", "Success", "Stdout", "Stderr", "Truncated", "DroppedBytes", "Error", "Wire"}
	if !slices.Equal(names, want) {
		t.Errorf("SystemRunResult fields %v, appendWire and FuzzResultWire know %v: teach them the new ones", names, want)
	}
}

// FuzzResultWire holds the hand-written encodings of a system.run result
// and of an exec result whose output is not passed through to Marshal's,
// byte for byte.
func FuzzResultWire(f *testing.F) {
	f.Add(0, false, true, "out\n", "", false, int64(0), "", "")
	f.Add(-1, true, false, "a<b>&\u2028\xff", "err\x00", true, int64(12345), "timed out \"x\"", "Exec finished\nout")
	f.Fuzz(func(t *testing.T, code int, timedOut, success bool, stdout, stderr string, truncated bool, dropped int64, errText, event string) {
		r := SystemRunResult{ExitCode: code, TimedOut: timedOut, Success: success, Stdout: stdout, Stderr: stderr,
			Truncated: truncated, DroppedBytes: dropped, Error: errText}
		want, err := Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.appendWire(nil); !bytes.Equal(got, want) {
			t.Fatalf("SystemRunResult.appendWire = %s\nMarshal = %s", got, want)
		}
		x := ExecResult{Status: ExecCompleted, RunID: "r<1>", Host: "node", SystemRunResult: r}
		if event != "" {
			x.Events = []SystemEvent{{Text: event, Kind: EventExecFinished, Tail: stdout}}
		}
		if want, err = Marshal(x); err != nil {
			t.Fatal(err)
		}
		if got := x.appendWire([]byte("{")); !bytes.Equal(got[1:], want) {
			t.Fatalf("ExecResult.appendWire = %s\nMarshal = %s", got[1:], want)
		}
	})
}

// BenchmarkUnquote: the bench's 100 KB output text as a JSON string
// through unquoteFast, and through the strict unquote the gateway used
// before it.
func BenchmarkUnquote(b *testing.B) {
	line := strings.Repeat("0123456789abcdef", 7) + "\n"
	out := strings.Repeat(line, 100_000/len(line)+1)[:100_000]
	q := appendQuoted(nil, out)
	b.Run("unquoteFast", func(b *testing.B) {
		b.SetBytes(int64(len(out)))
		for b.Loop() {
			if s, ok := unquoteFast(q); !ok || len(s) != len(out) {
				b.Fatal("unquoteFast declined")
			}
		}
	})
	b.Run("AppendUnquote", func(b *testing.B) {
		b.SetBytes(int64(len(out)))
		for b.Loop() {
			u, err := jsontext.AppendUnquote(make([]byte, 0, len(q)), q)
			if err != nil || len(string(u)) != len(out) {
				b.Fatal(err)
			}
		}
	})
}
