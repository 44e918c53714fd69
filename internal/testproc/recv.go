package testproc

import (
	"sync"
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

// WaitLimit is how long WaitGroup waits: a group's goroutines do real
// work (commands, containers, traced runs), so it is longer than
// RecvLimit. A bound against a hang, not a speed claim.
const WaitLimit = 5 * time.Minute

// WaitGroup waits for wg like wg.Wait, failing tb (naming what it waited
// for) when it is not done within WaitLimit: a stuck goroutine then fails
// the test with a message instead of hanging it.
func WaitGroup(tb testing.TB, wg *sync.WaitGroup, what string) {
	tb.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(WaitLimit)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		tb.Fatalf("%s: not done after %s", what, WaitLimit)
	}
}

// Poll checks cond every few milliseconds until it holds, failing tb
// (naming what it waited for) when it does not within limit: for state
// with nothing to wait on (a process table, a file, a server's view).
// The limit stops a hung test; it is not a timing assertion.
func Poll(tb testing.TB, limit time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
