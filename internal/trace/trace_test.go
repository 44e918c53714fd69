package trace_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	collpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/exechost/exechost/internal/trace"
)

// receiver is a real OTLP/HTTP trace receiver on loopback. It accepts
// what a collector accepts on /v1/traces with Content-Type
// application/json: the OTLP JSON mapping, decoded strictly (unknown
// fields refused) by protojson into the proto's own types, ids turned
// from the mapping's hex into the bytes protojson expects first.
func receiver(t *testing.T) (string, <-chan *collpb.ExportTraceServiceRequest, <-chan http.Header) {
	got := make(chan *collpb.ExportTraceServiceRequest, 16)
	hdrs := make(chan http.Header, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/traces" || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "want POST /v1/traces application/json", http.StatusUnsupportedMediaType)
			return
		}
		req, err := decodeOTLPJSON(body)
		if err != nil {
			t.Errorf("receiver: %v\n%s", err, body)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got <- req
		hdrs <- r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("{}"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, got, hdrs
}

// decodeOTLPJSON decodes an OTLP/HTTP JSON body the way a collector does:
// OTLP JSON differs from protojson only in trace and span ids (hex, not
// base64).
func decodeOTLPJSON(body []byte) (*collpb.ExportTraceServiceRequest, error) {
	var generic any
	if err := json.Unmarshal(body, &generic); err != nil {
		return nil, err
	}
	var fix func(any) error
	fix = func(v any) error {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "traceId" || k == "spanId" || k == "parentSpanId") {
					b, err := hex.DecodeString(s)
					if err != nil {
						return fmt.Errorf("%s %q is not hex: %w", k, s, err)
					}
					v[k] = base64.StdEncoding.EncodeToString(b)
					continue
				}
				if err := fix(x); err != nil {
					return err
				}
			}
		case []any:
			for _, x := range v {
				if err := fix(x); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := fix(generic); err != nil {
		return nil, err
	}
	b, _ := json.Marshal(generic)
	var req collpb.ExportTraceServiceRequest
	if err := (protojson.UnmarshalOptions{}).Unmarshal(b, &req); err != nil {
		return nil, fmt.Errorf("not OTLP JSON: %w", err)
	}
	return &req, nil
}

// TestSpansReachAnOTLPReceiver: with telemetry.otlp.endpoint (or the
// standard variable) set, the exec span arrives at a real receiver with
// the agent's trace id and parent span id.
func TestSpansReachAnOTLPReceiver(t *testing.T) {
	url, got, _ := receiver(t)
	for _, tc := range []struct {
		name string
		opts trace.Options
	}{
		{"config", trace.Options{Endpoint: url, Getenv: func(string) string { return "" }}},
		{"environment", trace.Options{Getenv: func(k string) string {
			if k == "OTEL_EXPORTER_OTLP_ENDPOINT" {
				return url
			}
			return ""
		}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			tr, err := trace.New(ctx, tc.opts)
			if err != nil || tr == nil {
				t.Fatalf("New: %v, %v", tr, err)
			}
			_, span := tr.StartExec(ctx, trace.Exec{AgentID: "main", Host: "node", Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
			code := 0
			trace.EndExec(span, trace.Result{RunID: "run-1", Status: "completed", ExitCode: &code})
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := tr.Shutdown(sctx); err != nil {
				t.Fatal(err)
			}
			select {
			case req := <-got:
				s := req.ResourceSpans[0].ScopeSpans[0].Spans[0]
				if s.Name != trace.SpanExec {
					t.Fatalf("span %q", s.Name)
				}
				if tid := hex.EncodeToString(s.TraceId); tid != "0af7651916cd43dd8448eb211c80319c" || hex.EncodeToString(s.ParentSpanId) != "b7ad6b7169203331" {
					t.Errorf("trace %s parent %s", tid, hex.EncodeToString(s.ParentSpanId))
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no export reached the receiver")
			}
		})
	}
}

// TestOffByDefault: no endpoint, no variable: no tracer, and its methods
// are no-ops; a malformed endpoint is an error, not silence.
func TestOffByDefault(t *testing.T) {
	tr, err := trace.New(context.Background(), trace.Options{Getenv: func(string) string { return "" }})
	if err != nil || tr != nil {
		t.Fatalf("New without configuration = %v, %v; want nil, nil", tr, err)
	}
	ctx, span := tr.StartExec(context.Background(), trace.Exec{})
	trace.Event(ctx, trace.EventHostRun)
	trace.EndExec(span, trace.Result{})
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := trace.New(context.Background(), trace.Options{Endpoint: "collector:4318"}); err == nil {
		t.Fatal("a scheme-less endpoint was accepted")
	}
}

// TestMalformedTraceparentStartsATrace: a bad traceparent never fails an
// exec; the span gets a trace of its own. Control: a good one is used.
func TestMalformedTraceparentStartsATrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr, err := trace.New(context.Background(), trace.Options{Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range []string{"00-nothex-x-01", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"} {
		_, span := tr.StartExec(context.Background(), trace.Exec{Traceparent: tp})
		trace.EndExec(span, trace.Result{Status: "completed"})
	}
	spans := exp.GetSpans()
	if len(spans) != 2 || spans[0].Parent.IsValid() || !spans[0].SpanContext.IsValid() {
		t.Fatalf("malformed traceparent: %d spans, parent %v", len(spans), spans[0].Parent)
	}
	if spans[1].Parent.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
		t.Fatalf("control: a valid traceparent was not used: %v", spans[1].Parent)
	}
}

// TestOTLPJSONMapping: what the receiver decodes is the span as the SDK
// recorded it: kind, status (OTLP's codes, not OTel's), typed attributes,
// events in order, unix-nano times, resource and scope; the
// TRACES_ENDPOINT variable is used as is and OTEL_EXPORTER_OTLP_HEADERS
// are sent.
func TestOTLPJSONMapping(t *testing.T) {
	url, got, hdrs := receiver(t)
	env := map[string]string{
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": url + "/v1/traces",
		"OTEL_EXPORTER_OTLP_ENDPOINT":        "http://127.0.0.1:1", // overridden by the TRACES_ one
		"OTEL_EXPORTER_OTLP_HEADERS":         "authorization=Bearer%20abc,x-tenant=one",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS":  "x-tenant=two",
	}
	ctx := context.Background()
	tr, err := trace.New(ctx, trace.Options{Version: "1.2.3", Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Unix(1700000000, 123456789)
	sctx, span := tr.StartExec(ctx, trace.Exec{AgentID: "main", Host: "gateway", CommandSHA256: "abc", Start: start})
	trace.Event(sctx, trace.EventHostRun, trace.AttrDecision.String("allow"))
	code := 3
	trace.EndExec(span, trace.Result{RunID: "run-9", Status: "failed", ExitCode: &code, OutputBytes: 42, ErrorType: "DENIED"})
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(dctx); err != nil {
		t.Fatal(err)
	}
	var req *collpb.ExportTraceServiceRequest
	select {
	case req = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no export reached the receiver")
	}
	h := <-hdrs
	if h.Get("Authorization") != "Bearer abc" || h.Get("X-Tenant") != "two" {
		t.Errorf("headers: authorization %q x-tenant %q", h.Get("Authorization"), h.Get("X-Tenant"))
	}
	rs := req.ResourceSpans[0]
	res := map[string]string{}
	for _, kv := range rs.Resource.Attributes {
		res[kv.Key] = kv.Value.GetStringValue()
	}
	if res["service.name"] != "exechost" || res["service.version"] != "1.2.3" {
		t.Errorf("resource %v", res)
	}
	ss := rs.ScopeSpans[0]
	if ss.Scope.Name != trace.ScopeName {
		t.Errorf("scope %q", ss.Scope.Name)
	}
	s := ss.Spans[0]
	if s.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("kind %v", s.Kind)
	}
	if s.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || s.Status.GetMessage() != "DENIED" {
		t.Errorf("status %v", s.Status)
	}
	if s.StartTimeUnixNano != uint64(start.UnixNano()) || s.EndTimeUnixNano < s.StartTimeUnixNano {
		t.Errorf("times %d..%d, want start %d", s.StartTimeUnixNano, s.EndTimeUnixNano, start.UnixNano())
	}
	attrs := map[string]*commonpb.AnyValue{}
	for _, kv := range s.Attributes {
		attrs[kv.Key] = kv.Value
	}
	if attrs["process.exit.code"].GetIntValue() != 3 || attrs[string(trace.AttrOutputBytes)].GetIntValue() != 42 ||
		attrs[string(trace.AttrTimedOut)] == nil || attrs[string(trace.AttrTimedOut)].GetBoolValue() ||
		attrs[string(trace.AttrRunID)].GetStringValue() != "run-9" || attrs["error.type"].GetStringValue() != "DENIED" {
		t.Errorf("attributes %v", s.Attributes)
	}
	if len(s.Events) != 2 || s.Events[0].Name != trace.EventReceived || s.Events[1].Name != trace.EventHostRun ||
		s.Events[1].Attributes[0].Value.GetStringValue() != "allow" || s.Events[1].TimeUnixNano == 0 {
		t.Errorf("events %v", s.Events)
	}
	if len(s.TraceId) != 16 || len(s.SpanId) != 8 || len(s.ParentSpanId) != 0 {
		t.Errorf("ids %x %x parent %x", s.TraceId, s.SpanId, s.ParentSpanId)
	}
}

// TestStuckCollectorIsBounded: a collector that accepts the connection and
// never answers holds neither the exec (spans are batched) nor shutdown
// beyond OTEL_EXPORTER_OTLP_TIMEOUT. Control: a longer timeout makes the
// same shutdown wait that much longer, so the timeout is what bounds it.
func TestStuckCollectorIsBounded(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	shutdown := func(timeout string) (execTook, shutdownTook time.Duration) {
		env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL, "OTEL_EXPORTER_OTLP_TIMEOUT": timeout}
		tr, err := trace.New(context.Background(), trace.Options{Getenv: func(k string) string { return env[k] }})
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		_, span := tr.StartExec(context.Background(), trace.Exec{AgentID: "main"})
		trace.EndExec(span, trace.Result{Status: "completed"})
		execTook = time.Since(t0)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		t1 := time.Now()
		_ = tr.Shutdown(ctx) // the export's timeout error is expected
		return execTook, time.Since(t1)
	}
	execTook, short := shutdown("200")
	if execTook > time.Second {
		t.Errorf("the exec waited %v on a stuck collector", execTook)
	}
	if short > 3*time.Second {
		t.Errorf("shutdown with a 200 ms export timeout took %v", short)
	}
	_, long := shutdown("2500")
	if long < 2500*time.Millisecond || long < short+time.Second {
		t.Errorf("control: shutdown with a 2.5 s timeout took %v (200 ms: %v); the timeout does not bound the export", long, short)
	}
}

// TestBadExporterConfiguration: malformed variables are errors naming the
// variable, not an exporter that silently sends nothing.
func TestBadExporterConfiguration(t *testing.T) {
	for _, env := range []map[string]string{
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "ftp://collector/v1/traces"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_HEADERS": "novalue"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TIMEOUT": "10s"},
	} {
		_, err := trace.New(context.Background(), trace.Options{Getenv: func(k string) string { return env[k] }})
		named := false
		for k := range env {
			if err != nil && strings.Contains(err.Error(), k) {
				named = true
			}
		}
		if !named {
			t.Errorf("%v: err %v, want one naming the bad variable", env, err)
		}
	}
}
