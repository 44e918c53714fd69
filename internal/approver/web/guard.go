package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// Header and parameter names of the security layer.
const (
	// SecretParam is the query parameter of the URL printed at start. It is
	// exchanged once for a cookie so the secret leaves the address bar.
	SecretParam = "k"
	// CSRFHeader carries the per-run CSRF token on every mutation.
	CSRFHeader = "X-CSRF-Token"
	// cookiePrefix is followed by the port: browsers share cookies across
	// ports of one host, so two approvers on one machine must not clobber
	// each other's cookie.
	cookiePrefix = "exechost_web_"
)

// securityHeaders are set on every response, refusals included. The CSP
// allows only the embedded files: no inline script or style, no framing,
// no form posts or fetches elsewhere.
var securityHeaders = map[string]string{
	"Content-Security-Policy":      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
	"X-Frame-Options":              "DENY",
	"X-Content-Type-Options":       "nosniff",
	"Referrer-Policy":              "no-referrer",
	"Cache-Control":                "no-store",
	"Cross-Origin-Opener-Policy":   "same-origin",
	"Cross-Origin-Resource-Policy": "same-origin",
}

// ErrNotLoopback is returned for a listen address that is not a loopback
// address: the web approver is a local admin API and must not be reachable
// from the network.
var ErrNotLoopback = errors.New("address is not loopback")

// guard is the security layer in front of every route: the per-run secret
// (URL parameter exchanged for a cookie), Host and Origin checks against
// DNS rebinding and cross-site requests, and the CSRF token plus
// same-origin check on mutations. It fails closed: a request that does not
// prove every property is refused with 403.
type guard struct {
	secret     string          // base64url of 32 random bytes
	csrf       string          // HMAC(secret, "csrf"): per run, handed to same-origin script only
	cookieName string          // per port
	hosts      map[string]bool // accepted Host header values, lower-case
	origins    map[string]bool // accepted Origin header values, lower-case
}

// newSecret returns 32 random bytes, base64url-encoded without padding.
func newSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate web approver secret: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// newGuard builds the guard for a handler served at addr, a loopback
// host:port with a concrete port.
func newGuard(addr, secret string) (*guard, error) {
	port, err := loopbackPort(addr)
	if err != nil {
		return nil, err
	}
	if port == "0" {
		return nil, fmt.Errorf("web approver address %q: port 0 is not a concrete port (hint: listen first, then pass the listener's address)", addr)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("exechost web approver csrf v1"))
	g := &guard{
		secret:     secret,
		csrf:       base64.RawURLEncoding.EncodeToString(mac.Sum(nil)),
		cookieName: cookiePrefix + port,
		hosts:      map[string]bool{},
		origins:    map[string]bool{},
	}
	for _, h := range []string{"127.0.0.1", "localhost", "[::1]"} {
		hp := h + ":" + port
		g.hosts[hp] = true
		g.origins["http://"+hp] = true
		if port == "80" { // browsers omit the default port
			g.hosts[h] = true
			g.origins["http://"+h] = true
		}
	}
	return g, nil
}

// loopbackPort checks that addr is host:port with a loopback host
// (127.0.0.0/8, ::1 or "localhost") and returns the port.
func loopbackPort(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("web approver address %q: %w (hint: use 127.0.0.1:PORT)", addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("web approver address %q: bad port %q (hint: use 127.0.0.1:PORT)", addr, port)
	}
	if !isLoopbackHost(host) {
		return "", fmt.Errorf("web approver address %q: %w; the web approver only listens on loopback (hint: use 127.0.0.1:PORT, and an SSH tunnel to reach it from elsewhere)", addr, ErrNotLoopback)
	}
	return port, nil
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// equal compares two secrets in constant time (for equal lengths; the
// length of a per-run token is public).
func equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// forbid refuses a request. The message names the property that failed so
// a user who opened the wrong URL knows what to do, and nothing more.
func forbid(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintln(w, "forbidden: "+msg)
}

// wrap returns next behind the security layer. isMutation reports whether a
// path changes state; such paths accept only POST with a CSRF token from a
// same-origin page.
func (g *guard) wrap(next http.Handler, isMutation func(path string) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range securityHeaders {
			w.Header().Set(k, v)
		}
		if !g.hosts[strings.ToLower(r.Host)] {
			forbid(w, "unexpected Host header (only 127.0.0.1, localhost and [::1] on this port are served)")
			return
		}
		if o, ok := r.Header["Origin"]; ok && (len(o) != 1 || !g.origins[strings.ToLower(o[0])]) {
			forbid(w, "cross-origin request")
			return
		}
		if sfs := r.Header.Get("Sec-Fetch-Site"); sfs != "" && sfs != "same-origin" && sfs != "none" {
			forbid(w, "cross-site request")
			return
		}
		if k, ok := r.URL.Query()[SecretParam]; ok {
			g.exchange(w, r, k)
			return
		}
		c, err := r.Cookie(g.cookieName)
		if err != nil || !equal(c.Value, g.secret) {
			forbid(w, "missing or wrong secret (hint: open the URL printed by `exechost approver --web`, which carries it)")
			return
		}
		if isMutation(r.URL.Path) {
			if r.Method != http.MethodPost {
				w.Header().Set("Allow", http.MethodPost)
				http.Error(w, "method not allowed: changes are POST only", http.StatusMethodNotAllowed)
				return
			}
			// A same-origin fetch always carries Origin on POST; without
			// it the request cannot prove where it came from.
			if r.Header.Get("Origin") == "" {
				forbid(w, "mutation without Origin header")
				return
			}
			if !equal(r.Header.Get(CSRFHeader), g.csrf) {
				forbid(w, "missing or wrong CSRF token (hint: reload the page)")
				return
			}
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				http.Error(w, "unsupported media type: send application/json", http.StatusUnsupportedMediaType)
				return
			}
		} else if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// exchange trades the secret in the URL for an HttpOnly, SameSite=Strict
// cookie and redirects to the same path without the query, so the secret
// does not stay in the address bar, history or a screenshot.
func (g *guard) exchange(w http.ResponseWriter, r *http.Request, k []string) {
	if r.Method != http.MethodGet || len(k) != 1 || !equal(k[0], g.secret) {
		forbid(w, "wrong secret in URL (hint: copy the whole URL printed by `exechost approver --web`)")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     g.cookieName,
		Value:    g.secret,
		Path:     "/",
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
	})
	// Relative, so the handler also works mounted under a prefix.
	loc := "./"
	if i := strings.LastIndexByte(r.URL.Path, '/'); i >= 0 && i < len(r.URL.Path)-1 {
		loc = "./" + r.URL.Path[i+1:]
	}
	w.Header().Set("Location", loc)
	w.WriteHeader(http.StatusSeeOther)
}
