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

// BenchmarkWrite is what a run's receipt costs its result's path: the
// write, with the fdatasync left to the log's own goroutine (compare
// BenchmarkAppend, which waits for it).
func BenchmarkWrite(b *testing.B) {
	l := openLog(b, b.TempDir(), newKey(b), "gateway", 0)
	r := runReceipt("run-1", "main", "echo hi", 0)
	for b.Loop() {
		if _, err := l.Write(r, nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
}
