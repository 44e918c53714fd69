package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/approverui"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/testproc"
)

// apiClient is a logged-in page: the secret from the URL fragment in its
// header, the CSRF token from api/session and the page's Origin on every
// request. No cookie jar: nothing may depend on one.
type apiClient struct {
	t      *testing.T
	base   string
	origin string
	secret string
	csrf   string
	hc     *http.Client
}

func login(t *testing.T, startURL string) *apiClient {
	t.Helper()
	u, err := url.Parse(startURL)
	if err != nil {
		t.Fatal(err)
	}
	if u.RawQuery != "" || !strings.HasPrefix(u.Fragment, SecretParam+"=") {
		t.Fatalf("start URL %q: the secret must be in the fragment and nowhere else", startURL)
	}
	c := &apiClient{t: t, base: "http://" + u.Host + "/", origin: "http://" + u.Host, secret: strings.TrimPrefix(u.Fragment, SecretParam+"="), hc: &http.Client{}}
	var sess struct {
		CSRF string `json:"csrf"`
	}
	if code := c.post("api/session", nil, &sess); code != 200 || sess.CSRF == "" {
		t.Fatalf("api/session: status %d csrf %q", code, sess.CSRF)
	}
	c.csrf = sess.CSRF
	return c
}

func (c *apiClient) get(path string, v any) int {
	c.t.Helper()
	req, _ := http.NewRequest("GET", c.base+path, nil)
	req.Header.Set(SecretHeader, c.secret)
	return c.do(req, v)
}

func (c *apiClient) post(path string, body, v any) int {
	c.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", c.base+path, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", c.origin)
	req.Header.Set(CSRFHeader, c.csrf)
	req.Header.Set(SecretHeader, c.secret)
	return c.do(req, v)
}

func (c *apiClient) do(req *http.Request, v any) int {
	c.t.Helper()
	res, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	checkSecurityHeaders(c.t, res.Header)
	if v != nil {
		if err := json.NewDecoder(res.Body).Decode(v); err != nil {
			c.t.Fatalf("%s %s: decode: %v", req.Method, req.URL.Path, err)
		}
	}
	return res.StatusCode
}

func startAPI(t *testing.T, gw GatewayBinding) (*apiClient, *prompt.Broker, *approvals.Store) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	b := prompt.NewBroker()
	u, err := Start(ctx, Options{Addr: "127.0.0.1:0", Broker: b, StateDir: dir, Gateway: gw})
	if err != nil {
		t.Fatal(err)
	}
	return login(t, u), b, approvals.NewStore(dir)
}

func TestStartRefuses(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := prompt.NewBroker()
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0"} {
		if _, err := Start(ctx, Options{Addr: addr, Broker: b}); !errors.Is(err, ErrNotLoopback) {
			t.Errorf("Start(%q) = %v, want ErrNotLoopback", addr, err)
		}
	}
	if _, err := Start(ctx, Options{Addr: "127.0.0.1:0"}); !errors.Is(err, ErrNoBroker) {
		t.Errorf("Start without a broker = %v, want ErrNoBroker", err)
	}
	if _, _, err := NewHandler(Options{Addr: "127.0.0.1:0", Broker: b}); err == nil {
		t.Errorf("NewHandler with port 0 succeeded; the Host check needs the real port")
	}
}

func TestDecideAPI(t *testing.T) {
	c, b, _ := startAPI(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes, unsub := b.Subscribe()
	defer unsub()
	done := make(chan result, 1)
	go func() {
		a, by, err := b.Submit(ctx, prompt.Pending{ID: "abc-123", Request: prompt.Request{
			Command: "ls", AgentID: "main", Ask: "always", Choices: []string{"allow-once", "deny"},
			ResolvedPaths: []string{"/usr/bin/ls"}}})
		done <- result{a, by, err}
	}()
	if ch := testproc.Recv(t, changes, "the prompt's arrival in the queue"); ch.Kind != prompt.ChangeAdded {
		t.Fatalf("first change = %s, want added", ch.Kind)
	}
	var list pendingList
	c.get("api/pending", &list)
	if len(list.Pending) != 1 {
		t.Fatalf("pending = %+v, want one prompt", list)
	}
	want := pendingView{ID: "abc-123", AgentID: "main", Command: "ls", Ask: "always", Fallback: "askFallback",
		Paths: []pathView{{Path: "/usr/bin/ls"}}, Choices: []string{"allow-once", "deny"}, AllowAlways: []approverui.AlwaysLine{}, Starts: []string{}}
	got := list.Pending[0]
	got.ReceivedAtMs = 0
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("pending (-want +got):\n%s", d)
	}

	tests := []struct {
		name string
		body any
		want int
	}{
		{"not offered", map[string]string{"id": "abc-123", "decision": "allow-always"}, 400},
		{"bad decision", map[string]string{"id": "abc-123", "decision": "maybe"}, 400},
		{"unknown id", map[string]string{"id": "zzz", "decision": "deny"}, 404},
		{"empty id", map[string]string{"id": "", "decision": "deny"}, 404},
		{"unknown field", map[string]string{"id": "abc-123", "decision": "deny", "by": "mallory"}, 400},
		{"not an object", []string{"abc-123"}, 400},
	}
	for _, tt := range tests {
		var e apiError
		if got := c.post("api/decide", tt.body, &e); got != tt.want || e.Error == "" {
			t.Errorf("%s: status %d (%q), want %d with a message", tt.name, got, e.Error, tt.want)
		}
	}
	select {
	case r := <-done:
		t.Fatalf("a refused decision answered the prompt: %+v", r)
	default:
	}
	if got := c.post("api/decide", map[string]string{"id": "abc", "decision": "allow-once"}, nil); got != 200 {
		t.Fatalf("decide by unique prefix: status %d", got)
	}
	if r := testproc.Recv(t, done, "the web answer's result"); r.err != nil || r.decision != policy.AllowOnce || r.by != "web" {
		t.Fatalf("Submit = %+v, want allow-once by web", r)
	}
	var e apiError
	if got := c.post("api/decide", map[string]string{"id": "abc-123", "decision": "deny"}, &e); got != 404 || !strings.Contains(e.Error, "already answered") {
		t.Errorf("second answer: status %d %q, want 404 already answered", got, e.Error)
	}
}

func TestEditAPI(t *testing.T) {
	c, _, store := startAPI(t, nil)
	var st stateView
	c.get("api/state", &st)
	if !st.Editor || st.Hash == "" || len(st.Agents) == 0 || st.Agents[0].ID != "*" {
		t.Fatalf("state = %+v, want csrf, editor, hash and * first", st)
	}
	hash := st.Hash

	tests := []struct {
		name    string
		path    string
		body    any
		want    int
		wantErr string
	}{
		{"bad security", "api/agent", agentRequest{Hash: hash, Agent: "main", Security: "yolo"}, 400, "accepted: deny, allowlist, full"},
		{"bad ask", "api/agent", agentRequest{Hash: hash, Agent: "main", Ask: "sometimes"}, 400, "ask"},
		{"bad fallback", "api/agent", agentRequest{Hash: hash, Agent: "main", AskFallback: "allow"}, 400, "askFallback"},
		{"agent with slash", "api/agent", agentRequest{Hash: hash, Agent: "a/b"}, 400, "slash"},
		{"empty agent", "api/agent", agentRequest{Hash: hash}, 400, "empty"},
		{"missing hash", "api/agent", agentRequest{Agent: "main"}, 400, "hash"},
		{"stale hash", "api/agent", agentRequest{Hash: "0000", Agent: "main"}, 409, "changed underneath"},
		{"empty pattern", "api/allowlist", allowlistRequest{Hash: hash, Agent: "main", Op: "add", Pattern: "  "}, 400, "empty"},
		{"control char", "api/allowlist", allowlistRequest{Hash: hash, Agent: "main", Op: "add", Pattern: "/bin/a\nb"}, 400, "control"},
		{"bad op", "api/allowlist", allowlistRequest{Hash: hash, Agent: "main", Op: "replace", Pattern: "/bin/x"}, 400, "op"},
		{"edit without old", "api/allowlist", allowlistRequest{Hash: hash, Agent: "main", Op: "edit", Pattern: "/bin/x"}, 400, "replace"},
		{"remove missing", "api/allowlist", allowlistRequest{Hash: hash, Agent: "main", Op: "remove", Pattern: "/bin/x"}, 409, "no such pattern"},
		{"stale add", "api/allowlist", allowlistRequest{Hash: "0000", Agent: "main", Op: "add", Pattern: "/bin/x"}, 409, "changed underneath"},
	}
	for _, tt := range tests {
		var e apiError
		if got := c.post(tt.path, tt.body, &e); got != tt.want || !strings.Contains(e.Error, tt.wantErr) {
			t.Errorf("%s: status %d %q, want %d mentioning %q", tt.name, got, e.Error, tt.want, tt.wantErr)
		}
	}
	if f, err := store.Load(); err != nil || f.Agents["main"] != nil {
		t.Fatalf("refused edits wrote the file: %v %+v", err, f)
	}

	// A valid change, spelled loosely, is stored canonically.
	var ok struct {
		OK   bool   `json:"ok"`
		Hash string `json:"hash"`
	}
	if got := c.post("api/agent", agentRequest{Hash: hash, Agent: "main", Security: " Allowlist ", Ask: "ON-MISS"}, &ok); got != 200 || !ok.OK {
		t.Fatalf("agent update: status %d", got)
	}
	f, err := store.Load()
	if err != nil {
		t.Fatal(err)
	}
	if a := f.Agents["main"]; a == nil || a.Security != "allowlist" || a.Ask != "on-miss" || a.AskFallback != "" {
		t.Fatalf("agent main = %+v, want security allowlist, ask on-miss, askFallback inherited", a)
	}
	if ok.Hash != f.Hash() {
		t.Errorf("returned hash %s is not the file's %s", ok.Hash, f.Hash())
	}
	// Adding a duplicate (case-insensitively) says so.
	c.post("api/allowlist", allowlistRequest{Hash: ok.Hash, Agent: "main", Op: "add", Pattern: "/usr/bin/rg"}, &ok)
	var e apiError
	if got := c.post("api/allowlist", allowlistRequest{Hash: ok.Hash, Agent: "main", Op: "add", Pattern: "/USR/bin/rg"}, &e); got != 409 || !strings.Contains(e.Error, "already") {
		t.Errorf("duplicate add: status %d %q, want 409 already", got, e.Error)
	}
}

// recordingGateway is a GatewayBinding that records what the page asked
// for; the real one lives in the gateway.
type recordingGateway struct {
	mu       sync.Mutex
	bindings map[string]string
}

func (g *recordingGateway) Nodes(context.Context) ([]Node, error) {
	return []Node{{ID: "n-1234567", DisplayName: "build box", Connected: true}}, nil
}

func (g *recordingGateway) Bindings(context.Context) (map[string]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]string{}
	for k, v := range g.bindings {
		out[k] = v
	}
	return out, nil
}

func (g *recordingGateway) SetExecNode(_ context.Context, agent, node string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if node == "" {
		delete(g.bindings, agent)
	} else {
		g.bindings[agent] = node
	}
	return nil
}

func TestNodesAPI(t *testing.T) {
	c, _, _ := startAPI(t, nil)
	var e apiError
	if got := c.get("api/nodes", &e); got != 404 {
		t.Errorf("nodes without a gateway: status %d, want 404", got)
	}
	if got := c.post("api/binding", bindingRequest{Agent: "main", Node: "x"}, &e); got != 404 {
		t.Errorf("binding without a gateway: status %d, want 404", got)
	}

	gw := &recordingGateway{bindings: map[string]string{}}
	c, _, _ = startAPI(t, gw)
	var st stateView
	c.get("api/state", &st)
	if !st.Gateway {
		t.Errorf("state.gateway = false with a gateway binding")
	}
	if got := c.post("api/binding", bindingRequest{Agent: "main", Node: " n-1234567 "}, nil); got != 200 {
		t.Fatalf("bind: status %d", got)
	}
	if got := c.post("api/binding", bindingRequest{Agent: "", Node: "n-1234567"}, nil); got != 200 {
		t.Fatalf("bind global: status %d", got)
	}
	if got := c.post("api/binding", bindingRequest{Agent: "x\x00", Node: "n"}, nil); got != 400 {
		t.Errorf("bind a bad agent id: status %d, want 400", got)
	}
	var nv nodesView
	c.get("api/nodes", &nv)
	want := nodesView{Nodes: []Node{{ID: "n-1234567", DisplayName: "build box", Connected: true}},
		Bindings: map[string]string{"main": "n-1234567", "": "n-1234567"}}
	if d := cmp.Diff(want, nv); d != "" {
		t.Errorf("nodes (-want +got):\n%s", d)
	}
}

func TestStaticFiles(t *testing.T) {
	c, _, _ := startAPI(t, nil)
	tests := []struct {
		path, wantType string
		want           int
	}{
		{"", "text/html", 200},
		{"static/app.js", "text/javascript", 200},
		{"static/style.css", "text/css", 200},
		{"static/icon.svg", "image/svg+xml", 200},
		{"static/", "", 404},
		{"static/nope.js", "", 404},
		{"index.html", "", 404},
		{"api/nope", "", 404},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest("GET", c.base+tt.path, nil)
		req.Header.Set(SecretHeader, c.secret) // so unknown paths reach the mux's 404
		res, err := c.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tt.want || !strings.HasPrefix(res.Header.Get("Content-Type"), tt.wantType) {
			t.Errorf("GET /%s: %d %q, want %d %q", tt.path, res.StatusCode, res.Header.Get("Content-Type"), tt.want, tt.wantType)
		}
		checkSecurityHeaders(t, res.Header)
	}
}

func TestNoInlineScriptOrStyle(t *testing.T) {
	// The CSP forbids inline code; a stray one would silently not run.
	b, err := staticFS.ReadFile("static/index.html")
	if err != nil {
		t.Fatal(err)
	}
	html := string(b)
	for _, bad := range []string{"<script>", " style=", "<style", "onclick=", "onload=", "javascript:", "http://", "https://"} {
		if strings.Contains(html, bad) {
			t.Errorf("index.html contains %q, which the CSP blocks or which leaves the origin", bad)
		}
	}
}
