//go:build linux

package main

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// sample is one measured operation: per-iteration latencies (or a single
// figure for throughput-style rows).
type sample struct {
	name string
	durs []time.Duration
	// value/unit override latency formatting for non-latency figures
	// (MB/s, KB/node, bytes); higher-is-better rows set better=+1.
	value  float64
	unit   string
	better int
}

func (s sample) pct(p float64) time.Duration {
	if len(s.durs) == 0 {
		return 0
	}
	d := append([]time.Duration(nil), s.durs...)
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	idx := int(math.Ceil(p*float64(len(d)))) - 1
	if idx < 0 {
		idx = 0
	}
	return d[idx]
}

// measure runs op n times after warm warm-up runs and records each latency.
// An error aborts the row (reported, not hidden).
func measure(name string, warm, n int, op func() error) (sample, error) {
	for i := 0; i < warm; i++ {
		if err := op(); err != nil {
			return sample{}, fmt.Errorf("%s: warm-up: %w", name, err)
		}
	}
	s := sample{name: name, durs: make([]time.Duration, 0, n)}
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := op(); err != nil {
			return sample{}, fmt.Errorf("%s: %w", name, err)
		}
		s.durs = append(s.durs, time.Since(t0))
	}
	return s, nil
}

// row is one line of the report: a measurement next to its baseline.
type row struct {
	section  string
	what     string
	s        sample
	baseline *sample
	target   string
	met      string // "yes", "no", "n/a"
	note     string
	// err is why the row has no figure (a skip says "not available: why").
	err error
}

func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "−" + fmtDur(-d) // a difference of two p50s (noise can make it negative)
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.1f µs", float64(d)/1e3)
	}
}

func (r row) cells() (p50, p99, ratio string) {
	if r.err != nil {
		return "—", "—", "—"
	}
	if r.s.unit != "" {
		p50 = fmt.Sprintf("%.1f %s", r.s.value, r.s.unit)
		p99 = "—"
		if r.baseline != nil && r.baseline.value > 0 {
			ratio = fmt.Sprintf("%.2f×", r.s.value/r.baseline.value)
		}
		return
	}
	p50, p99 = fmtDur(r.s.pct(0.50)), fmtDur(r.s.pct(0.99))
	if len(r.s.durs) == 1 {
		p99 = "—" // a single figure (the connect storm)
	}
	if r.baseline != nil && r.baseline.pct(0.5) > 0 {
		ratio = fmt.Sprintf("%.2f×", float64(r.s.pct(0.5))/float64(r.baseline.pct(0.5)))
	}
	return
}
