// Package web is the browser front end of the human approver: a small web
// app, served from files embedded in the binary, that shows pending exec
// prompts live and answers them, edits the execution host's
// exec-approvals.json (allowlists, per-agent security / ask / askFallback)
// and, when connected to a gateway, binds agents to nodes.
//
// It is a local admin API and is protected like one: it listens on loopback
// only; every API request needs the per-run secret in a header (the URL
// printed at start carries it in the fragment, which no browser sends to a
// server; the page keeps it in sessionStorage — never a cookie, which the
// browser would send to every port of 127.0.0.1); foreign Host and Origin
// headers are refused (DNS rebinding, cross-site requests); changes are
// POST-only with a random per-session CSRF token from a same-origin page;
// a strict Content-Security-Policy allows nothing but the embedded files,
// and framing is denied. docs/threat-model.md says what this defends.
//
// The same handler (NewHandler) is mounted by the gateway for its
// operators, where the broker carries pending prompts from every host.
package web

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/prompt"
)

// Options configures the web approver.
type Options struct {
	// Addr is the loopback host:port to listen on (Start; port 0 picks a
	// free port) or the concrete address the handler is served at
	// (NewHandler), which the Host and Origin checks accept.
	Addr string
	// Broker holds the pending prompts and takes the human's answers.
	// Required.
	Broker *prompt.Broker
	// StateDir is the state directory whose exec-approvals.json the editor
	// changes. Empty hides the editor (an operator UI without a local
	// approvals file).
	StateDir string
	// Gateway, when set, enables the node binding controls. It may be nil.
	Gateway GatewayBinding
	// DecidedBy names who answered in Broker.Resolve and so in the
	// execution host's audit log; empty means "web". The gateway sets
	// the operator's name.
	DecidedBy string
	// OnEdit, when set, hears every approvals edit the editor makes (what
	// changed, the hash it was based on) before it is written: the gateway
	// records it in its audit log.
	OnEdit func(what, baseHash string)
	// Logf receives one line per decision, edit and server error. Nil
	// discards them.
	Logf func(format string, args ...any)
}

// GatewayBinding is what the node binding controls need from a gateway:
// the paired nodes and the tools.exec.node setting per agent. The gateway
// implements it; the web approver only calls it on behalf of an
// authenticated, same-origin page.
type GatewayBinding interface {
	// Nodes lists the paired nodes.
	Nodes(ctx context.Context) ([]Node, error)
	// Bindings returns tools.exec.node per agent id; the key "" is the
	// global tools.exec.node. Unbound agents are absent.
	Bindings(ctx context.Context) (map[string]string, error)
	// SetExecNode sets tools.exec.node for agentID ("" for the global
	// setting). An empty node removes the binding.
	SetExecNode(ctx context.Context, agentID, node string) error
}

// Node is one paired node as the binding controls show it.
type Node struct {
	ID          string `json:"id"`
	DisplayName string `json:"displayName"`
	RemoteIP    string `json:"remoteIp,omitempty"`
	Connected   bool   `json:"connected"`
}

// ErrNoBroker is returned when Options.Broker is nil: without a broker
// there is nothing to approve.
var ErrNoBroker = errors.New("web approver needs a broker")

// NewHandler returns the web approver's handler, already behind its
// security layer, and the per-run secret. opts.Addr must be the concrete
// loopback address the handler is served at. The URL to print for the
// human is URL(opts.Addr, secret).
//
// The gateway mounts it for its operators the same way; under a path
// prefix it works with http.StripPrefix as long as the prefix ends in "/"
// (every URL the page uses is relative).
func NewHandler(opts Options) (http.Handler, string, error) {
	if opts.Broker == nil {
		return nil, "", ErrNoBroker
	}
	secret, err := newSecret()
	if err != nil {
		return nil, "", err
	}
	g, err := newGuard(opts.Addr, secret)
	if err != nil {
		return nil, "", err
	}
	s := newServer(opts, g)
	return g.wrap(s.routes(), isMutation), secret, nil
}

// URL returns the address to open in a browser: the handler's address with
// the secret in the fragment (#k=…), which browsers never send to a
// server; the page reads it and sends it in SecretHeader.
func URL(addr, secret string) string {
	u := url.URL{Scheme: "http", Host: addr, Path: "/", Fragment: SecretParam + "=" + secret}
	return u.String()
}

// Start listens on opts.Addr (loopback only), serves the web approver until
// ctx is done, and returns the URL to print: it carries the per-run secret.
// Serving errors after start go to opts.Logf.
func Start(ctx context.Context, opts Options) (string, error) {
	if opts.Broker == nil {
		return "", ErrNoBroker
	}
	ln, err := Listen(ctx, opts.Addr)
	if err != nil {
		return "", err
	}
	return Serve(ctx, ln, opts)
}

// CheckAddr reports why addr cannot be the web approver's address (not
// host:port, a bad port, not loopback), without binding it: callers that
// classify bad input before acting check first.
func CheckAddr(addr string) error {
	_, err := loopbackPort(addr)
	return err
}

// Listen binds addr, which must be a loopback address (CheckAddr), so a caller can
// fail at once on a bad or busy address before starting anything else.
// "localhost" binds 127.0.0.1: it may resolve to a non-loopback address on
// a broken resolver.
func Listen(ctx context.Context, addr string) (net.Listener, error) {
	port, err := loopbackPort(addr)
	if err != nil {
		return nil, err
	}
	listenAddr := addr
	if hostname, _, _ := net.SplitHostPort(addr); strings.EqualFold(hostname, "localhost") {
		listenAddr = net.JoinHostPort("127.0.0.1", port)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", listenAddr)
	if err != nil {
		return nil, hint.Wrap(fmt.Errorf("web approver listen on %s: %w", listenAddr, err), "is the port in use? try 127.0.0.1:0")
	}
	return ln, nil
}

// Serve serves the web approver on ln (from Listen) until ctx is done and
// returns the URL to print. It is the one web server of the approver and
// of the gateway's operator UI. It takes ownership of ln; opts.Addr is
// replaced by ln's address.
func Serve(ctx context.Context, ln net.Listener, opts Options) (string, error) {
	opts.Addr = ln.Addr().String()
	h, secret, err := NewHandler(opts)
	if err != nil {
		ln.Close()
		return "", err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	if opts.Logf != nil {
		srv.ErrorLog = log.New(logWriter(opts.Logf), "web approver: ", 0)
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logf(opts.Logf, "web approver: serve %s: %v", opts.Addr, err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		srv.Close() // event streams do not end on Shutdown
	}()
	return URL(opts.Addr, secret), nil
}

// logWriter sends the http.Server's own log lines (bad requests, panics in
// handlers) to Options.Logf instead of the process's stderr.
type logWriter func(string, ...any)

func (w logWriter) Write(p []byte) (int, error) {
	w("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func logf(f func(string, ...any), format string, args ...any) {
	if f != nil {
		f(format, args...)
	}
}
