package gateway

import (
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/bridge"
)

// BenchmarkDecodeRunResult compares the one-pass decoding of a node's
// 100 KB system.run answer (peekInvokeID + decodeRunResult) with the
// general path it short-cuts (InvokeResult, then its payload): the fast
// path stays only while its gain is outside the noise of a round trip.
func BenchmarkDecodeRunResult(b *testing.B) {
	out := strings.Repeat("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd\"\n", 100_000/64)
	payload, err := bridge.Marshal(bridge.SystemRunResult{ExitCode: 0, Stdout: out})
	if err != nil {
		b.Fatal(err)
	}
	params, err := bridge.Marshal(bridge.InvokeResult{ID: "0b6c4f8e-3c1d-4a59-9a77-5d2f0e7c1a22", NodeID: "n1", OK: true, Payload: payload})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("one-pass", func(b *testing.B) {
		b.SetBytes(int64(len(params)))
		for b.Loop() {
			id, ok := peekInvokeID(params)
			if !ok {
				b.Fatal("peek")
			}
			if _, err := decodeRunResult(params, id); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("general", func(b *testing.B) {
		b.SetBytes(int64(len(params)))
		for b.Loop() {
			var r bridge.InvokeResult
			if err := bridge.Unmarshal(params, &r); err != nil {
				b.Fatal(err)
			}
			var res bridge.SystemRunResult
			if err := bridge.Unmarshal(r.Payload, &res); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("re-encode for the agent", func(b *testing.B) {
		for b.Loop() {
			if _, err := bridge.Marshal(bridge.ExecResult{SystemRunResult: bridge.SystemRunResult{Stdout: out}}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
