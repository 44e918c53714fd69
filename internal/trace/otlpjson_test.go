package trace

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestRefusedExportIsAnError: a collector's refusal comes back from
// ExportSpans with its status and body (for the OTel error handler), and
// an unreachable one names the URL; neither panics nor blocks.
func TestRefusedExportIsAnError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "unsupported content type", http.StatusUnsupportedMediaType)
	}))
	defer srv.Close()
	spans := tracetest.SpanStubs{{Name: SpanExec}}.Snapshots()
	e := newJSONExporter(exporterConfig{URL: srv.URL + "/v1/traces", Timeout: 5 * time.Second})
	err := e.ExportSpans(context.Background(), spans)
	if err == nil || !strings.Contains(err.Error(), "415") || !strings.Contains(err.Error(), "unsupported content type") {
		t.Fatalf("refused export: %v", err)
	}
	srv.Close()
	err = e.ExportSpans(context.Background(), spans)
	if err == nil || !strings.Contains(err.Error(), srv.URL) {
		t.Fatalf("unreachable collector: %v", err)
	}
	// After shutdown nothing is sent.
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.ExportSpans(context.Background(), spans); err != nil {
		t.Fatalf("export after shutdown: %v", err)
	}
}
