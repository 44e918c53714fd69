package shellrun

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// ErrBound is what the interpreter reports when a run hit one of its own
// bounds (memory, goroutines, programs at once).
var ErrBound = errors.New("interpreter bound reached")

// watchBounds enforces p's memory and goroutine bounds on this process for
// the rest of its life: after every garbage collection (which the memory
// limit makes more frequent as the bound nears) it reads the live heap and
// the goroutine count, and calls stop with why when either is over its
// bound. It is driven by the collector, not a timer.
func watchBounds(p Plan, stop func(why string)) {
	memBound := p.MemoryBound
	if memBound <= 0 {
		memBound = DefaultMemoryBound
	}
	gBound := p.GoroutineBound
	if gBound <= 0 {
		gBound = DefaultGoroutineBound
	}
	debug.SetMemoryLimit(memBound)
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var arm func()
	arm = func() {
		sentinel := new([16]byte)
		runtime.AddCleanup(sentinel, func(struct{}) {
			metrics.Read(sample)
			if sample[0].Value.Kind() == metrics.KindUint64 && sample[0].Value.Uint64() > uint64(memBound) {
				stop(fmt.Sprintf("memory bound reached (%d MiB live, bound %d MiB)", sample[0].Value.Uint64()>>20, memBound>>20))
				return
			}
			if n := runtime.NumGoroutine(); n > gBound {
				stop(fmt.Sprintf("goroutine bound reached (%d alive, bound %d): too many background jobs or subshells", n, gBound))
				return
			}
			arm()
		}, struct{}{})
	}
	arm()
}
