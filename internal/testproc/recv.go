package testproc

import (
	"testing"
	"time"
)

// RecvLimit is how long Recv waits: long enough for a loaded 2-core
// machine, short enough that a hung test fails with a message instead of
// stalling until the test binary's global timeout.
const RecvLimit = time.Minute

// Recv receives from ch, failing tb (naming what it waited for) when
// nothing arrives within RecvLimit. The limit only stops a hung test; it
// is not a timing assertion.
func Recv[T any](tb testing.TB, ch <-chan T, what string) T {
	tb.Helper()
	t := time.NewTimer(RecvLimit)
	defer t.Stop()
	select {
	case v := <-ch:
		return v
	case <-t.C:
		tb.Fatalf("%s: nothing after %s", what, RecvLimit)
		panic("unreachable")
	}
}
