package gateway

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/exechost/exechost/internal/config"
	"github.com/exechost/exechost/internal/hint"
)

// checkBrowser is the gateway's policy for requests a browser page could
// make. Host must be a loopback address, "localhost", the address the
// connection arrived on, or a configured gateway.allowedHosts name: a
// DNS-rebinding page's requests carry the attacker's name in Host, so they
// are refused here whatever else they send. Origin, when present (a
// browser page), must be loopback or listed in gateway.allowedOrigins; an
// Origin that merely equals Host proves nothing — a rebinding page sends
// exactly that.
func checkBrowser(r *http.Request, cfg config.Gateway) error {
	host := hostOnly(r.Host)
	if !hostAllowed(host, r, cfg.AllowedHosts) {
		return hint.Wrap(fmt.Errorf("host %q is not one this gateway answers to", r.Host), "add it to gateway.allowedHosts in exechost.json, or connect by IP address")
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil // not a browser page
	}
	u, err := url.Parse(origin)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("origin %q is not allowed", origin)
	}
	if isLoopback(hostOnly(u.Host)) {
		return nil
	}
	for _, pat := range cfg.AllowedOrigins {
		pat = strings.ToLower(strings.TrimSpace(pat))
		target := strings.ToLower(u.Host)
		if strings.Contains(pat, "://") {
			target = strings.ToLower(u.Scheme + "://" + u.Host)
		}
		if ok, _ := path.Match(pat, target); ok {
			return nil
		}
	}
	return hint.Wrap(fmt.Errorf("origin %q is not allowed", origin), "list it in gateway.allowedOrigins in exechost.json")
}

// hostOnly strips the port and IPv6 brackets from a host[:port].
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return strings.ToLower(h)
	}
	return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"))
}

// isLoopback reports whether host is a loopback IP literal or
// "localhost" (which browsers resolve to loopback themselves, never
// through DNS).
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func hostAllowed(host string, r *http.Request, allowed []string) bool {
	if host == "" {
		return false
	}
	if isLoopback(host) {
		return true
	}
	// The IP address the client connected to cannot be rebound: a page
	// whose origin is that address is the gateway's own origin.
	if ip := net.ParseIP(host); ip != nil {
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			if lh, _, err := net.SplitHostPort(la.String()); err == nil {
				if lip := net.ParseIP(lh); lip != nil && lip.Equal(ip) {
					return true
				}
			}
		}
	}
	for _, pat := range allowed {
		if ok, _ := path.Match(strings.ToLower(strings.TrimSpace(pat)), host); ok {
			return true
		}
	}
	return false
}
