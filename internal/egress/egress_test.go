package egress_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"github.com/exechost/exechost/internal/egress/egresstest"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/egress"
)

var loop = []netip.Addr{netip.MustParseAddr("127.0.0.1")}

// recorder collects records for a test to wait on.
type recorder struct{ ch chan egress.Record }

func newRecorder() *recorder { return &recorder{ch: make(chan egress.Record, 64)} }

func (r *recorder) RecordEgress(rec egress.Record) { r.ch <- rec }

func (r *recorder) next(t *testing.T) egress.Record {
	t.Helper()
	select {
	case rec := <-r.ch:
		return rec
	case <-time.After(10 * time.Second):
		t.Fatal("no egress record within 10s")
	}
	return egress.Record{}
}

// asker answers from a script, counting questions; a nil answer leaves
// the question unanswered until ctx ends.
type asker struct {
	mu      sync.Mutex
	answers []*egress.Decision
	asked   []egress.Question
}

func (a *asker) AskEgress(ctx context.Context, q egress.Question) (egress.Decision, error) {
	a.mu.Lock()
	a.asked = append(a.asked, q)
	var d *egress.Decision
	if len(a.answers) > 0 {
		d, a.answers = a.answers[0], a.answers[1:]
	}
	a.mu.Unlock()
	if d == nil {
		<-ctx.Done()
		return egress.Deny, ctx.Err()
	}
	return *d, nil
}

func (a *asker) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.asked)
}

func dec(d egress.Decision) *egress.Decision { return &d }

func pats(t *testing.T, s ...string) []egress.Pattern {
	t.Helper()
	p, err := egress.ParsePatterns(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// attach serves run on a fresh loopback port.
func attach(t *testing.T, p *egress.Proxy, run egress.Run) *egress.Lease {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := p.Attach(ln, run)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func newProxy(t *testing.T, opts ...egress.Option) *egress.Proxy {
	t.Helper()
	p := egress.New(opts...)
	t.Cleanup(func() { p.Close() })
	return p
}

// tlsServer is a real HTTPS server on loopback; its certificate names
// example.com, which the tests' resolver maps to loopback.
func tlsServer(t *testing.T, body string) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%s got=%d", body, n)
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return srv, port
}

func client(t *testing.T, srv *httptest.Server, proxyURL string) *http.Client {
	t.Helper()
	u, err := url.Parse(proxyURL)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy:             http.ProxyURL(u),
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		DisableKeepAlives: true,
	}}
}

func get(c *http.Client, u string) (string, error) {
	resp, err := c.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return string(b), fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return string(b), err
}

func TestConnectAllowedNameGoClient(t *testing.T) {
	srv, port := tlsServer(t, "hello")
	rec := newRecorder()
	p := newProxy(t, egress.WithResolver(egresstest.Resolver{"example.com": loop}), egress.WithRecorder(rec))
	l := attach(t, p, egress.Run{ID: "run1", Agent: "main", Patterns: pats(t, "example.com:"+port+"/private")})
	body, err := get(client(t, srv, l.ProxyURL()), "https://example.com:"+port+"/")
	if err != nil || body != "hello got=0" {
		t.Fatalf("through the proxy: %q, %v", body, err)
	}
	r := rec.next(t)
	if !r.Allowed || r.Method != "CONNECT" || r.Host != "example.com" || strconv.Itoa(r.Port) != port || r.Rule != "example.com:"+port+"/private" {
		t.Fatalf("record: %+v", r)
	}
	if r.RunID != "run1" || r.AgentID != "main" || r.Up < 100 || r.Down < 100 || !strings.HasPrefix(r.Addr, "127.0.0.1:") {
		t.Fatalf("record: %+v (a TLS handshake is more than 100 bytes each way)", r)
	}
}

func TestConnectBytesCounted(t *testing.T) {
	srv, port := tlsServer(t, "ok")
	rec := newRecorder()
	p := newProxy(t, egress.WithResolver(egresstest.Resolver{"example.com": loop}), egress.WithRecorder(rec))
	l := attach(t, p, egress.Run{ID: "r", Patterns: pats(t, "example.com:"+port+"/private")})
	const size = 1 << 20
	resp, err := client(t, srv, l.ProxyURL()).Post("https://example.com:"+port+"/", "application/octet-stream", strings.NewReader(strings.Repeat("x", size)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok got="+strconv.Itoa(size) {
		t.Fatalf("body %q", b)
	}
	r := rec.next(t)
	// TLS adds a little per record; the upload dominates one way only.
	if r.Up < size || r.Up > size+size/10 || r.Down > 20000 {
		t.Fatalf("bytes up %d down %d for a %d-byte upload", r.Up, r.Down, size)
	}
}

func TestConnectCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed")
	}
	srv, port := tlsServer(t, "from-curl")
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	p := newProxy(t, egress.WithResolver(egresstest.Resolver{"example.com": loop, "other.example.com": loop}), egress.WithRecorder(rec))
	l := attach(t, p, egress.Run{ID: "r", Agent: "a", Patterns: pats(t, "example.com:"+port+"/private")})
	run := func(host string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, curl, "-sS", "--fail", "--noproxy", "", "--proxy", l.ProxyURL(), "--cacert", ca,
			"--resolve", host+":"+port+":127.0.0.1", "https://"+host+":"+port+"/")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("example.com")
	if err != nil || out != "from-curl got=0" {
		t.Fatalf("curl to the allowed name: %q %v", out, err)
	}
	if r := rec.next(t); !r.Allowed || r.Down == 0 {
		t.Fatalf("record %+v", r)
	}
	// A name on no pattern: curl's CONNECT is refused with 403.
	out, err = run("other.example.com")
	if err == nil || !strings.Contains(out, "403") {
		t.Fatalf("curl to a name on no pattern: %q %v", out, err)
	}
	if r := rec.next(t); r.Allowed || r.Host != "other.example.com" || !strings.Contains(r.Refused, "no egress pattern") {
		t.Fatalf("record %+v", r)
	}
}

func TestNameOnNoPatternRefused(t *testing.T) {
	srv, port := tlsServer(t, "x")
	rec := newRecorder()
	p := newProxy(t, egress.WithResolver(egresstest.Resolver{"example.com": loop}), egress.WithRecorder(rec))
	// The control: the same run reaches the same server under a listed
	// name, so the refusal below is the list's doing.
	l := attach(t, p, egress.Run{ID: "r", Patterns: pats(t, "*.example.com:"+port+"/private", "example.com:1/private")})
	c := client(t, srv, l.ProxyURL())
	_, err := get(c, "https://example.com:"+port+"/")
	if err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("example.com is not *.example.com and not port 1: %v", err)
	}
	if r := rec.next(t); r.Allowed || r.Up != 0 {
		t.Fatalf("record %+v", r)
	}
	l2 := attach(t, p, egress.Run{ID: "r2", Patterns: pats(t, "example.com:"+port+"/private")})
	if _, err := get(client(t, srv, l2.ProxyURL()), "https://example.com:"+port+"/"); err != nil {
		t.Fatalf("control: %v", err)
	}
	rec.next(t)
}

func TestAsk(t *testing.T) {
	srv, port := tlsServer(t, "x")
	rec := newRecorder()
	a := &asker{answers: []*egress.Decision{dec(egress.AllowOnce), dec(egress.Deny), dec(egress.AllowAlways), nil}}
	p := newProxy(t, egress.WithResolver(egresstest.Resolver{"example.com": loop}), egress.WithRecorder(rec), egress.WithAsker(a), egress.WithAskTimeout(300*time.Millisecond), egress.WithClock(stepClock()))
	l := attach(t, p, egress.Run{ID: "r7", Agent: "main", Command: "git fetch", Ask: true, Patterns: pats(t, "10.0.0.1:22")})
	c := client(t, srv, l.ProxyURL())
	u := "https://example.com:" + port + "/"

	// allow-once approves a name, not an address: example.com resolves to
	// loopback, and an approval is no wider than a pattern without
	// /private, so the connection is still refused, by the address rule.
	if _, err := get(c, u); err == nil {
		t.Fatal("an approved name resolving to loopback was dialed")
	}
	r := rec.next(t)
	if r.Allowed || !strings.Contains(r.Refused, "loopback") || a.count() != 1 {
		t.Fatalf("record %+v, asked %d", r, a.count())
	}
	q := a.asked[0]
	if q.RunID != "r7" || q.AgentID != "main" || q.Command != "git fetch" || q.Target.Host != "example.com" || strconv.Itoa(q.Target.Port) != port {
		t.Fatalf("question %+v", q)
	}
	// deny
	if _, err := get(c, u); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("denied: %v", err)
	}
	if r := rec.next(t); r.Allowed || !strings.Contains(r.Refused, "denied") {
		t.Fatalf("record %+v", r)
	}
	// allow-always adds the exact host:port to this run's list.
	get(c, u)
	rec.next(t)
	if got := l.Patterns(); len(got) != 2 || got[1].String() != "example.com:"+port {
		t.Fatalf("patterns after allow-always: %v", got)
	}
	get(c, u)
	rec.next(t)
	if a.count() != 3 {
		t.Fatalf("asked %d times; allow-always should have stopped the 4th question", a.count())
	}
	// No answer: the bounded wait ends in askFallback (deny).
	start := time.Now()
	l2 := attach(t, p, egress.Run{ID: "r8", Ask: true})
	if _, err := get(client(t, srv, l2.ProxyURL()), "https://example.com:"+port+"/"); err == nil {
		t.Fatal("an unanswered question let the connection through under askFallback=deny")
	}
	if r := rec.next(t); r.Allowed || !strings.Contains(r.Refused, "askFallback") || time.Since(start) > 5*time.Second {
		t.Fatalf("record %+v after %v", r, time.Since(start))
	}
}

func TestAskAllowOnceConnects(t *testing.T) {
	srv, port := tlsServer(t, "once")
	rec := newRecorder()
	a := &asker{answers: []*egress.Decision{dec(egress.AllowOnce), dec(egress.Deny)}}
	// The server's certificate also names 127.0.0.1: an IP literal asked
	// for and approved once is dialed as itself.
	p := newProxy(t, egress.WithRecorder(rec), egress.WithAsker(a))
	l := attach(t, p, egress.Run{ID: "r", Ask: true})
	c := client(t, srv, l.ProxyURL())
	u := "https://127.0.0.1:" + port + "/"
	if body, err := get(c, u); err != nil || body != "once got=0" {
		t.Fatalf("allow-once: %q %v", body, err)
	}
	if r := rec.next(t); !r.Allowed || r.Rule != "approval allow-once" || r.Down == 0 {
		t.Fatalf("record %+v", r)
	}
	// Once means once: the next connection asks again and is denied.
	if _, err := get(c, u); err == nil {
		t.Fatal("allow-once let a second connection through")
	}
	if r := rec.next(t); r.Allowed || a.count() != 2 {
		t.Fatalf("record %+v, asked %d", r, a.count())
	}
}

func TestAskFallbackFull(t *testing.T) {
	srv, port := tlsServer(t, "fb")
	rec := newRecorder()
	p := newProxy(t, egress.WithRecorder(rec), egress.WithAsker(&asker{answers: []*egress.Decision{nil}}), egress.WithAskTimeout(200*time.Millisecond))
	l := attach(t, p, egress.Run{ID: "r", Ask: true, FallbackAllow: true})
	if body, err := get(client(t, srv, l.ProxyURL()), "https://127.0.0.1:"+port+"/"); err != nil || body != "fb got=0" {
		t.Fatalf("askFallback=full: %q %v", body, err)
	}
	if r := rec.next(t); !r.Allowed || !strings.Contains(r.Rule, "askFallback=full") {
		t.Fatalf("record %+v", r)
	}
}

func TestForbiddenAddress(t *testing.T) {
	srv, port := tlsServer(t, "x")
	rec := newRecorder()
	public := netip.MustParseAddr("93.184.215.14")
	res := egresstest.Resolver{
		"example.com":        loop,
		"rebind.example.com": {public, netip.MustParseAddr("127.0.0.1")},
		"meta.example.com":   {netip.MustParseAddr("169.254.169.254")},
		"mapped.example.com": {netip.MustParseAddr("::ffff:10.1.2.3")},
	}
	p := newProxy(t, egress.WithResolver(res), egress.WithRecorder(rec))
	l := attach(t, p, egress.Run{ID: "r", Patterns: pats(t, "example.com:"+port, "*.example.com:"+port)})
	c := client(t, srv, l.ProxyURL())
	for host, want := range map[string]string{"example.com": "loopback", "rebind.example.com": "loopback", "meta.example.com": "link-local", "mapped.example.com": "private"} {
		if _, err := get(c, "https://"+host+":"+port+"/"); err == nil {
			t.Fatalf("%s: an allowed name resolving inward was dialed", host)
		}
		if r := rec.next(t); r.Allowed || !strings.Contains(r.Refused, want) || r.Addr != "" {
			t.Fatalf("%s: record %+v, want refused as %s", host, r, want)
		}
	}
	// The control: the same name with /private is dialed (TestConnect…).
	l2 := attach(t, p, egress.Run{ID: "r2", Patterns: pats(t, "example.com:"+port+"/private")})
	if _, err := get(client(t, srv, l2.ProxyURL()), "https://example.com:"+port+"/"); err != nil {
		t.Fatalf("control with /private: %v", err)
	}
	rec.next(t)
}

func TestIPLiteralNeedsIPPattern(t *testing.T) {
	srv, port := tlsServer(t, "lit")
	rec := newRecorder()
	p := newProxy(t, egress.WithResolver(egresstest.Resolver{"example.com": loop}), egress.WithRecorder(rec))
	// A name pattern whose name resolves to 127.0.0.1 does not open
	// 127.0.0.1: names are matched on what was asked, never on addresses.
	l := attach(t, p, egress.Run{ID: "r", Patterns: pats(t, "example.com:"+port+"/private")})
	if _, err := get(client(t, srv, l.ProxyURL()), "https://127.0.0.1:"+port+"/"); err == nil {
		t.Fatal("an IP literal was matched by a name pattern")
	}
	rec.next(t)
	l2 := attach(t, p, egress.Run{ID: "r2", Patterns: pats(t, "127.0.0.1:"+port)})
	if body, err := get(client(t, srv, l2.ProxyURL()), "https://127.0.0.1:"+port+"/"); err != nil || body != "lit got=0" {
		t.Fatalf("control, IP pattern: %q %v", body, err)
	}
	rec.next(t)
}

// rawConnect sends a CONNECT with the given Proxy-Authorization value
// and returns the status line.
func rawConnect(t *testing.T, proxyAddr, target, auth string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", proxyAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	if auth != "" {
		req += "Proxy-Authorization: " + auth + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(line)
}

func basic(user, pass string) string {
	return "Basic " + b64(user+":"+pass)
}

func TestOneRunCannotUseAnothersListener(t *testing.T) {
	_, port := tlsServer(t, "x")
	rec := newRecorder()
	p := newProxy(t, egress.WithResolver(egresstest.Resolver{"example.com": loop}), egress.WithRecorder(rec), egress.WithClock(stepClock()))
	target := "example.com:" + port
	a := attach(t, p, egress.Run{ID: "a", Patterns: pats(t, target+"/private")})
	b := attach(t, p, egress.Run{ID: "b"})
	addrA := strings.Split(a.ProxyURL(), "@")[1]
	// The control: run a with its own token is let through.
	if got := rawConnect(t, addrA, target, basic("a", a.Token())); !strings.Contains(got, " 200 ") {
		t.Fatalf("own token: %q", got)
	}
	rec.next(t)
	for name, auth := range map[string]string{
		"no credentials":            "",
		"b's token on a's listener": basic("b", b.Token()),
		"a's name, b's token":       basic("a", b.Token()),
		"a's token, b's name":       basic("b", a.Token()),
	} {
		if got := rawConnect(t, addrA, target, auth); !strings.Contains(got, " 407 ") {
			t.Fatalf("%s: %q", name, got)
		}
		if r := rec.next(t); r.Allowed || !strings.Contains(r.Refused, "Proxy-Authorization") {
			t.Fatalf("%s: record %+v", name, r)
		}
	}
	// b's own listener with b's token: its (empty) list, not a's.
	addrB := strings.Split(b.ProxyURL(), "@")[1]
	if got := rawConnect(t, addrB, target, basic("b", b.Token())); !strings.Contains(got, " 403 ") {
		t.Fatalf("b reached a's grant: %q", got)
	}
	rec.next(t)
}

func TestPlainHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Authorization") != "" {
			http.Error(w, "the proxy token leaked upstream", 500)
			return
		}
		fmt.Fprintf(w, "plain %s %s", r.Host, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	rec := newRecorder()
	p := newProxy(t, egress.WithResolver(egresstest.Resolver{"plain.test": loop, "other.test": loop}), egress.WithRecorder(rec))
	l := attach(t, p, egress.Run{ID: "r", Patterns: pats(t, "plain.test:"+port+"/private")})
	u, _ := url.Parse(l.ProxyURL())
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(u), DisableKeepAlives: true}}
	body, err := get(c, "http://plain.test:"+port+"/p")
	if err != nil || body != "plain plain.test:"+port+" /p" {
		t.Fatalf("allowed plain request: %q %v", body, err)
	}
	if r := rec.next(t); !r.Allowed || r.Method != "GET" || r.Up == 0 || r.Down < int64(len(body)) {
		t.Fatalf("record %+v", r)
	}
	if _, err := get(c, "http://other.test:"+port+"/p"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("name on no pattern: %v", err)
	}
	rec.next(t)
	// A Host header naming another site than the URL: the server is sent
	// the URL's host, the one that was checked.
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET http://plain.test:%s/h HTTP/1.1\r\nHost: other.test:%s\r\nProxy-Authorization: %s\r\n\r\n", port, port, basic("r", l.Token()))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "plain plain.test:"+port+" /h" {
		t.Fatalf("the server saw %q", b)
	}
	if r := rec.next(t); !r.Allowed || r.Host != "plain.test" {
		t.Fatalf("record %+v", r)
	}
}

func TestCloseCutsTunnels(t *testing.T) {
	// A server that never answers keeps the tunnel open.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	rec := newRecorder()
	p := egress.New(egress.WithRecorder(rec))
	l := attach(t, p, egress.Run{ID: "r", Patterns: pats(t, ln.Addr().String())})
	c, err := net.Dial("tcp", strings.Split(l.ProxyURL(), "@")[1])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: x\r\nProxy-Authorization: %s\r\n\r\n", ln.Addr(), basic("r", l.Token()))
	br := bufio.NewReader(c)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if line, _ := br.ReadString('\n'); !strings.Contains(line, " 200 ") {
		t.Fatalf("CONNECT: %q", line)
	}
	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return with a tunnel open")
	}
	if _, err := io.ReadAll(br); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Logf("read after close: %v", err)
	}
	if r := rec.next(t); !r.Allowed {
		t.Fatalf("record %+v", r)
	}
	if _, err := p.Attach(mustListen(t), egress.Run{ID: "late"}); err == nil {
		t.Fatal("Attach after Close succeeded")
	}
}

func mustListen(t *testing.T) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func TestGitLsRemote(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, gitBin, "--exec-path").Output()
	if err != nil {
		t.Skip("git --exec-path: ", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Skip("no git-http-backend")
	}
	root := t.TempDir()
	gitEnv := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + root, "GIT_CONFIG_NOSYSTEM=1"}
	gitc := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, gitBin, args...)
		cmd.Dir, cmd.Env = dir, gitEnv
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, b)
		}
		return string(b)
	}
	work := filepath.Join(root, "work")
	os.MkdirAll(work, 0o755)
	gitc(work, "init", "-q", "-b", "main")
	gitc(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "one")
	gitc(root, "clone", "-q", "--bare", work, filepath.Join(root, "repo.git"))
	head := strings.TrimSpace(gitc(work, "rev-parse", "HEAD"))

	srv := httptest.NewTLSServer(&cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}})
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	ca := filepath.Join(root, "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)
	rec := newRecorder()
	p := newProxy(t, egress.WithResolver(egresstest.Resolver{"example.com": loop}), egress.WithRecorder(rec))
	l := attach(t, p, egress.Run{ID: "g", Patterns: pats(t, "example.com:"+port+"/private")})
	lsRemote := func(proxy string) (string, error) {
		cmd := exec.CommandContext(ctx, gitBin, "-c", "http.proxy="+proxy, "-c", "http.proxyAuthMethod=basic", "-c", "http.sslCAInfo="+ca, "ls-remote", "https://example.com:"+port+"/repo.git")
		cmd.Env = gitEnv
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	got, err := lsRemote(l.ProxyURL())
	if err != nil || !strings.Contains(got, head+"\tHEAD") {
		t.Fatalf("git ls-remote through the proxy: %v\n%s", err, got)
	}
	if r := rec.next(t); !r.Allowed || r.Down == 0 {
		t.Fatalf("record %+v", r)
	}
	// The control: a run whose list lacks the name cannot.
	l2 := attach(t, p, egress.Run{ID: "g2", Patterns: pats(t, "github.com:443")})
	if got, err := lsRemote(l2.ProxyURL()); err == nil {
		t.Fatalf("git ls-remote to a name on no pattern worked:\n%s", got)
	}
	if r := rec.next(t); r.Allowed {
		t.Fatalf("record %+v", r)
	}
}

func TestUnixSocketLease(t *testing.T) {
	_, port := tlsServer(t, "x")
	sock := filepath.Join(t.TempDir(), "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	p := newProxy(t, egress.WithResolver(egresstest.Resolver{"example.com": loop}), egress.WithRecorder(rec))
	l, err := p.Attach(ln, egress.Run{ID: "u", Patterns: pats(t, "example.com:"+port+"/private")})
	if err != nil {
		t.Fatal(err)
	}
	if l.ProxyURL() != "" {
		t.Fatalf("a unix lease has a proxy URL %q", l.ProxyURL())
	}
	conn := func(auth string) string {
		c, err := net.DialTimeout("unix", sock, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "CONNECT example.com:%s HTTP/1.1\r\nHost: example.com\r\nProxy-Authorization: %s\r\n\r\n", port, auth)
		line, _ := bufio.NewReader(c).ReadString('\n')
		return line
	}
	if got := conn(basic("u", l.Token())); !strings.Contains(got, " 200 ") {
		t.Fatalf("CONNECT over the unix socket: %q", got)
	}
	if r := rec.next(t); !r.Allowed || r.RunID != "u" {
		t.Fatalf("record %+v", r)
	}
	if got := conn(basic("u", "wrong")); !strings.Contains(got, " 407 ") {
		t.Fatalf("a wrong token over the unix socket: %q", got)
	}
	rec.next(t)
}

// TestPendingQuestionsBounded: a run cannot flood the approvers; beyond
// its open-question bound a miss is refused without asking, and once the
// open questions end, asking resumes.
func TestPendingQuestionsBounded(t *testing.T) {
	_, port := tlsServer(t, "x")
	rec := newRecorder()
	release := make(chan struct{})
	a := &blockingAsker{release: release, asked: make(chan struct{}, 16)}
	p := newProxy(t, egress.WithResolver(egresstest.Resolver{"example.com": loop}), egress.WithRecorder(rec), egress.WithAsker(a), egress.WithMaxPending(2), egress.WithAskTimeout(20*time.Second), egress.WithClock(stepClock()))
	l := attach(t, p, egress.Run{ID: "r", Ask: true})
	addr := strings.Split(l.ProxyURL(), "@")[1]
	target := "example.com:" + port
	results := make(chan string, 2)
	for range 2 {
		go func() { results <- rawConnectNoFatal(addr, target, basic("r", l.Token())) }()
	}
	for range 2 {
		select {
		case <-a.asked:
		case <-time.After(10 * time.Second):
			t.Fatal("the first two misses were not asked")
		}
	}
	// The third is refused at once, not asked.
	if got := rawConnect(t, addr, target, basic("r", l.Token())); !strings.Contains(got, " 403 ") {
		t.Fatalf("third miss: %q", got)
	}
	if r := rec.next(t); !strings.Contains(r.Refused, "questions open") {
		t.Fatalf("record %+v", r)
	}
	close(release) // both open questions are denied
	for range 2 {
		if got := <-results; !strings.Contains(got, " 403 ") {
			t.Fatalf("an open question's answer: %q", got)
		}
		rec.next(t)
	}
	// The control: with the questions closed, a miss is asked again.
	go rawConnectNoFatal(addr, target, basic("r", l.Token()))
	select {
	case <-a.asked:
	case <-time.After(10 * time.Second):
		t.Fatal("asking did not resume")
	}
	rec.next(t)
}

// blockingAsker holds every question until release, then denies.
type blockingAsker struct {
	release chan struct{}
	asked   chan struct{}
}

func (b *blockingAsker) AskEgress(ctx context.Context, _ egress.Question) (egress.Decision, error) {
	b.asked <- struct{}{}
	select {
	case <-b.release:
		return egress.Deny, nil
	case <-ctx.Done():
		return egress.Deny, ctx.Err()
	}
}

func rawConnectNoFatal(proxyAddr, target, auth string) string {
	c, err := net.DialTimeout("tcp", proxyAddr, 5*time.Second)
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: %s\r\n\r\n", target, target, auth)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err.Error()
	}
	return line
}

// stepClock moves two FoldWindows per reading, so no two refusals fold.
func stepClock() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(2 * egress.FoldWindow)
		return t
	}
}

// manualClock is moved by the test.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestRefusalsFolded: identical refusals within FoldWindow become one
// record and a count, so a run refused in a loop cannot flood the log;
// the count is on the next record of that refusal or, at Close, its own.
// The control: a different refusal is recorded at once.
func TestRefusalsFolded(t *testing.T) {
	rec := newRecorder()
	clk := &manualClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	p := newProxy(t, egress.WithRecorder(rec), egress.WithClock(clk.now))
	l := attach(t, p, egress.Run{ID: "r"})
	addr := strings.Split(l.ProxyURL(), "@")[1]
	auth := basic("r", l.Token())
	refuse := func(target string) {
		if got := rawConnect(t, addr, target, auth); !strings.Contains(got, " 403 ") {
			t.Fatalf("%s: %q", target, got)
		}
	}
	refuse("a.example:443")
	if r := rec.next(t); r.Host != "a.example" || r.Repeats != 0 {
		t.Fatalf("first refusal %+v", r)
	}
	for range 5 {
		refuse("a.example:443")
	}
	refuse("b.example:443") // the control: another refusal is not folded
	if r := rec.next(t); r.Host != "b.example" {
		t.Fatalf("expected b.example's refusal next (a.example's repeats folded), got %+v", r)
	}
	clk.add(egress.FoldWindow)
	refuse("a.example:443")
	if r := rec.next(t); r.Host != "a.example" || r.Repeats != 5 {
		t.Fatalf("after the window: %+v, want 5 repeats", r)
	}
	refuse("a.example:443")
	refuse("a.example:443")
	l.Close()
	if r := rec.next(t); r.Host != "a.example" || r.Repeats != 2 {
		t.Fatalf("at close: %+v, want 2 repeats", r)
	}
	select {
	case r := <-rec.ch:
		t.Fatalf("unexpected record %+v", r)
	default:
	}
}
