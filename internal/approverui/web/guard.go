package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/exechost/exechost/internal/hint"
)

// Header and parameter names of the security layer.
const (
	// SecretParam names the secret in the URL fragment printed at start
	// ("#k=…"). A fragment is never sent to any server: the page reads it,
	// keeps it in sessionStorage (per tab, per origin — other local ports
	// cannot read it) and removes it from the address bar.
	SecretParam = "k"
	// SecretHeader carries the secret on every API request. Browsers never
	// attach a custom header by themselves, unlike a cookie, which they
	// send for 127.0.0.1 to every port.
	SecretHeader = "X-Exechost-Secret"
	// CSRFHeader carries the page's per-session CSRF token on every
	// mutation: random, minted by POST api/session, not derivable from
	// the secret.
	CSRFHeader = "X-CSRF-Token"
	// maxSessions bounds the CSRF tokens remembered (open tabs and
	// reloads); the oldest is forgotten first and its page reloads.
	maxSessions = 64
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

// guard is the security layer in front of every route: Host, Origin and
// Sec-Fetch-Site checks against DNS rebinding and cross-site requests on
// everything; the per-run secret in SecretHeader on every API route; and on
// mutations POST, a same-origin Origin and a CSRF token from a live
// session. Nothing a browser attaches by itself (cookies, HTTP auth)
// carries the capability. The page and its static files hold no data and
// are served without the secret (the fragment never reaches the server).
// It fails closed: a request that does not prove every property is
// refused with 403.
type guard struct {
	secret  string          // base64url of 32 random bytes
	hosts   map[string]bool // accepted Host header values, lower-case
	origins map[string]bool // accepted Origin header values, lower-case

	mu       sync.Mutex
	sessions map[string]uint64 // CSRF token → mint order
	minted   uint64
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
		return nil, hint.Wrap(fmt.Errorf("web approver address %q: port 0 is not a concrete port", addr), "listen first, then pass the listener's address")
	}
	g := &guard{
		secret:   secret,
		hosts:    map[string]bool{},
		origins:  map[string]bool{},
		sessions: map[string]uint64{},
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
	hostname, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", hint.Wrap(fmt.Errorf("web approver address %q: %w", addr, err), "use 127.0.0.1:PORT")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", hint.Wrap(fmt.Errorf("web approver address %q: bad port %q", addr, port), "use 127.0.0.1:PORT")
	}
	if !isLoopbackHost(hostname) {
		return "", hint.Wrap(fmt.Errorf("web approver address %q: %w; the web approver only listens on loopback", addr, ErrNotLoopback), "use 127.0.0.1:PORT, and an SSH tunnel to reach it from elsewhere")
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

// newSession mints a random CSRF token for one page load, forgetting the
// oldest when maxSessions are live.
func (g *guard) newSession() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate csrf token: %w", err)
	}
	tok := base64.RawURLEncoding.EncodeToString(b)
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.sessions) >= maxSessions {
		oldest, at := "", uint64(0)
		for k, v := range g.sessions {
			if oldest == "" || v < at {
				oldest, at = k, v
			}
		}
		delete(g.sessions, oldest)
	}
	g.minted++
	g.sessions[tok] = g.minted
	return tok, nil
}

// validCSRF reports whether tok is a live session's CSRF token.
func (g *guard) validCSRF(tok string) bool {
	if tok == "" {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	ok := false
	for k := range g.sessions { // constant-time per comparison, every entry compared
		if equal(k, tok) {
			ok = true
		}
	}
	return ok
}

// isPublic reports whether a path is the page or one of its static files:
// embedded, identical for everyone, holding no data, so servable without
// the secret (which the page only learns from the fragment).
func isPublic(path string) bool {
	return path == "/" || strings.HasPrefix(path, "/static/")
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
		if _, ok := r.URL.Query()[SecretParam]; ok {
			// An old-style link (?k=…) would put the secret in logs and
			// history; refuse it and say where the secret goes now.
			forbid(w, "the secret belongs in the URL fragment, not the query (hint: open the URL exactly as printed, with #k=…)")
			return
		}
		if isPublic(r.URL.Path) && !isMutation(r.URL.Path) {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				w.Header().Set("Allow", "GET, HEAD")
				http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if !equal(r.Header.Get(SecretHeader), g.secret) {
			forbid(w, "missing or wrong secret (hint: open the URL printed by `exechost approver --web`, which carries it after #k=; the approver makes a new one at every start)")
			return
		}
		switch {
		case r.URL.Path == sessionPath:
			// Minting a CSRF token: POST from a same-origin page only.
			if r.Method != http.MethodPost {
				w.Header().Set("Allow", http.MethodPost)
				http.Error(w, "method not allowed: POST", http.StatusMethodNotAllowed)
				return
			}
			if r.Header.Get("Origin") == "" {
				forbid(w, "session without Origin header")
				return
			}
			tok, err := g.newSession()
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			writeJSON(w, http.StatusOK, map[string]string{"csrf": tok})
			return
		case isMutation(r.URL.Path):
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
			if !g.validCSRF(r.Header.Get(CSRFHeader)) {
				forbid(w, "missing or wrong CSRF token (hint: reload the page)")
				return
			}
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				http.Error(w, "unsupported media type: send application/json", http.StatusUnsupportedMediaType)
				return
			}
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sessionPath mints a CSRF token for a page (guard.wrap answers it).
const sessionPath = "/api/session"
