package gateway

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/config"
)

// FuzzCheckBrowser feeds arbitrary Host and Origin headers to the
// gateway's browser policy. Whatever arrives, an accepted request's Host
// is loopback, the connected address or an allowed name, and an accepted
// Origin is loopback or allowed — never merely equal to Host.
func FuzzCheckBrowser(f *testing.F) {
	f.Add("127.0.0.1:18789", "")
	f.Add("rebind.example:18789", "http://rebind.example:18789")
	f.Add("localhost:1", "http://localhost:3000")
	f.Add("[::1]:1", "http://[::1]:8080")
	f.Add("gw.example", "https://ops.example")
	f.Add("10.0.0.5:18789", "http://10.0.0.5:18789")
	f.Add("LOCALHOST", "null")
	f.Add("", "http://127.0.0.1.rebind.example")
	cfg := config.Gateway{AllowedHosts: []string{"gw.example"}, AllowedOrigins: []string{"https://ops.example"}}
	local := &net.TCPAddr{IP: net.ParseIP("10.0.0.5"), Port: 18789}
	f.Fuzz(func(t *testing.T, host, origin string) {
		r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
		r.Host = host
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.Addr(local)))
		if checkBrowser(r, cfg) != nil {
			return
		}
		h := hostOnly(host)
		if !isLoopback(h) && h != "gw.example" && !net.ParseIP(h).Equal(local.IP) {
			t.Fatalf("accepted Host %q", host)
		}
		if origin == "" {
			return
		}
		u, err := url.Parse(origin)
		if err != nil {
			t.Fatalf("accepted unparsable Origin %q", origin)
		}
		if !isLoopback(hostOnly(u.Host)) && strings.ToLower(u.Scheme+"://"+u.Host) != "https://ops.example" {
			t.Fatalf("accepted Origin %q for Host %q", origin, host)
		}
	})
}
