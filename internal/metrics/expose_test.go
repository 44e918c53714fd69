package metrics

import (
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// parse reads a scrape with the Prometheus project's own text parser, the
// reference for what a scraper accepts.
func parse(t *testing.T, body string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("the Prometheus parser refuses the scrape: %v\n%s", err, body)
	}
	return fams
}

// labelsOf renders a sample's labels as name=value pairs in order.
func labelsOf(m *dto.Metric) []string {
	var out []string
	for _, l := range m.GetLabel() {
		out = append(out, l.GetName()+"="+l.GetValue())
	}
	return out
}

// TestExpositionParses: every family the gateway serves parses with the
// Prometheus parser as the type it was declared, with the values recorded
// (histogram buckets cumulative, the "le" bound inclusive), and the go_*
// and process_* families dashboards chart are there.
func TestExpositionParses(t *testing.T) {
	m := New()
	m.ObserveExec("node", "allow", OutcomeSuccess, 2*time.Second)
	m.ObserveExec("node", "allow", OutcomeSuccess, 2500*time.Millisecond) // on a bound: counted in le="2.5"
	m.ObserveExec("gateway", "deny", OutcomeDenied, 0)
	m.ObserveExec("gateway", "ask", OutcomeTimeout, time.Hour) // above every bound: only +Inf
	m.SetPendingApprovals(3)
	m.SetConnectedNodes(2)
	m.ObserveNodeInvoke(150 * time.Millisecond)
	m.EventQueueDrop()
	m.ObserveDecision("exec", "denied", "binding", "node")

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got := resp.Header.Get("Content-Type"); expfmt.ResponseFormat(resp.Header).FormatType() != expfmt.TypeTextPlain {
		t.Errorf("Content-Type %q is not the text format", got)
	}
	fams, err := func() (map[string]*dto.MetricFamily, error) {
		p := expfmt.NewTextParser(model.LegacyValidation)
		return p.TextToMetricFamilies(resp.Body)
	}()
	if err != nil {
		t.Fatalf("the Prometheus parser refuses the scrape: %v", err)
	}

	wantTypes := map[string]dto.MetricType{
		"exechost_execs_total":             dto.MetricType_COUNTER,
		"exechost_exec_duration_seconds":   dto.MetricType_HISTOGRAM,
		"exechost_pending_approvals":       dto.MetricType_GAUGE,
		"exechost_connected_nodes":         dto.MetricType_GAUGE,
		"exechost_node_invoke_seconds":     dto.MetricType_HISTOGRAM,
		"exechost_event_queue_drops_total": dto.MetricType_COUNTER,
		"exechost_gateway_decisions_total": dto.MetricType_COUNTER,
		"go_goroutines":                    dto.MetricType_GAUGE,
		"go_threads":                       dto.MetricType_GAUGE,
		"go_info":                          dto.MetricType_GAUGE,
		"go_gc_duration_seconds":           dto.MetricType_SUMMARY,
		"go_memstats_alloc_bytes":          dto.MetricType_GAUGE,
		"go_memstats_alloc_bytes_total":    dto.MetricType_COUNTER,
		"go_memstats_heap_inuse_bytes":     dto.MetricType_GAUGE,
		"go_memstats_sys_bytes":            dto.MetricType_GAUGE,
		"process_cpu_seconds_total":        dto.MetricType_COUNTER,
		"process_resident_memory_bytes":    dto.MetricType_GAUGE,
		"process_open_fds":                 dto.MetricType_GAUGE,
		"process_max_fds":                  dto.MetricType_GAUGE,
		"process_start_time_seconds":       dto.MetricType_GAUGE,
	}
	for name, typ := range wantTypes {
		f := fams[name]
		if f == nil {
			t.Errorf("no family %s", name)
			continue
		}
		if f.GetType() != typ {
			t.Errorf("%s is a %v, want %v", name, f.GetType(), typ)
		}
		if f.GetHelp() == "" {
			t.Errorf("%s has no help", name)
		}
	}

	counters := map[string]float64{}
	for _, s := range fams["exechost_execs_total"].GetMetric() {
		counters[strings.Join(labelsOf(s), ",")] = s.GetCounter().GetValue()
	}
	if diff := cmp.Diff(map[string]float64{
		"decision=allow,host=node,outcome=success":  2,
		"decision=deny,host=gateway,outcome=denied": 1,
		"decision=ask,host=gateway,outcome=timeout": 1,
	}, counters); diff != "" {
		t.Errorf("exechost_execs_total (-want +got):\n%s", diff)
	}

	for _, s := range fams["exechost_exec_duration_seconds"].GetMetric() {
		h := s.GetHistogram()
		buckets := map[float64]uint64{}
		for _, b := range h.GetBucket() {
			buckets[b.GetUpperBound()] = b.GetCumulativeCount()
		}
		switch host := labelsOf(s); {
		case slices.Equal(host, []string{"host=node"}):
			if h.GetSampleCount() != 2 || h.GetSampleSum() != 4.5 || buckets[1] != 0 || buckets[2.5] != 2 || buckets[1800] != 2 {
				t.Errorf("node histogram: count %d sum %v buckets %v", h.GetSampleCount(), h.GetSampleSum(), buckets)
			}
		case slices.Equal(host, []string{"host=gateway"}):
			if h.GetSampleCount() != 1 || buckets[1800] != 0 || buckets[math.Inf(1)] != 1 {
				t.Errorf("gateway histogram (the denied exec is not timed): count %d buckets %v", h.GetSampleCount(), buckets)
			}
		default:
			t.Errorf("unexpected series %v", host)
		}
	}
	if got := fams["exechost_pending_approvals"].GetMetric()[0].GetGauge().GetValue(); got != 3 {
		t.Errorf("pending approvals %v, want 3", got)
	}
	if got := fams["exechost_event_queue_drops_total"].GetMetric()[0].GetCounter().GetValue(); got != 1 {
		t.Errorf("event drops %v, want 1", got)
	}
	if got := fams["exechost_node_invoke_seconds"].GetMetric()[0].GetHistogram(); got.GetSampleCount() != 1 || len(got.GetBucket()) != len(defBuckets)+1 {
		t.Errorf("node invoke histogram: %v", got)
	}
	if got := fams["process_start_time_seconds"].GetMetric()[0].GetGauge().GetValue(); math.Abs(got-float64(time.Now().Unix())) > 24*3600 {
		t.Errorf("process start time %v is not near now", got)
	}
}

// TestExpositionEscapes: label values and help text with the characters
// the format escapes come back unchanged through the Prometheus parser,
// and series are written in a stable order (sorted label names, then
// values).
func TestExpositionEscapes(t *testing.T) {
	c := newCounterVec("zeta", "alpha")
	odd := "a \"quoted\" back\\slash\nnew line …"
	c.inc(odd, "2")
	c.inc("b", "1")
	c.inc("b", "1")
	var b strings.Builder
	e := &expWriter{w: &b}
	f := family{name: "t_total", help: "help with \\ and\nnewline", typ: typeCounter, write: c.write}
	e.header(f)
	f.write(e, f.name)
	e.flush()
	if e.err != nil {
		t.Fatal(e.err)
	}
	want := "# HELP t_total help with \\\\ and\\nnewline\n# TYPE t_total counter\n" +
		"t_total{alpha=\"1\",zeta=\"b\"} 2\n" +
		"t_total{alpha=\"2\",zeta=\"a \\\"quoted\\\" back\\\\slash\\nnew line …\"} 1\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("text (-want +got):\n%s", diff)
	}
	fams := parse(t, b.String())
	if got := fams["t_total"].GetHelp(); got != "help with \\ and\nnewline" {
		t.Errorf("help %q", got)
	}
	var values []string
	for _, m := range fams["t_total"].GetMetric() {
		values = append(values, strings.Join(labelsOf(m), ","))
	}
	if diff := cmp.Diff([]string{"alpha=1,zeta=b", "alpha=2,zeta=" + odd}, values); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
}

// TestHandlerIsText: the handler answers with the text format's content
// type, which scrapers negotiate on.
func TestHandlerIsText(t *testing.T) {
	rec := httptest.NewRecorder()
	New().Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if got := rec.Header().Get("Content-Type"); got != contentType {
		t.Errorf("Content-Type %q, want %q", got, contentType)
	}
}

// TestScrapeWhileRecording: scrapes run while other goroutines record
// (the gateway records from every connection); under -race this checks
// the locking, and every scrape still parses.
func TestScrapeWhileRecording(t *testing.T) {
	m := New()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; ; j++ {
				select {
				case <-done:
					return
				default:
				}
				m.ObserveExec([]string{"node", "gateway"}[j%2], "allow", OutcomeSuccess, time.Duration(i*j)*time.Millisecond)
				m.ObserveNodeInvoke(time.Millisecond)
				m.ObserveDecision("exec", "denied", "binding", "node")
				m.SetConnectedNodes(j)
				m.EventQueueDrop()
			}
		}()
	}
	for range 20 {
		var b strings.Builder
		if err := m.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		parse(t, b.String())
	}
	close(done)
	wg.Wait()
}
