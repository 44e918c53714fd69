package bridge

import (
	"encoding/json"
	"strings"
	"testing"
)

// BenchmarkUnmarshal100KB decodes what a node's answer to a system.run of
// 100 KB of output looks like — the frame (payload kept raw), then the
// result — with the wire decoder and, as the baseline, encoding/json.
func BenchmarkUnmarshal100KB(b *testing.B) {
	line := strings.Repeat("0123456789abcdef", 7) + "\n"
	out := strings.Repeat(line, 100_000/len(line)+1)[:100_000]
	payload, err := json.Marshal(SystemRunResult{Stdout: out, Success: true})
	if err != nil {
		b.Fatal(err)
	}
	f, err := NewResult("r1", json.RawMessage(payload))
	if err != nil {
		b.Fatal(err)
	}
	frame, err := f.appendJSON(nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range []struct {
		name      string
		unmarshal func([]byte, any) error
	}{
		{"encoding_json", json.Unmarshal},
		{"wire", Unmarshal},
		{"wire_own", UnmarshalOwn},
	} {
		b.Run("frame/"+d.name, func(b *testing.B) {
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				var fr Frame
				if err := d.unmarshal(frame, &fr); err != nil || len(fr.Payload) != len(payload) {
					b.Fatal(err)
				}
			}
		})
		b.Run("result/"+d.name, func(b *testing.B) {
			b.SetBytes(int64(len(payload)))
			for b.Loop() {
				var r SystemRunResult
				if err := d.unmarshal(payload, &r); err != nil || len(r.Stdout) != len(out) {
					b.Fatal(err)
				}
			}
		})
	}
}
