package web

import (
	"net/http/httptest"
	"testing"

	"github.com/exechost/exechost/internal/prompt"
)

// BenchmarkPendingThroughGuard measures one authenticated GET of the
// pending queue (security layer, broker list, JSON) without the network.
func BenchmarkPendingThroughGuard(b *testing.B) {
	const addr = "127.0.0.1:8080"
	h, secret, err := NewHandler(Options{Addr: addr, Broker: prompt.NewBroker()})
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest("GET", "http://"+addr+"/api/pending", nil)
	req.Header.Set(SecretHeader, secret)
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatalf("status %d", w.Code)
		}
	}
}
