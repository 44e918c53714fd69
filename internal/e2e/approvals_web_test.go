package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/approvalroute"
	"github.com/exechost/exechost/internal/approverui/web"
	"github.com/exechost/exechost/internal/bridge"
)

var webURLRE = regexp.MustCompile(`gateway web UI: (http://127\.0\.0\.1:[0-9]+/#k=[^\s]+)`)

// newWebCluster starts a gateway with `--web 127.0.0.1:0` and returns the
// printed web UI URL.
func newWebCluster(t *testing.T, config string) (*cluster, string) {
	t.Helper()
	c := &cluster{t: t, gwDir: newStateDir(t, "gateway"), nodes: map[string]*node{}}
	writeFile(t, filepath.Join(c.gwDir, "exechost.json"), config)
	writeFile(t, filepath.Join(c.gwDir, "exec-approvals.json"), policyFull)
	c.gw = start(t, c.gwDir, "gateway", "--log-level", "debug", "--web", "127.0.0.1:0")
	waitFor(t, "gateway and web UI to listen", func() bool {
		out := c.gw.Out.String()
		return urlRE.MatchString(out) && webURLRE.MatchString(out)
	})
	out := c.gw.Out.String()
	c.url = urlRE.FindStringSubmatch(out)[1]
	c.addr = strings.TrimPrefix(c.url, "ws://")
	return c, webURLRE.FindStringSubmatch(out)[1]
}

// webClient is a browser-like client of the web UI: the secret from the
// URL fragment in its header on every request, Origin and a session's
// CSRF header on changes. No cookie jar: nothing depends on one.
type webClient struct {
	t            *testing.T
	base, origin string
	secret       string
	csrf         string
	hc           *http.Client
}

func webLogin(t *testing.T, startURL string) *webClient {
	t.Helper()
	u, err := url.Parse(startURL)
	if err != nil {
		t.Fatal(err)
	}
	w := &webClient{t: t, base: "http://" + u.Host + "/", origin: "http://" + u.Host, hc: &http.Client{},
		secret: strings.TrimPrefix(u.Fragment, web.SecretParam+"=")}
	var sess struct {
		CSRF string `json:"csrf"`
	}
	if code := w.do("POST", "api/session", nil, &sess); code != http.StatusOK || sess.CSRF == "" {
		t.Fatalf("open %s: api/session status %d", startURL, code)
	}
	w.csrf = sess.CSRF
	return w
}

func (w *webClient) do(method, path string, body any, out any) int {
	w.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, w.base+path, rd)
	req.Header.Set(web.SecretHeader, w.secret)
	if method == "POST" {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", w.origin)
		req.Header.Set(web.CSRFHeader, w.csrf)
	}
	res, err := w.hc.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	if out != nil && res.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, out); err != nil {
			w.t.Fatalf("%s %s: %v\n%s", method, path, err, data)
		}
	}
	return res.StatusCode
}

// TestGatewayWebUI: the gateway serves the approver web UI for its
// operators: it lists prompts from a node, answers them, and binds agents
// to nodes.
func TestGatewayWebUI(t *testing.T) {
	c, webURL := newWebCluster(t, gatewayConfig)
	n := c.addRoutedNode("web-approved", policyOnMiss, "--approvals-route", "gateway")
	_, requested, resolved := c.operatorConn("watcher")
	w := webLogin(t, webURL)

	done := c.execBackground("--host", "node", "--node", n.id, "/bin/echo from-web")
	req := next(t, requested, "exec.approval.requested")
	var pending json.RawMessage
	if code := w.do("GET", "api/pending", nil, &pending); code != http.StatusOK || !strings.Contains(string(pending), req.ID) {
		t.Fatalf("api/pending: %d %s", code, pending)
	}
	if code := w.do("POST", "api/decide", map[string]string{"id": req.ID, "decision": "allow-once"}, nil); code != http.StatusOK {
		t.Fatalf("api/decide: status %d", code)
	}
	if r := next(t, done, "exec to finish"); r.code != 0 || !strings.Contains(r.stdout, "from-web") {
		t.Fatalf("exec: %s", r)
	}
	if got := next(t, resolved, "exec.approval.resolved"); got.ID != req.ID || got.By != "operator web UI" {
		t.Errorf("resolved = %+v", got)
	}

	// Without the secret nothing is served.
	res, err := http.Get(w.base + "api/pending")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("api/pending without the secret: status %d, want 403", res.StatusCode)
	}

	// Node binding: the nodes list and tools.exec.node for an agent
	// (in memory), which then scopes the agent's nodes.list.
	var nodes struct {
		Nodes []web.Node `json:"nodes"`
	}
	if code := w.do("GET", "api/nodes", nil, &nodes); code != http.StatusOK || len(nodes.Nodes) != 1 || nodes.Nodes[0].ID != n.id {
		t.Fatalf("api/nodes: %d %+v", code, nodes)
	}
	if code := w.do("POST", "api/binding", map[string]string{"agent": "bound", "node": "no-such-node"}, nil); code != http.StatusBadRequest {
		t.Errorf("binding to an unknown node: status %d, want 400", code)
	}
	if code := w.do("POST", "api/binding", map[string]string{"agent": "bound", "node": n.id}, nil); code != http.StatusOK {
		t.Fatalf("api/binding: status %d", code)
	}
	c.addRoutedNode("other", policyFull)
	op, _, _ := c.operatorConn("lister")
	for _, tt := range []struct {
		agent string
		want  int
	}{{"bound", 1}, {"free", 2}} {
		agent := c.agentConn()
		var res bridge.NodesResult
		if err := agent.Call(t.Context(), bridge.MethodNodesList, bridge.SessionParams{AgentID: tt.agent}, &res); err != nil || len(res.Nodes) != tt.want {
			t.Errorf("agent %s nodes.list = %+v, %v; want %d nodes", tt.agent, res, err, tt.want)
		}
	}
	var all bridge.NodesResult
	if err := op.Call(t.Context(), bridge.MethodNodesList, nil, &all); err != nil || len(all.Nodes) != 2 {
		t.Errorf("operator nodes.list = %+v, %v", all, err)
	}
	var none approvalroute.PendingResult
	if err := op.Call(t.Context(), approvalroute.MethodPending, nil, &none); err != nil || len(none.Approvals) != 0 {
		t.Errorf("pending = %+v, %v", none, err)
	}
}
