package metrics

import (
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// The Prometheus text exposition format (version 0.0.4), written by hand:
// the gateway needs counters, gauges and histograms only, and the client
// library's package initialisation (its registry, protobuf, procfs) ran at
// every start of the one binary — the interpreter, the confining launcher,
// each CLI call — not only in a gateway that serves /metrics.

// contentType is what a scraper is told it gets.
const contentType = "text/plain; version=0.0.4; charset=utf-8"

// Metric type names as the # TYPE line spells them.
const (
	typeCounter   = "counter"
	typeGauge     = "gauge"
	typeHistogram = "histogram"
	typeSummary   = "summary"
)

// defBuckets are the client library's default histogram buckets, kept for
// the series that used them.
var defBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// gauge is a value that goes up and down; the gateway's are counts.
type gauge struct{ v atomic.Int64 }

func (g *gauge) set(n int) { g.v.Store(int64(n)) }

// counterVec counts by label values; the label names are fixed at
// construction and every call passes one value per name, in that order.
type counterVec struct {
	labels []string
	mu     sync.Mutex
	series map[string]*counterSeries
}

type counterSeries struct {
	values []string
	n      uint64
}

func newCounterVec(labels ...string) *counterVec {
	return &counterVec{labels: labels, series: map[string]*counterSeries{}}
}

// inc adds one to the series of values.
func (c *counterVec) inc(values ...string) {
	key := strings.Join(values, "\xff")
	c.mu.Lock()
	s := c.series[key]
	if s == nil {
		s = &counterSeries{values: slices.Clone(values)}
		c.series[key] = s
	}
	s.n++
	c.mu.Unlock()
}

// histogramVec records observations into fixed cumulative buckets by label
// values; with no label names it has one series (values nil).
type histogramVec struct {
	labels  []string
	buckets []float64 // upper bounds, ascending; +Inf is implied
	mu      sync.Mutex
	series  map[string]*histogramSeries
}

type histogramSeries struct {
	values []string
	counts []uint64 // per bucket, not cumulative; the last is +Inf
	sum    float64
	n      uint64
}

func newHistogramVec(buckets []float64, labels ...string) *histogramVec {
	return &histogramVec{labels: labels, buckets: buckets, series: map[string]*histogramSeries{}}
}

// observe records v in the series of values.
func (h *histogramVec) observe(v float64, values ...string) {
	key := strings.Join(values, "\xff")
	i, _ := slices.BinarySearch(h.buckets, v) // first bound ≥ v: "le" is inclusive
	h.mu.Lock()
	s := h.series[key]
	if s == nil {
		s = &histogramSeries{values: slices.Clone(values), counts: make([]uint64, len(h.buckets)+1)}
		h.series[key] = s
	}
	s.counts[i]++
	s.sum += v
	s.n++
	h.mu.Unlock()
}

// family is one metric family as written: its samples are rendered when
// the scrape reaches it.
type family struct {
	name, help, typ string
	write           func(w *expWriter, name string)
}

// expWriter writes the text format; the first write error sticks and ends
// the output.
type expWriter struct {
	w   io.Writer
	buf []byte
	err error
}

// flush hands what is buffered to the writer.
func (e *expWriter) flush() {
	if e.err == nil && len(e.buf) > 0 {
		_, e.err = e.w.Write(e.buf)
	}
	e.buf = e.buf[:0]
}

// header writes a family's HELP and TYPE lines.
func (e *expWriter) header(f family) {
	e.buf = append(e.buf, "# HELP "...)
	e.buf = append(e.buf, f.name...)
	e.buf = append(e.buf, ' ')
	e.buf = appendEscaped(e.buf, f.help, false)
	e.buf = append(e.buf, "\n# TYPE "...)
	e.buf = append(e.buf, f.name...)
	e.buf = append(e.buf, ' ')
	e.buf = append(e.buf, f.typ...)
	e.buf = append(e.buf, '\n')
}

// sample writes one line: name{labels} value. names and values pair up;
// extraName/extraValue (a histogram's "le", a summary's "quantile") go
// last, as the client library wrote them.
func (e *expWriter) sample(name string, names, values []string, extraName, extraValue string, v float64) {
	e.buf = append(e.buf, name...)
	if len(names) > 0 || extraName != "" {
		e.buf = append(e.buf, '{')
		for i, n := range names {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = appendLabel(e.buf, n, values[i])
		}
		if extraName != "" {
			if len(names) > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = appendLabel(e.buf, extraName, extraValue)
		}
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, ' ')
	e.buf = appendFloat(e.buf, v)
	e.buf = append(e.buf, '\n')
	if len(e.buf) > 32<<10 {
		e.flush()
	}
}

func appendLabel(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, `="`...)
	b = appendEscaped(b, value, true)
	return append(b, '"')
}

// appendEscaped escapes as the format requires: backslash and newline
// everywhere, the double quote in label values.
func appendEscaped(b []byte, s string, quote bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendFloat formats as the client library did: the shortest 'g' form,
// and +Inf, -Inf, NaN spelled out.
func appendFloat(b []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// sortedLabels returns the label names in the order they are written
// (sorted) and, for each, its index in the order values are passed.
func sortedLabels(labels []string) (names []string, idx []int) {
	idx = make([]int, len(labels))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(labels[a], labels[b]) })
	names = make([]string, len(labels))
	for i, j := range idx {
		names[i] = labels[j]
	}
	return names, idx
}

// permute returns values in the written label order.
func permute(values []string, idx []int) []string {
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = values[j]
	}
	return out
}

// write writes every series of c, ordered by label values.
func (c *counterVec) write(e *expWriter, name string) {
	names, idx := sortedLabels(c.labels)
	type row struct {
		values []string
		n      uint64
	}
	c.mu.Lock()
	rows := make([]row, 0, len(c.series))
	for _, s := range c.series {
		rows = append(rows, row{permute(s.values, idx), s.n})
	}
	c.mu.Unlock()
	if len(c.labels) == 0 && len(rows) == 0 {
		rows = append(rows, row{}) // an unlabelled counter is 0 before its first count
	}
	slices.SortFunc(rows, func(a, b row) int { return slices.Compare(a.values, b.values) })
	for _, r := range rows {
		e.sample(name, names, r.values, "", "", float64(r.n))
	}
}

// write writes every series of h, ordered by label values: cumulative
// buckets, +Inf, _sum, _count. A histogram without labels has its one
// series even before the first observation, as with the client library.
func (h *histogramVec) write(e *expWriter, name string) {
	names, idx := sortedLabels(h.labels)
	type row struct {
		values []string
		counts []uint64
		sum    float64
		n      uint64
	}
	h.mu.Lock()
	rows := make([]row, 0, len(h.series)+1)
	for _, s := range h.series {
		rows = append(rows, row{permute(s.values, idx), slices.Clone(s.counts), s.sum, s.n})
	}
	h.mu.Unlock()
	if len(h.labels) == 0 && len(rows) == 0 {
		rows = append(rows, row{counts: make([]uint64, len(h.buckets)+1)})
	}
	slices.SortFunc(rows, func(a, b row) int { return slices.Compare(a.values, b.values) })
	for _, r := range rows {
		var cum uint64
		for i, le := range h.buckets {
			cum += r.counts[i]
			e.sample(name+"_bucket", names, r.values, "le", string(appendFloat(nil, le)), float64(cum))
		}
		e.sample(name+"_bucket", names, r.values, "le", "+Inf", float64(r.n))
		e.sample(name+"_sum", names, r.values, "", "", r.sum)
		e.sample(name+"_count", names, r.values, "", "", float64(r.n))
	}
}

// scalar is a family with one unlabelled sample.
func scalar(name, help, typ string, v func() float64) family {
	return family{name: name, help: help, typ: typ, write: func(e *expWriter, name string) {
		e.sample(name, nil, nil, "", "", v())
	}}
}
