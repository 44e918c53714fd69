package gateway

import (
	"net"
	"net/http"
	"sync"

	"github.com/exechost/exechost/internal/bridge"
)

// sourceKey groups remote addresses into the sources that per-source
// limits count: every loopback address is one source (a local process can
// bind 127.0.0.2, .3, … at will), an IPv6 address counts by its /64 (what
// one host is usually given), an IPv4 address by itself.
func sourceKey(ip string) string {
	a := net.ParseIP(ip)
	switch {
	case a == nil:
		return ip
	case a.IsLoopback():
		return "loopback"
	case a.To4() != nil:
		return a.To4().String()
	default:
		return a.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
}

// Bounds on connections that have not authenticated yet. A handshake
// lasts at most ConnectTimeout and its connect frame is at most
// MaxConnectFrame bytes, so these bound what unauthenticated peers can
// hold: MaxHandshakes × MaxConnectFrame of buffers in all.
const (
	// MaxConnectFrame is the read limit until a peer has authenticated;
	// a connect request is a few hundred bytes.
	MaxConnectFrame = 16 << 10
	// MaxHandshakes bounds connections between upgrade and a decided
	// connect, from everywhere.
	MaxHandshakes = 128
	// MaxHandshakesPerSource bounds them per source (sourceKey).
	MaxHandshakesPerSource = 16
)

// handshakes counts connections in their connect handshake, in all and
// per source.
type handshakes struct {
	mu     sync.Mutex
	total  int
	bySrc  map[string]int
	max    int // MaxHandshakes unless a test lowers it
	maxSrc int // MaxHandshakesPerSource unless a test lowers it
}

// enter takes a handshake slot for src, or says why there is none; the
// caller calls the returned release once the connect is decided.
func (h *handshakes) enter(src string) (release func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.bySrc == nil {
		h.bySrc = make(map[string]int)
	}
	maxAll, maxSrc := h.max, h.maxSrc
	if maxAll == 0 {
		maxAll = MaxHandshakes
	}
	if maxSrc == 0 {
		maxSrc = MaxHandshakesPerSource
	}
	if h.bySrc[src] >= maxSrc {
		return nil, bridge.Errorf(bridge.CodeBusy, "too many connections from %s are still authenticating (limit %d); retry shortly", src, maxSrc)
	}
	if h.total >= maxAll {
		return nil, bridge.Errorf(bridge.CodeBusy, "too many connections are still authenticating (limit %d); retry shortly", maxAll)
	}
	h.total++
	h.bySrc[src]++
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.total--
			if h.bySrc[src]--; h.bySrc[src] <= 0 {
				delete(h.bySrc, src)
			}
		})
	}, nil
}

// refuseBusy answers an upgrade request the handshake limits refuse.
func refuseBusy(w http.ResponseWriter, e *bridge.Error) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, e.Message, http.StatusServiceUnavailable)
}
