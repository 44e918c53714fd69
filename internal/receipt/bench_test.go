package receipt_test

import (
	"testing"

	"github.com/exechost/exechost/internal/receipt"
)

// BenchmarkSign is the CPU cost of a receipt: canonical encoding and an
// Ed25519 signature. BenchmarkAppend adds the write and its fdatasync.
func BenchmarkSign(b *testing.B) {
	k := newKey(b)
	r := runReceipt("run-1", "main", "echo hi", 0)
	for b.Loop() {
		if _, err := receipt.Sign(&r, k); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppend(b *testing.B) {
	l := openLog(b, b.TempDir(), newKey(b), "gateway", 0)
	r := runReceipt("run-1", "main", "echo hi", 0)
	for b.Loop() {
		if _, err := l.Append(r); err != nil {
			b.Fatal(err)
		}
	}
}
