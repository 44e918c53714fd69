package inflight

import (
	"runtime"
	"sync"
	"testing"

	"github.com/exechost/exechost/internal/testproc"
)

func TestLimits(t *testing.T) {
	var l Limiter
	a1, r := l.Acquire("a", 3, 2)
	if r != nil {
		t.Fatal(r)
	}
	a2, _ := l.Acquire("a", 3, 2)
	if _, r := l.Acquire("a", 3, 2); r == nil || !r.PerKey || r.InFlight != 2 {
		t.Fatalf("third slot for a = %+v, want its own limit full with 2", r)
	}
	b1, r := l.Acquire("b", 3, 2)
	if r != nil {
		t.Fatal(r)
	}
	if _, r := l.Acquire("c", 3, 2); r == nil || r.PerKey || r.InFlight != 3 {
		t.Fatalf("slot past the total = %+v, want the total full with 3", r)
	}
	a1()
	a1() // a second release is harmless
	if total, byKey := l.InFlight("a"); total != 2 || byKey != 1 {
		t.Fatalf("after one release: total %d, a %d; want 2, 1", total, byKey)
	}
	c1, r := l.Acquire("c", 3, 2)
	if r != nil {
		t.Fatal(r)
	}
	// A lowered limit refuses new work and leaves running work alone.
	if _, r := l.Acquire("d", 1, 0); r == nil || r.InFlight != 3 {
		t.Fatalf("under a lowered total = %+v", r)
	}
	a2()
	b1()
	c1()
	if total, _ := l.InFlight(""); total != 0 || len(l.byKey) != 0 {
		t.Fatalf("after every release: total %d, keys %v", total, l.byKey)
	}
	// No limit at all.
	for range 10 {
		if _, r := l.Acquire("x", 0, 0); r != nil {
			t.Fatal(r)
		}
	}
}

// TestConcurrent: however acquisitions interleave, the total never passes
// its limit and every slot comes back.
func TestConcurrent(t *testing.T) {
	var l Limiter
	const limit = 5
	var wg sync.WaitGroup
	var mu sync.Mutex
	most, admitted := 0, 0
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, r := l.Acquire(string(rune('a'+i%7)), limit, 0)
			if r != nil {
				return
			}
			total, _ := l.InFlight("")
			mu.Lock()
			most = max(most, total)
			admitted++
			mu.Unlock()
			runtime.Gosched() // hold the slot while others try
			release()
		}()
	}
	testproc.WaitGroup(t, &wg, "the concurrent acquirers")
	if admitted == 0 || most > limit {
		t.Fatalf("%d admitted, %d slots held at once; want some admitted and at most %d", admitted, most, limit)
	}
	if total, _ := l.InFlight(""); total != 0 {
		t.Fatalf("total after all released = %d", total)
	}
}
