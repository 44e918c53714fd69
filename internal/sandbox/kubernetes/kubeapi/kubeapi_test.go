package kubeapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// pki is a CA and certificates it signed, for TLS servers and clients.
type pki struct {
	caPEM []byte
	ca    *x509.Certificate
	key   *ecdsa.PrivateKey
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return &pki{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca: ca, key: key}
}

// issue returns a PEM certificate and key for cn (a server's for
// 127.0.0.1 when server).
func (p *pki) issue(t *testing.T, cn string, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// tlsServer is an HTTPS server with p's certificate that asks for a
// client certificate signed by p and puts the client's name (or the
// bearer token) in the X-Who answer header.
func (p *pki) tlsServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	certPEM, keyPEM := p.issue(t, "server", true)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caPEM)
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the test's own
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// who answers with the caller's identity: its client certificate's name
// or its bearer token, or 401.
func who(w http.ResponseWriter, r *http.Request) {
	id := ""
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		id = "cert:" + r.TLS.PeerCertificates[0].Subject.CommonName
	}
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		id = "token:" + tok
	}
	if id == "" {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"kind":"Status","status":"Failure","reason":"Unauthorized","message":"Unauthorized","code":401}`)
		return
	}
	json.NewEncoder(w).Encode(map[string]string{"who": id})
}

func whoAmI(t *testing.T, c *Client) (string, error) {
	t.Helper()
	var out struct{ Who string }
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c.Do(ctx, http.MethodGet, "/who", nil, nil, &out)
	return out.Who, err
}

func write(t *testing.T, path string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKubeconfigClientCertificate: a kubeconfig with the CA and a client
// certificate as files (relative to the kubeconfig) and, in a second
// user, inline data; the server sees each identity. The control: without
// the CA the server's certificate is refused.
func TestKubeconfigClientCertificate(t *testing.T) {
	p := newPKI(t)
	srv := p.tlsServer(t, http.HandlerFunc(who))
	dir := t.TempDir()
	write(t, filepath.Join(dir, "ca.crt"), p.caPEM)
	c1, k1 := p.issue(t, "alice", false)
	write(t, filepath.Join(dir, "alice.crt"), c1)
	write(t, filepath.Join(dir, "alice.key"), k1)
	c2, k2 := p.issue(t, "bob", false)
	b64 := base64.StdEncoding.EncodeToString
	kc := write(t, filepath.Join(dir, "config"), fmt.Appendf(nil, `apiVersion: v1
kind: Config
current-context: alice
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority: ca.crt
- name: test-inline
  cluster:
    server: %s
    certificate-authority-data: %s
- name: no-ca
  cluster:
    server: %s
users:
- name: alice
  user: {client-certificate: alice.crt, client-key: alice.key}
- name: bob
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: alice
  context: {cluster: test, user: alice, namespace: team}
- name: bob
  context: {cluster: test-inline, user: bob}
- name: no-ca
  context: {cluster: no-ca, user: alice}
`, srv.URL, srv.URL, b64(p.caPEM), srv.URL, b64(c2), b64(k2)))
	for ctxName, want := range map[string]string{"": "cert:alice", "bob": "cert:bob"} {
		cfg, err := Load(kc, ctxName)
		if err != nil {
			t.Fatalf("Load(%q): %v", ctxName, err)
		}
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := whoAmI(t, c); got != want || err != nil {
			t.Errorf("context %q: server saw %q, %v; want %q", ctxName, got, err, want)
		}
	}
	if cfg, _ := Load(kc, ""); cfg.Namespace != "team" {
		t.Errorf("namespace = %q, want the context's", cfg.Namespace)
	}
	cfg, err := Load(kc, "no-ca")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := New(cfg)
	if _, err := whoAmI(t, c); err == nil || !strings.Contains(err.Error(), "certificate") || IsStatus(err) {
		t.Errorf("a server whose CA the kubeconfig does not name: %v, want a certificate error (not an API answer)", err)
	}
	if _, err := Load(kc, "nope"); err == nil || !strings.Contains(err.Error(), `no context "nope"`) {
		t.Errorf("Load of a missing context: %v", err)
	}
}

// TestKubeconfigList: $KUBECONFIG's files merge, the first to name a
// context, cluster or user winning; a missing file of the list is skipped.
func TestKubeconfigList(t *testing.T) {
	dir := t.TempDir()
	a := write(t, filepath.Join(dir, "a"), []byte(`
current-context: one
contexts:
- {name: one, context: {cluster: c, user: u}}
users:
- {name: u, user: {token: first}}
`))
	b := write(t, filepath.Join(dir, "b"), []byte(`
current-context: two
clusters:
- {name: c, cluster: {server: "https://first.example:6443"}}
users:
- {name: u, user: {token: second}}
`))
	t.Setenv("KUBECONFIG", strings.Join([]string{filepath.Join(dir, "missing"), a, b}, string(os.PathListSeparator)))
	cfg, err := Load("", "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://first.example:6443" || cfg.Token != "first" {
		t.Errorf("merged config = %+v, want the cluster from b and the token from a", cfg)
	}
	t.Setenv("KUBECONFIG", filepath.Join(dir, "missing"))
	if _, err := Load("", ""); err == nil || !strings.Contains(err.Error(), "no kubeconfig") {
		t.Errorf("Load with no file: %v", err)
	}
	ap := write(t, filepath.Join(dir, "ap"), []byte(`
current-context: x
contexts: [{name: x, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://h"}}]
users: [{name: u, user: {auth-provider: {name: gcp}}}]
`))
	if _, err := Load(ap, ""); err == nil || !strings.Contains(err.Error(), "exec credential plugin") {
		t.Errorf("auth-provider: %v, want a refusal naming exec plugins", err)
	}
}

// TestTokenFileAndInCluster: in-cluster credentials from a service
// account directory; the token file is read again after a minute (the
// clock is the authenticator's).
func TestTokenFileAndInCluster(t *testing.T) {
	p := newPKI(t)
	srv := p.tlsServer(t, http.HandlerFunc(who))
	dir := t.TempDir()
	write(t, filepath.Join(dir, "ca.crt"), p.caPEM)
	write(t, filepath.Join(dir, "token"), []byte("sa-1\n"))
	write(t, filepath.Join(dir, "namespace"), []byte("sandboxes"))
	u := strings.TrimPrefix(srv.URL, "https://")
	host, port, _ := net.SplitHostPort(u)
	env := map[string]string{"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}
	cfg, err := InCluster(func(k string) string { return env[k] }, dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Namespace != "sandboxes" {
		t.Errorf("namespace = %q", cfg.Namespace)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c.auth.now = func() time.Time { return now }
	if got, err := whoAmI(t, c); got != "token:sa-1" {
		t.Fatalf("server saw %q, %v", got, err)
	}
	write(t, filepath.Join(dir, "token"), []byte("sa-2\n"))
	if got, _ := whoAmI(t, c); got != "token:sa-1" {
		t.Errorf("within the minute: %q, want the cached token", got)
	}
	now = now.Add(61 * time.Second)
	if got, _ := whoAmI(t, c); got != "token:sa-2" {
		t.Errorf("after a minute: %q, want the rotated token", got)
	}
	if _, err := InCluster(func(string) string { return "" }, dir); err == nil {
		t.Error("InCluster outside a pod: no error")
	}
}

// TestExecPlugin: a credential plugin (a real program) gets
// KUBERNETES_EXEC_INFO and its env, answers an ExecCredential; its token
// is kept until it expires, or until the server refuses it.
func TestExecPlugin(t *testing.T) {
	var refuse atomic.Bool
	p := newPKI(t)
	srv := p.tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuse.Swap(false) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		who(w, r)
	}))
	dir := t.TempDir()
	count := filepath.Join(dir, "count")
	plugin := filepath.Join(dir, "plugin.sh")
	expiry := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if err := os.WriteFile(plugin, fmt.Appendf(nil, `#!/bin/sh
echo run >> %q
case "$KUBERNETES_EXEC_INFO" in *'"kind":"ExecCredential"'*'"server":"%s"'*) ;; *) echo "bad exec info: $KUBERNETES_EXEC_INFO" >&2; exit 1;; esac
n=$(wc -l < %q | tr -d ' ')
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%%s-%%s","expirationTimestamp":"%s"}}' "$PLUGIN_PREFIX" "$n"
`, count, srv.URL, count, expiry), 0o700); err != nil {
		t.Fatal(err)
	}
	kc := write(t, filepath.Join(dir, "config"), fmt.Appendf(nil, `
current-context: x
contexts: [{name: x, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: %q, certificate-authority-data: %s}}]
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./plugin.sh
      provideClusterInfo: true
      env: [{name: PLUGIN_PREFIX, value: tok}]
`, srv.URL, base64.StdEncoding.EncodeToString(p.caPEM)))
	cfg, err := Load(kc, "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if got, err := whoAmI(t, c); got != "token:tok-1" {
			t.Fatalf("server saw %q, %v; want the plugin's first token", got, err)
		}
	}
	refuse.Store(true)
	if _, err := whoAmI(t, c); !IsUnauthorized(err) {
		t.Fatalf("refused request: %v, want Unauthorized", err)
	}
	if got, _ := whoAmI(t, c); got != "token:tok-2" {
		t.Errorf("after a 401: %q, want the plugin run again", got)
	}
	// A plugin that is not installed names its install hint.
	cfg.Exec = &ExecConfig{Command: "exechost-no-such-plugin", InstallHint: "install it from your cloud"}
	c, _ = New(cfg)
	if _, err := whoAmI(t, c); err == nil || !strings.Contains(err.Error(), "install it from your cloud") {
		t.Errorf("missing plugin: %v, want its install hint", err)
	}
}

// TestNoRedirectWithToken runs the attack of pitfall 20: an API server
// (or whoever answers at its address) redirects to another port of the
// same host, which net/http counts as the same host and so would send the
// bearer token to. The client does not follow; the control, the same
// client with net/http's default redirect policy, hands the token over.
func TestNoRedirectWithToken(t *testing.T) {
	var leaked atomic.Value
	leaked.Store("")
	thief := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Store(r.Header.Get("Authorization"))
	}))
	defer thief.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, thief.URL+"/steal", http.StatusTemporaryRedirect)
	}))
	defer api.Close()
	c, err := New(&Config{Host: api.URL, Token: "secret-token"})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Do(context.Background(), http.MethodGet, "/api/v1/namespaces", nil, nil, nil)
	if !IsStatus(err) || leaked.Load() != "" {
		t.Errorf("redirect: err %v, thief saw %q; want the redirect refused as an answer and no token sent", err, leaked.Load())
	}
	c.hc.CheckRedirect = nil // the defence off
	_ = c.Do(context.Background(), http.MethodGet, "/api/v1/namespaces", nil, nil, nil)
	if leaked.Load() != "Bearer secret-token" {
		t.Errorf("control: thief saw %q; without the defence the token should have followed the redirect", leaked.Load())
	}
}

// TestErrors: the API server's Status answers become StatusErrors the
// Is* functions tell apart; a server that does not answer is not one.
func TestErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/missing":
			w.WriteHeader(404)
			fmt.Fprint(w, `{"kind":"Status","status":"Failure","message":"pods \"x\" not found","reason":"NotFound","code":404}`)
		case "/forbidden":
			w.WriteHeader(403)
			fmt.Fprint(w, `{"kind":"Status","status":"Failure","message":"pods is forbidden: User \"u\" cannot list","reason":"Forbidden","code":403}`)
		case "/exists":
			w.WriteHeader(409)
			fmt.Fprint(w, `{"kind":"Status","status":"Failure","message":"already exists","reason":"AlreadyExists","code":409}`)
		case "/plain":
			w.WriteHeader(500)
			fmt.Fprint(w, "internal trouble")
		}
	}))
	addr := srv.URL
	c, err := New(&Config{Host: addr})
	if err != nil {
		t.Fatal(err)
	}
	get := func(p string) error { return c.Do(context.Background(), http.MethodGet, p, nil, nil, nil) }
	if err := get("/missing"); !IsNotFound(err) || IsForbidden(err) || err.Error() != `pods "x" not found` {
		t.Errorf("404: %v", err)
	}
	if err := get("/forbidden"); !IsForbidden(err) || !strings.Contains(err.Error(), "cannot list") {
		t.Errorf("403: %v", err)
	}
	if err := get("/exists"); !IsAlreadyExists(err) {
		t.Errorf("409: %v", err)
	}
	if err := get("/plain"); !IsStatus(err) || err.Error() != "internal trouble" {
		t.Errorf("500 without a Status: %v", err)
	}
	srv.Close()
	if err := get("/missing"); err == nil || IsStatus(err) {
		t.Errorf("closed server: %v, want a transport error", err)
	}
	if !IsNotFound(NotFound("runtimeclasses", "x")) {
		t.Error("NotFound is not IsNotFound")
	}
	if _, err := New(&Config{Host: "127.0.0.1:6443"}); err == nil {
		t.Error("a host without a scheme was accepted")
	}
}

// TestWatch: a ?watch=1 stream of events, each flushed on its own; an
// ERROR event is a StatusError; the server's end is io.EOF.
func TestWatch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "1" || r.URL.Query().Get("fieldSelector") != "metadata.name=p" {
			w.WriteHeader(400)
			return
		}
		for _, ev := range []string{
			`{"type":"ADDED","object":{"metadata":{"name":"p"},"status":{"phase":"Pending"}}}`,
			`{"type":"MODIFIED","object":{"metadata":{"name":"p"},"status":{"phase":"Running"}}}`,
			`{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old resource version"}}`,
		} {
			fmt.Fprintln(w, ev)
			w.(http.Flusher).Flush()
		}
	}))
	defer srv.Close()
	c, _ := New(&Config{Host: srv.URL})
	w, err := c.Watch(context.Background(), "/api/v1/namespaces/n/pods", map[string][]string{"fieldSelector": {"metadata.name=p"}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var phases []string
	for range 2 {
		ev, err := w.Next()
		if err != nil {
			t.Fatal(err)
		}
		var p Pod
		if err := json.Unmarshal(ev.Object, &p); err != nil {
			t.Fatal(err)
		}
		phases = append(phases, ev.Type+" "+p.Status.Phase)
	}
	if strings.Join(phases, ",") != "ADDED Pending,MODIFIED Running" {
		t.Errorf("events = %v", phases)
	}
	var se *StatusError
	if _, err := w.Next(); !errors.As(err, &se) || se.Status.Code != 410 {
		t.Errorf("ERROR event: %v", err)
	}
	if _, err := w.Next(); err == nil {
		t.Error("no end after the server closed the stream")
	}
}

// TestPodSpecExtra: fields of a template the type does not model travel
// through decode and encode; typed fields are not duplicated.
func TestPodSpecExtra(t *testing.T) {
	var s PodSpec
	in := `{"priorityClassName":"high","affinity":{"nodeAffinity":{}},"runtimeClassName":"gvisor","containers":[]}`
	if err := json.Unmarshal([]byte(in), &s); err != nil {
		t.Fatal(err)
	}
	if s.RuntimeClassName == nil || *s.RuntimeClassName != "gvisor" || len(s.Extra) != 2 {
		t.Fatalf("decoded = %+v", s)
	}
	rc := "kata"
	s.RuntimeClassName = &rc
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(out, &m)
	if m["priorityClassName"] != "high" || m["runtimeClassName"] != "kata" || m["affinity"] == nil {
		t.Errorf("encoded = %s", out)
	}
}
