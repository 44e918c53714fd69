package trace_test

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	collpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/exechost/exechost/internal/trace"
)

// receiver is a real OTLP/HTTP trace receiver on loopback.
func receiver(t *testing.T) (string, <-chan *collpb.ExportTraceServiceRequest) {
	got := make(chan *collpb.ExportTraceServiceRequest, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collpb.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		got <- &req
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&collpb.ExportTraceServiceResponse{})
		w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, got
}

// TestSpansReachAnOTLPReceiver: with telemetry.otlp.endpoint (or the
// standard variable) set, the exec span arrives at a real receiver with
// the agent's trace id and parent span id.
func TestSpansReachAnOTLPReceiver(t *testing.T) {
	url, got := receiver(t)
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
			if tc.name == "environment" {
				t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url) // the exporter reads the process's own
			}
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
