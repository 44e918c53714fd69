package openclaw

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/exechost/exechost/internal/bridge"
)

// tlsRecorder is a wss:// server that speaks the start of OpenClaw's
// handshake (a connect.challenge) and records every message it reads:
// what a server answering at the gateway's address would learn.
type tlsRecorder struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  []string
	hits int // HTTP requests that reached the handler
}

func (r *tlsRecorder) received() (hits int, msgs []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hits, append([]string(nil), r.got...)
}

// newTLSRecorder listens on this machine's first non-loopback address
// (the case the pin is for), or on loopback when it has none.
func newTLSRecorder(t *testing.T) *tlsRecorder {
	t.Helper()
	r := &tlsRecorder{}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.hits++
		r.mu.Unlock()
		ws, err := websocket.Accept(w, req, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ctx, cancel := context.WithTimeout(req.Context(), testLimit)
		defer cancel()
		if err := ws.Write(ctx, websocket.MessageText, []byte(`{"type":"event","event":"connect.challenge","payload":{"nonce":"n0nce","ts":1737264000000}}`)); err != nil {
			return
		}
		_, data, err := ws.Read(ctx)
		if err != nil {
			return
		}
		r.mu.Lock()
		r.got = append(r.got, string(data))
		r.mu.Unlock()
	}))
	addr := "127.0.0.1:0"
	if ip := nonLoopbackIP(); ip != "" {
		addr = net.JoinHostPort(ip, "0")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r.srv.Listener = ln
	r.srv.StartTLS()
	t.Cleanup(r.srv.Close)
	t.Logf("wss server at %s", r.srv.Listener.Addr())
	return r
}

func (r *tlsRecorder) url() string { return "wss" + strings.TrimPrefix(r.srv.URL, "https") }

func (r *tlsRecorder) fingerprint() string {
	sum := sha256.Sum256(r.srv.Certificate().Raw)
	return hex.EncodeToString(sum[:])
}

func nonLoopbackIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return ""
}

// TestPinnedFingerprintRefusesAnotherCertificate is the OpenClaw door off
// loopback: with a pinned fingerprint, a wss:// server showing another
// certificate gets no request at all, so no byte of the token, and the
// error names both fingerprints. Control: with its own certificate's
// fingerprint pinned, the same server receives the connect frame and the
// token in it.
func TestPinnedFingerprintRefusesAnotherCertificate(t *testing.T) {
	r := newTLSRecorder(t)
	id, err := LoadOrCreateIdentity(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testLimit)
	defer cancel()
	p := dialParams{URL: r.url(), Token: "oc-secret-token", Identity: id, Role: RoleNode, ClientID: ClientID, ClientMode: ClientMode, Version: "test"}

	wrong := strings.Repeat("ab", sha256.Size)
	p.TLSFingerprint = "SHA256:" + strings.ToUpper(wrong[:2]) + ":" + wrong[2:] // the forms a user copies are accepted
	_, _, err = dial(ctx, p, bridge.Options{NoPing: true})
	if !errors.Is(err, errPinMismatch) || !strings.Contains(err.Error(), r.fingerprint()) || !strings.Contains(err.Error(), wrong) {
		t.Fatalf("dial with another pin = %v, want a mismatch naming %s and %s", err, r.fingerprint(), wrong)
	}
	if hits, got := r.received(); hits != 0 || len(got) != 0 {
		t.Fatalf("the server got %d requests and read %q with the wrong pin", hits, got)
	}

	// The pin from the environment, as every exechost client reads it.
	p.TLSFingerprint = ""
	t.Setenv("EXECHOST_TLS_FINGERPRINT", wrong)
	if _, _, err = dial(ctx, p, bridge.Options{NoPing: true}); !errors.Is(err, errPinMismatch) {
		t.Fatalf("dial with $EXECHOST_TLS_FINGERPRINT wrong = %v, want a mismatch", err)
	}
	if hits, _ := r.received(); hits != 0 {
		t.Fatalf("the server got %d requests with the wrong pin in the environment", hits)
	}

	// Control: the right pin, and the connect frame with the token arrives.
	p.TLSFingerprint = r.fingerprint()
	_, _, err = dial(ctx, p, bridge.Options{NoPing: true})
	if err == nil {
		t.Fatal("the recorder answered no hello-ok, yet the dial succeeded")
	}
	deadline := time.Now().Add(testLimit)
	for {
		_, got := r.received()
		if len(got) == 1 && strings.Contains(got[0], `"oc-secret-token"`) && strings.Contains(got[0], `"connect"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("control: with the right pin the server read %q, want the connect frame with the token (dial: %v)", got, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestUnpinnedUsesNormalVerification: without a pin, TLS's normal
// verification applies: a certificate no trusted CA signed (the test
// server's) is refused before any request. Control: the same server with
// its fingerprint pinned is reached (above), and a malformed pin is an
// error, never "no pin".
func TestUnpinnedUsesNormalVerification(t *testing.T) {
	r := newTLSRecorder(t)
	id, err := LoadOrCreateIdentity(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("EXECHOST_TLS_FINGERPRINT", "")
	ctx, cancel := context.WithTimeout(context.Background(), testLimit)
	defer cancel()
	p := dialParams{URL: r.url(), Token: "oc-secret-token", Identity: id, Role: RoleNode, ClientID: ClientID, ClientMode: ClientMode, Version: "test"}
	_, _, err = dial(ctx, p, bridge.Options{NoPing: true})
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("unpinned dial to an untrusted certificate = %v, want a verification failure", err)
	}
	if hits, _ := r.received(); hits != 0 {
		t.Fatalf("the server got %d requests without a pin", hits)
	}
	p.TLSFingerprint = "abcd"
	if _, _, err = dial(ctx, p, bridge.Options{NoPing: true}); err == nil || !strings.Contains(err.Error(), "not a SHA-256 fingerprint") {
		t.Fatalf("malformed pin = %v, want refused", err)
	}
	if _, err := New(Options{GatewayURL: r.url(), StateDir: t.TempDir(), TLSFingerprint: "abcd"}); err == nil {
		t.Fatal("New accepted a malformed pin")
	}
}
