package bridge

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

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
// hand, and FuzzCodec compares it with Marshal only over the fields it
// knows; a field added to the struct would be left off every reply
// unnoticed. This fails until both learn it.
func TestResultWireFields(t *testing.T) {
	var names []string
	for f := range reflect.TypeFor[SystemRunResult]().Fields() {
		names = append(names, f.Name)
	}
	want := []string{"ExitCode", "TimedOut", "Success", "Stdout", "Stderr", "Truncated", "DroppedBytes", "Error", "Wire"}
	if !slices.Equal(names, want) {
		t.Errorf("SystemRunResult fields %v, appendWire and FuzzCodec know %v: teach them the new ones", names, want)
	}
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
