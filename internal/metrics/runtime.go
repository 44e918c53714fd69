package metrics

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// runtimeFamilies reads the Go runtime's figures once per scrape and
// returns them as the go_* and process_* families the client library's Go
// and process collectors wrote (the commonly charted subset: no
// go_memstats_*_sys breakdown beyond the total, no per-interface network
// counters).
func runtimeFamilies() []family {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	threads, _ := runtime.ThreadCreateProfile(nil)
	u := func(v uint64) func() float64 { return func() float64 { return float64(v) } }
	fs := []family{
		scalar("go_goroutines", "Number of goroutines that currently exist.", typeGauge, func() float64 { return float64(runtime.NumGoroutine()) }),
		scalar("go_threads", "Number of OS threads created.", typeGauge, func() float64 { return float64(threads) }),
		scalar("go_sched_gomaxprocs_threads", "The current runtime.GOMAXPROCS setting.", typeGauge, func() float64 { return float64(runtime.GOMAXPROCS(0)) }),
		{"go_info", "Information about the Go environment.", typeGauge, func(e *expWriter, name string) {
			e.sample(name, []string{"version"}, []string{runtime.Version()}, "", "", 1)
		}},
		scalar("go_gc_gogc_percent", "Heap size target percentage configured by the user, otherwise 100.", typeGauge, func() float64 { return float64(readUint("/gc/gogc:percent")) }),
		scalar("go_gc_gomemlimit_bytes", "Go runtime memory limit configured by the user, otherwise math.MaxInt64.", typeGauge, func() float64 { return float64(readUint("/gc/gomemlimit:bytes")) }),
		{"go_gc_duration_seconds", "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.", typeSummary, writeGCSummary},
		scalar("go_memstats_alloc_bytes", "Number of bytes allocated in heap and currently in use.", typeGauge, u(ms.Alloc)),
		scalar("go_memstats_alloc_bytes_total", "Total number of bytes allocated in heap until now, even if released already.", typeCounter, u(ms.TotalAlloc)),
		scalar("go_memstats_sys_bytes", "Number of bytes obtained from system.", typeGauge, u(ms.Sys)),
		scalar("go_memstats_mallocs_total", "Total number of heap objects allocated.", typeCounter, u(ms.Mallocs)),
		scalar("go_memstats_frees_total", "Total number of heap objects frees.", typeCounter, u(ms.Frees)),
		scalar("go_memstats_heap_alloc_bytes", "Number of heap bytes allocated and currently in use.", typeGauge, u(ms.HeapAlloc)),
		scalar("go_memstats_heap_sys_bytes", "Number of heap bytes obtained from system.", typeGauge, u(ms.HeapSys)),
		scalar("go_memstats_heap_idle_bytes", "Number of heap bytes waiting to be used.", typeGauge, u(ms.HeapIdle)),
		scalar("go_memstats_heap_inuse_bytes", "Number of heap bytes that are in use.", typeGauge, u(ms.HeapInuse)),
		scalar("go_memstats_heap_released_bytes", "Number of heap bytes released to OS.", typeGauge, u(ms.HeapReleased)),
		scalar("go_memstats_heap_objects", "Number of currently allocated objects.", typeGauge, u(ms.HeapObjects)),
		scalar("go_memstats_stack_inuse_bytes", "Number of bytes obtained from system for stack allocator in non-CGO environments.", typeGauge, u(ms.StackInuse)),
		scalar("go_memstats_stack_sys_bytes", "Number of bytes obtained from system for stack allocator.", typeGauge, u(ms.StackSys)),
		scalar("go_memstats_next_gc_bytes", "Number of heap bytes when next garbage collection will take place.", typeGauge, u(ms.NextGC)),
		scalar("go_memstats_last_gc_time_seconds", "Number of seconds since 1970 of last garbage collection.", typeGauge, func() float64 { return float64(ms.LastGC) / 1e9 }),
	}
	return append(fs, processFamilies()...)
}

// readUint reads one runtime/metrics value, 0 where this Go lacks it.
func readUint(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// writeGCSummary writes the GC pause quantiles, sum and count.
func writeGCSummary(e *expWriter, name string) {
	var st debug.GCStats
	st.PauseQuantiles = make([]time.Duration, 5)
	debug.ReadGCStats(&st)
	for i, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
		e.sample(name, nil, nil, "quantile", q, st.PauseQuantiles[i].Seconds())
	}
	e.sample(name+"_sum", nil, nil, "", "", st.PauseTotal.Seconds())
	e.sample(name+"_count", nil, nil, "", "", float64(st.NumGC))
}
