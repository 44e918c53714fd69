package gateway

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/peeruid"
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
	// sharedLoopback counts all of loopback as one source, not one per
	// user (tests' control).
	sharedLoopback atomic.Bool
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

// handshakeSource is the source r's handshake counts against: sourceKey
// of its address, and on loopback the local user owning the peer socket
// ("loopback uid 1000"), so one user's idle upgrades cannot fill the slots
// every local client needs (16 of uid 999's left `nodes list` with 503).
// When the owner cannot be found the connection counts against all of
// loopback, as before.
func (g *Gateway) handshakeSource(r *http.Request) string {
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	src := sourceKey(host)
	if src != "loopback" || g.handshakes.sharedLoopback.Load() {
		return src
	}
	peer, err1 := netip.ParseAddrPort(r.RemoteAddr)
	self, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if err1 != nil || !ok {
		return src
	}
	me, err2 := netip.ParseAddrPort(self.String())
	if err2 != nil {
		return src
	}
	uid, err := peeruid.Loopback(peer, me)
	if err != nil {
		g.log.Debug("loopback peer's user not found; counting it against all of loopback", "remote", r.RemoteAddr, "err", err)
		return src
	}
	return "loopback uid " + strconv.FormatUint(uint64(uid), 10)
}

// refuseBusy answers an upgrade request the handshake limits refuse.
func refuseBusy(w http.ResponseWriter, e *bridge.Error) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, e.Message, http.StatusServiceUnavailable)
}
