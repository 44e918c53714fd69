package node

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/bridge"
)

// A gateway whose handshake slots are taken answers the node's upgrade
// 503: the node reads it as the gateway's BUSY answer (and reconnects
// with its backoff), not as an absent gateway.
func TestDialBusyGateway(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many connections from loopback are still authenticating (limit 16); retry shortly", http.StatusServiceUnavailable)
	}))
	t.Cleanup(hs.Close)
	c := &Client{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.dial(ctx, Identity{Gateway: IdentityGateway{URL: "ws" + strings.TrimPrefix(hs.URL, "http")}})
	var be *bridge.Error
	if !errors.As(err, &be) || be.Code != bridge.CodeBusy || !strings.Contains(be.Message, "still authenticating") {
		t.Fatalf("dial a busy gateway: %v, want its BUSY answer", err)
	}
}
