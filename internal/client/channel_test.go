package client_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/client"
	"github.com/exechost/exechost/internal/testproc"
)

// TestDialRefusesGatewayWithoutChannel: a server that shows the pinned
// key but offers no channel (a gateway of before the channel, or one
// pretending to be) gets nothing of the credential, and the failure is a
// refused handshake with the reason, not "unreachable".
func TestDialRefusesGatewayWithoutChannel(t *testing.T) {
	clearEnv(t)
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key := base64.RawURLEncoding.EncodeToString(pub)
	got := make(chan []byte, 1)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		ch, _ := bridge.NewEvent(bridge.EventConnectChallenge, bridge.ConnectChallenge{Nonce: bridge.NewNonce(), GatewayKey: key}, 0)
		if bridge.WriteFrame(ctx, ws, ch) != nil {
			return
		}
		_, data, _ := ws.Read(ctx)
		got <- data
	}))
	defer hs.Close()
	_, err = client.Dial(testCtx(t), "ws"+strings.TrimPrefix(hs.URL, "http"), client.Options{Role: bridge.RoleOperator, Auth: client.Auth{Token: "ehg_secret", GatewayKey: key}})
	if !errors.Is(err, bridge.ErrChannel) || errors.Is(err, client.ErrUnreachable) || !strings.Contains(err.Error(), "upgrade the gateway") {
		t.Fatalf("Dial to a gateway without the channel: %v", err)
	}
	if data := testproc.Recv(t, got, "what the server read"); len(data) != 0 {
		t.Fatalf("the client sent %q", data)
	}
}
