package web

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// guardServer serves a marker handler behind a guard on a real loopback
// listener and returns the server and its guard.
func guardServer(t *testing.T) (*httptest.Server, *guard) {
	t.Helper()
	secret, err := newSecret()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	g, err := newGuard(srv.Listener.Addr().String(), secret)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = g.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "reached "+r.Method+" "+r.URL.Path)
	}), func(p string) bool { return p == "/api/change" })
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, g
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func TestGuardRefusals(t *testing.T) {
	srv, g := guardServer(t)
	hostport := srv.Listener.Addr().String()
	port := hostport[strings.LastIndexByte(hostport, ':')+1:]
	origin := "http://" + hostport
	csrf, err := g.newSession()
	if err != nil {
		t.Fatal(err)
	}
	good := map[string]string{
		"Origin":       origin,
		CSRFHeader:     csrf,
		"Content-Type": "application/json",
	}
	const api = "/api/x"
	tests := []struct {
		name     string
		method   string
		path     string
		host     string            // "" = the server's own
		secret   string            // SecretHeader: "" = none, "good" = the secret
		cookie   bool              // send the secret as a cookie instead (must not count)
		headers  map[string]string // added to the request
		drop     string            // header of good to leave out
		want     int
		wantBody string
	}{
		{name: "page needs no secret (it holds none)", method: "GET", path: "/", want: 200},
		{name: "static file needs no secret", method: "GET", path: "/static/app.js", want: 200},
		{name: "api without secret (curl)", method: "GET", path: api, want: 403, wantBody: "secret"},
		{name: "api with the secret in a cookie", method: "GET", path: api, cookie: true, want: 403, wantBody: "secret"},
		{name: "api with the secret in the query", method: "GET", path: api + "?" + SecretParam + "=" + g.secret, want: 403, wantBody: "fragment"},
		{name: "wrong secret", method: "GET", path: api, secret: "AAAA", want: 403, wantBody: "secret"},
		{name: "secret of the wrong length", method: "GET", path: api, secret: g.secret + "x", want: 403},
		{name: "api with secret", method: "GET", path: api, secret: "good", want: 200},
		{name: "localhost host", method: "GET", path: api, secret: "good", host: "localhost:" + port, want: 200},
		{name: "ipv6 loopback host", method: "GET", path: api, secret: "good", host: "[::1]:" + port, want: 200},
		{name: "foreign host (DNS rebinding)", method: "GET", path: api, secret: "good", host: "evil.example:" + port, want: 403, wantBody: "Host"},
		{name: "foreign host on the page too", method: "GET", path: "/", host: "evil.example:" + port, want: 403, wantBody: "Host"},
		{name: "right name wrong port", method: "GET", path: api, secret: "good", host: "127.0.0.1:1", want: 403, wantBody: "Host"},
		{name: "host without port", method: "GET", path: api, secret: "good", host: "127.0.0.1", want: 403},
		{name: "foreign origin on GET", method: "GET", path: api, secret: "good", headers: map[string]string{"Origin": "http://evil.example"}, want: 403, wantBody: "cross-origin"},
		{name: "null origin", method: "GET", path: api, secret: "good", headers: map[string]string{"Origin": "null"}, want: 403},
		{name: "other loopback port origin", method: "GET", path: api, secret: "good", headers: map[string]string{"Origin": "http://127.0.0.1:1"}, want: 403},
		{name: "https origin", method: "GET", path: api, secret: "good", headers: map[string]string{"Origin": "https://" + hostport}, want: 403},
		{name: "same-site fetch", method: "GET", path: api, secret: "good", headers: map[string]string{"Sec-Fetch-Site": "same-site"}, want: 403},
		{name: "cross-site fetch", method: "GET", path: api, secret: "good", headers: map[string]string{"Sec-Fetch-Site": "cross-site"}, want: 403},
		{name: "cross-site page load", method: "GET", path: "/", headers: map[string]string{"Sec-Fetch-Site": "cross-site"}, want: 403},
		{name: "typed navigation", method: "GET", path: "/", headers: map[string]string{"Sec-Fetch-Site": "none"}, want: 200},
		{name: "mutation ok", method: "POST", path: "/api/change", secret: "good", headers: good, want: 200},
		{name: "mutation without secret", method: "POST", path: "/api/change", headers: good, want: 403},
		{name: "mutation via GET", method: "GET", path: "/api/change", secret: "good", headers: good, want: 405},
		{name: "mutation via PUT", method: "PUT", path: "/api/change", secret: "good", headers: good, want: 405},
		{name: "mutation without csrf", method: "POST", path: "/api/change", secret: "good", headers: good, drop: CSRFHeader, want: 403, wantBody: "CSRF"},
		{name: "mutation with the secret as csrf", method: "POST", path: "/api/change", secret: "good", headers: merge(good, map[string]string{CSRFHeader: g.secret}), want: 403, wantBody: "CSRF"},
		{name: "mutation without origin", method: "POST", path: "/api/change", secret: "good", headers: good, drop: "Origin", want: 403, wantBody: "Origin"},
		{name: "mutation with foreign origin", method: "POST", path: "/api/change", secret: "good", headers: merge(good, map[string]string{"Origin": "http://evil.example"}), want: 403},
		{name: "mutation as form post", method: "POST", path: "/api/change", secret: "good", headers: merge(good, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}), want: 415},
		{name: "mutation from another site", method: "POST", path: "/api/change", secret: "good", headers: merge(good, map[string]string{"Sec-Fetch-Site": "cross-site"}), want: 403},
		{name: "session without secret", method: "POST", path: sessionPath, headers: map[string]string{"Origin": origin}, want: 403},
		{name: "session without origin", method: "POST", path: sessionPath, secret: "good", want: 403, wantBody: "Origin"},
		{name: "session via GET", method: "GET", path: sessionPath, secret: "good", want: 405},
		{name: "post to the page", method: "POST", path: "/", headers: good, want: 405},
		{name: "post to a read route", method: "POST", path: api, secret: "good", headers: good, want: 405},
		{name: "delete", method: "DELETE", path: api, secret: "good", headers: good, want: 405},
	}
	client := &http.Client{CheckRedirect: noRedirect}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			if tt.host != "" {
				req.Host = tt.host
			}
			switch tt.secret {
			case "":
			case "good":
				req.Header.Set(SecretHeader, g.secret)
			default:
				req.Header.Set(SecretHeader, tt.secret)
			}
			if tt.cookie {
				req.AddCookie(&http.Cookie{Name: "exechost_web_" + port, Value: g.secret})
			}
			for k, v := range tt.headers {
				if k != tt.drop {
					req.Header.Set(k, v)
				}
			}
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tt.want {
				t.Fatalf("status = %d, want %d (body %q)", res.StatusCode, tt.want, body)
			}
			if tt.want != 200 && strings.HasPrefix(string(body), "reached") {
				t.Fatalf("refused request reached the handler: %q", body)
			}
			if tt.wantBody != "" && !strings.Contains(string(body), tt.wantBody) {
				t.Errorf("body %q does not mention %q", body, tt.wantBody)
			}
			if len(res.Cookies()) != 0 {
				t.Errorf("response sets a cookie: %v", res.Header["Set-Cookie"])
			}
			checkSecurityHeaders(t, res.Header)
		})
	}
}

func merge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func checkSecurityHeaders(t *testing.T, h http.Header) {
	t.Helper()
	for k, v := range securityHeaders {
		if got := h.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
}

// TestSessionsAreRandomAndBounded: each session's CSRF token is fresh
// randomness (not a function of the secret, not repeated), and the oldest
// is forgotten once maxSessions are live.
func TestSessionsAreRandomAndBounded(t *testing.T) {
	_, g := guardServer(t)
	first, err := g.newSession()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{first: true}
	for range maxSessions {
		tok, err := g.newSession()
		if err != nil {
			t.Fatal(err)
		}
		if seen[tok] || tok == g.secret || strings.Contains(tok, g.secret) {
			t.Fatalf("session token %q repeats or derives from the secret", tok)
		}
		seen[tok] = true
		if !g.validCSRF(tok) {
			t.Fatalf("fresh token %q not valid", tok)
		}
	}
	if g.validCSRF(first) {
		t.Error("the oldest session survived past maxSessions")
	}
	if g.validCSRF("") || g.validCSRF(g.secret) {
		t.Error("empty token or the secret accepted as CSRF")
	}
	if u := URL("127.0.0.1:9", g.secret); !strings.HasSuffix(u, "/#"+SecretParam+"="+g.secret) || strings.Contains(u, "?") {
		t.Errorf("URL = %q, want the secret in the fragment only", u)
	}
}

func TestLoopbackPort(t *testing.T) {
	tests := []struct {
		addr     string
		want     string
		loopback bool // false with an error: is it ErrNotLoopback?
		ok       bool
	}{
		{addr: "127.0.0.1:0", want: "0", ok: true},
		{addr: "127.0.0.1:8080", want: "8080", ok: true},
		{addr: "127.1.2.3:80", want: "80", ok: true},
		{addr: "[::1]:9", want: "9", ok: true},
		{addr: "localhost:7", want: "7", ok: true},
		{addr: "LocalHost:7", want: "7", ok: true},
		{addr: "0.0.0.0:8080"},
		{addr: ":8080"},
		{addr: "[::]:8080"},
		{addr: "192.168.1.10:8080"},
		{addr: "example.com:80"},
		{addr: "localhost.example.com:80"},
		{addr: "127.0.0.1", loopback: true},
		{addr: "127.0.0.1:http", loopback: true},
		{addr: "127.0.0.1:70000", loopback: true},
	}
	for _, tt := range tests {
		got, err := loopbackPort(tt.addr)
		switch {
		case tt.ok && err != nil:
			t.Errorf("loopbackPort(%q) = %v, want port %s", tt.addr, err, tt.want)
		case tt.ok && got != tt.want:
			t.Errorf("loopbackPort(%q) = %q, want %q", tt.addr, got, tt.want)
		case !tt.ok && err == nil:
			t.Errorf("loopbackPort(%q) = %q, want an error", tt.addr, got)
		case !tt.ok && !tt.loopback && !errors.Is(err, ErrNotLoopback):
			t.Errorf("loopbackPort(%q) = %v, want ErrNotLoopback", tt.addr, err)
		}
	}
}

func TestGuardNeedsConcretePort(t *testing.T) {
	if _, err := newGuard("127.0.0.1:0", "s"); err == nil {
		t.Fatal("newGuard accepted port 0: the Host check could not know the port")
	}
}

func FuzzLoopbackPort(f *testing.F) {
	for _, s := range []string{"127.0.0.1:0", "[::1]:80", "localhost:1", "0.0.0.0:1", ":1", "[fe80::1%eth0]:1", "127.0.0.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, addr string) {
		port, err := loopbackPort(addr)
		if err != nil {
			return
		}
		host, p, err := net.SplitHostPort(addr)
		if err != nil || p != port || !isLoopbackHost(host) {
			t.Fatalf("loopbackPort(%q) = %q accepted a non-loopback or malformed address", addr, port)
		}
	})
}
