package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/client"
	"github.com/exechost/exechost/internal/config"
	"github.com/exechost/exechost/internal/gateway"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/testproc"
)

// These tests run a real gateway (host=gateway, the real host engine) in
// this process on loopback and dial it as the CLI and the MCP server do.

// startGateway serves a gateway with state dir on a loopback port and
// returns its ws:// URL. The approvals allow echo only.
func startGateway(t *testing.T, dir string) string {
	t.Helper()
	echo, err := exec.LookPath("echo")
	if err != nil {
		t.Fatal(err)
	}
	pats := []string{fmt.Sprintf("%q", echo)}
	if real, err := filepath.EvalSymlinks(echo); err == nil {
		pats = append(pats, fmt.Sprintf("%q", real))
	}
	policyText := `{"version":1,"defaults":{"security":"allowlist","ask":"off","askFallback":"deny"},
		"agents":{"*":{"allowlist":[{"pattern":` + strings.Join(pats, `},{"pattern":`) + `}]}}}`
	if err := os.WriteFile(filepath.Join(dir, "exec-approvals.json"), []byte(policyText), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Tools.Exec = config.Exec{Host: "gateway", Security: "allowlist", Ask: "off"}
	eng := host.NewEngine(dir, policy.HostGateway, "gateway")
	gw, err := gateway.New(gateway.Options{StateDir: dir, Config: cfg, Executor: eng})
	if err != nil {
		t.Fatal(err)
	}
	eng.OnEvent = gw.HostEvent
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = gw.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return "ws://" + ln.Addr().String()
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// clearEnv unsets the variables FindAuth and Dial read.
func clearEnv(t *testing.T) {
	for _, k := range []string{client.EnvCredential, client.EnvGatewayToken, client.EnvGatewayKey, client.EnvTLSFingerprint, client.EnvInsecurePlaintext} {
		t.Setenv(k, "")
	}
}

func info() bridge.ClientInfo { return bridge.ClientInfo{Name: "client-test", Version: "test"} }

// TestTypedCallsOnARealGateway: the state directory's token and pinned key
// connect; each typed call reaches its method and decodes its answer; a
// denial comes back as the gateway's *bridge.Error.
func TestTypedCallsOnARealGateway(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	url := startGateway(t, dir)
	ctx := testCtx(t)
	auth, err := client.FindAuth("", func() (string, error) { return dir, nil })
	if err != nil {
		t.Fatal(err)
	}
	if auth.Token == "" || auth.GatewayKey == "" || !auth.Operator() {
		t.Fatalf("FindAuth from the state directory = %+v, want its token and pinned key", auth)
	}
	var warn bytes.Buffer
	c, err := client.Dial(ctx, url, client.Options{Role: bridge.RoleOperator, Auth: auth, Client: info(), Warn: &warn})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close("done")
	if warn.Len() != 0 {
		t.Errorf("a pinned dial warned: %q", warn.String())
	}
	sess := bridge.SessionParams{SessionKey: "s1", AgentID: "main"}
	res, err := c.Exec(ctx, bridge.ExecParams{Command: "echo typed-call", SessionKey: "s1", AgentID: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != bridge.ExecCompleted || res.ExitCode != 0 || !strings.Contains(res.Stdout, "typed-call") {
		t.Fatalf("exec = %+v", res)
	}
	st, err := c.ExecStatus(ctx, bridge.ExecStatusParams{RunID: res.RunID, SessionKey: "s1", AgentID: "main"})
	if err != nil || st.RunID != res.RunID {
		t.Errorf("exec.status = %+v, %v", st, err)
	}
	if _, err := c.Events(ctx, sess); err != nil {
		t.Errorf("session.events: %v", err)
	}
	if _, err := c.Nodes(ctx, sess); err != nil {
		t.Errorf("nodes.list: %v", err)
	}
	if _, err := c.JoinKey(ctx, bridge.JoinKeyParams{TTLMs: time.Minute.Milliseconds()}); err != nil {
		t.Errorf("pairing.joinKey: %v", err)
	}
	_, err = c.Exec(ctx, bridge.ExecParams{Command: "rm -rf /nonexistent-client-test", SessionKey: "s1", AgentID: "main"})
	var be *bridge.Error
	if !errors.As(err, &be) || be.Code != bridge.CodeDenied {
		t.Errorf("exec of an unlisted command = %v, want a DENIED *bridge.Error", err)
	}
	if errors.Is(err, client.ErrUnreachable) || errors.Is(err, client.ErrNoAnswer) {
		t.Errorf("a denial is classified as a connect failure: %v", err)
	}
}

// TestPinRefusesAnotherGateway: a client pinned to one gateway's key
// refuses a second gateway (a squatter on the port) with ErrGatewayKey,
// not as an absence; unpinned, it connects and warns.
func TestPinRefusesAnotherGateway(t *testing.T) {
	clearEnv(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	startGateway(t, dirA)
	urlB := startGateway(t, dirB)
	ctx := testCtx(t)
	authA, err := client.StateDirAuth(dirA)
	if err != nil {
		t.Fatal(err)
	}
	authB, err := client.StateDirAuth(dirB)
	if err != nil {
		t.Fatal(err)
	}
	// B's token with A's pin: the token is never sent to B, and B's key
	// is refused.
	_, err = client.Dial(ctx, urlB, client.Options{Role: bridge.RoleOperator, Auth: client.Auth{Token: authB.Token, GatewayKey: authA.GatewayKey}, Client: info()})
	if !errors.Is(err, bridge.ErrGatewayKey) || errors.Is(err, client.ErrUnreachable) {
		t.Fatalf("dial with another gateway's pin = %v, want ErrGatewayKey", err)
	}
	var warn bytes.Buffer
	c, err := client.Dial(ctx, urlB, client.Options{Role: bridge.RoleOperator, Auth: client.Auth{Token: authB.Token}, Client: info(), Warn: &warn})
	if err != nil {
		t.Fatal(err)
	}
	c.Close("done")
	if !strings.Contains(warn.String(), "no pinned gateway key") {
		t.Errorf("unpinned dial warning = %q", warn.String())
	}
}

// TestCredentialFile: an issued agent credential, named by
// $EXECHOST_CREDENTIAL, wins over the state directory, pins the gateway
// from its file, connects as its agent and is refused as an operator.
func TestCredentialFile(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	url := startGateway(t, dir)
	ctx := testCtx(t)
	_, path, err := gateway.IssueCredential(dir, gateway.IssueOptions{Name: "a1", Role: bridge.RoleAgent, Agent: "a1", GatewayURL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(client.EnvCredential, path)
	t.Setenv(client.EnvGatewayToken, "ehg_not-this-one")
	auth, err := client.FindAuth("", func() (string, error) { return "", errors.New("the state directory is not consulted") })
	if err != nil {
		t.Fatal(err)
	}
	if auth.Credential == nil || auth.Token != "" || auth.GatewayKey != auth.Credential.GatewayKey || auth.Operator() {
		t.Fatalf("FindAuth = %+v, want the agent credential and its pin", auth)
	}
	c, err := client.Dial(ctx, url, client.Options{Role: bridge.RoleAgent, Auth: auth, Client: info()})
	if err != nil {
		t.Fatal(err)
	}
	c.Close("done")
	_, err = client.Dial(ctx, url, client.Options{Role: bridge.RoleOperator, Auth: auth, Client: info()})
	var be *bridge.Error
	if !errors.As(err, &be) || be.Code != bridge.CodeForbidden {
		t.Errorf("agent credential as operator = %v, want FORBIDDEN", err)
	}
}

// TestFindAuthRefusesUnpinnedStateToken: a state directory with a token
// but no gateway key is refused (nothing to check the gateway against),
// unless $EXECHOST_GATEWAY_KEY pins it; no token at all says how to get
// one.
func TestFindAuthRefusesUnpinnedStateToken(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	stateDir := func() (string, error) { return dir, nil }
	if _, err := client.FindAuth("", stateDir); err == nil || !strings.Contains(err.Error(), "no gateway token") {
		t.Errorf("no token: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "gateway.json"), []byte(`{"token":"ehg_x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := client.FindAuth("", stateDir); err == nil || !strings.Contains(err.Error(), "no gateway key") {
		t.Errorf("token without key: %v", err)
	}
	t.Setenv(client.EnvGatewayKey, "pinned-key")
	a, err := client.FindAuth("", stateDir)
	if err != nil || a.Token != "ehg_x" || a.GatewayKey != "pinned-key" {
		t.Errorf("with $%s: %+v, %v", client.EnvGatewayKey, a, err)
	}
}

// TestDialClassifiesFailures: nothing listening is ErrUnreachable with one
// clause; a listener that never answers is ErrNoAnswer at the connect
// timeout; plain ws:// to another host is refused before dialing.
func TestDialClassifiesFailures(t *testing.T) {
	clearEnv(t)
	ctx := testCtx(t)
	auth := client.Auth{Token: "ehg_x", GatewayKey: "k"}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "ws://" + ln.Addr().String()
	ln.Close()
	_, err = client.Dial(ctx, closed, client.Options{Role: bridge.RoleOperator, Auth: auth})
	if !errors.Is(err, client.ErrUnreachable) || errors.Is(err, client.ErrNoAnswer) || !strings.HasPrefix(err.Error(), "no gateway answers at "+closed+": connection refused") {
		t.Errorf("refused: %v", err)
	}
	silent := testproc.SilentListener(t)
	_, err = client.Dial(ctx, silent, client.Options{Role: bridge.RoleOperator, Auth: auth, ConnectTimeout: 200 * time.Millisecond})
	if !errors.Is(err, client.ErrNoAnswer) || errors.Is(err, client.ErrUnreachable) || !strings.Contains(err.Error(), "within 200ms") {
		t.Errorf("silent: %v", err)
	}
	// A caller's own cancellation is not "no answer".
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err = client.Dial(cctx, silent, client.Options{Role: bridge.RoleOperator, Auth: auth}); errors.Is(err, client.ErrNoAnswer) {
		t.Errorf("cancelled dial = %v, classified as no answer", err)
	}
	// 192.0.2.1 (TEST-NET-1) is never dialed: the refusal comes first.
	_, err = client.Dial(ctx, "ws://192.0.2.1:18789", client.Options{Role: bridge.RoleOperator, Auth: auth})
	if err == nil || !strings.Contains(err.Error(), "refusing plain ws://") {
		t.Errorf("remote ws://: %v", err)
	}
	t.Setenv(client.EnvInsecurePlaintext, "1")
	if err := client.CheckPlaintext("ws://192.0.2.1:18789"); err != nil {
		t.Errorf("with $%s=1: %v", client.EnvInsecurePlaintext, err)
	}
	for _, ok := range []string{"ws://localhost:1", "ws://[::1]:1", "wss://example.invalid:1"} {
		t.Setenv(client.EnvInsecurePlaintext, "")
		if err := client.CheckPlaintext(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// TestDialRetriesABusyGateway: a gateway whose handshake slots are taken
// answers the upgrade 503 (Retry-After: 1); Dial comes back as told
// within its connect bound and connects, and past the bound reports the
// gateway busy (its reason, CodeBusy), not absent.
func TestDialRetriesABusyGateway(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	real := startGateway(t, dir)
	target, err := url.Parse("http://" + strings.TrimPrefix(real, "ws://"))
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var refuse atomic.Int32
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuse.Add(-1) >= 0 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many connections from loopback are still authenticating (limit 16); retry shortly", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	frontURL := "ws" + strings.TrimPrefix(front.URL, "http")
	auth, err := client.FindAuth("", func() (string, error) { return dir, nil })
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)

	refuse.Store(2)
	c, err := client.Dial(ctx, frontURL, client.Options{Role: bridge.RoleOperator, Auth: auth, Client: info(), ConnectTimeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("dial through two busy answers: %v", err)
	}
	c.Close("done")
	if n := refuse.Load(); n >= 0 {
		t.Fatalf("the busy answers were not all given (%d left): the test shows nothing", n+1)
	}

	// The bound: still busy when it runs out.
	refuse.Store(1 << 20)
	_, err = client.Dial(ctx, frontURL, client.Options{Role: bridge.RoleOperator, Auth: auth, Client: info(), ConnectTimeout: 1500 * time.Millisecond})
	var be *bridge.Error
	if !errors.As(err, &be) || be.Code != bridge.CodeBusy || !strings.Contains(be.Message, "still authenticating") {
		t.Fatalf("dial a gateway busy past the bound: %v, want its busy answer", err)
	}
}
