// Package gateway is the exechost gateway daemon: a WebSocket server that
// agents and operators (with the gateway token) and paired nodes (with their
// own tokens) connect to. It resolves each exec's host and policy, runs
// host=gateway commands through the local host engine, forwards host=node
// commands to the selected node as node.invoke, hands host=sandbox commands
// to the sandbox backend, and turns lifecycle events into per-session
// system events.
package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/config"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/inflight"
	"github.com/exechost/exechost/internal/metrics"
	"github.com/exechost/exechost/internal/nodekey"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/receipt"
	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/session"
	"github.com/exechost/exechost/internal/state"
	"github.com/exechost/exechost/internal/trace"
)

// Executor runs one command on this machine after applying its policy;
// *host.Engine implements it.
type Executor interface {
	Run(ctx context.Context, req host.Request) (host.Result, error)
}

// Options configure a Gateway.
type Options struct {
	// StateDir holds gateway.json and nodes.json.
	StateDir string
	// Config is the initial configuration (config.Default() when nil).
	Config *config.Config
	// Executor runs host=gateway commands. Nil makes host=gateway fail
	// with a clear error.
	Executor Executor
	// Sandbox runs host=sandbox commands. Nil makes host=sandbox fail with
	// sandbox.ErrNotConfigured; it never falls back to the host.
	Sandbox sandbox.Backend
	// SandboxError says why Sandbox is nil (it wraps
	// sandbox.ErrNotConfigured), for the error host=sandbox returns.
	SandboxError error
	// Logger receives operational logs; nil discards them.
	Logger *slog.Logger
	// Version is reported to clients.
	Version string
	// Metrics receives exec, node and approval metrics; nil records
	// nothing.
	Metrics *metrics.Metrics
	// Audit receives a record of every decision the gateway makes itself
	// (audit.go); nil records nothing. The gateway's own host engine
	// records its runs separately (host.AuditTo), normally to the same log.
	Audit AuditRecorder
	// Receipts, when set, receives the gateway's countersignature of each
	// run it forwarded to a node (receipts.go); the gateway's engine
	// writes its own runs' receipts to the same log.
	Receipts *receipt.Log
	// Tracer, when set, gives each exec an OpenTelemetry span (trace.go);
	// nil traces nothing.
	Tracer *trace.Tracer
	// DrainTimeout bounds how long a stopping gateway waits for running
	// execs (DefaultDrainTimeout when 0; negative: do not wait).
	DrainTimeout time.Duration
	// unboundChannel accepts a connect without a channel key and then
	// runs the connection unsealed, as gateways before the channel did:
	// only for the relay tests' control (relay_internal_test.go), which
	// shows what the channel defends against.
	unboundChannel bool
}

// Gateway is the daemon's state. Create it with New.
type Gateway struct {
	opts  Options
	token string
	// key is the gateway's identity: the connect result is signed with it
	// so clients know they reached this gateway (<state>/gateway.key).
	key      *nodekey.Key
	keyStr   string
	cfg      atomic.Pointer[config.Config]
	log      *slog.Logger
	reg      *registry
	sessions *session.Store

	mu       sync.Mutex
	live     map[string]*nodeConn    // paired, connected nodes by id
	pending  map[string]*nodeConn    // unpaired nodes waiting for approval
	clients  map[*bridge.Conn]caller // who each client connection is (revoke.go)
	invokes  map[string]*invokeWaiter
	runs     map[string]*run
	kept     keptOutput   // output of delivered runs (runs.go)
	finished finishedRuns // finished runs, oldest first (runs.go)
	closed   bool
	// draining refuses new execs while a stopping gateway lets the
	// running ones finish.
	draining bool

	prompts *promptHub // prompts routed to the gateway (prompts.go)

	// cfgMu serialises every change of cfg: a reload (SetConfig) and a
	// web UI binding edit (SetExecNode) both recompute cfg from base and
	// execNodes under it, so neither can overwrite the other.
	cfgMu     sync.Mutex
	base      *config.Config // the configuration as loaded (config.go)
	execNodes []execNode     // web UI binding edits, kept until restart (config.go)

	fingerprint string
	unauth      unauthAudit       // rate limit on records about unauthenticated peers (audit.go)
	refusals    *audit.Aggregator // the same for authenticated callers' refusals (aggregateRefusal)
	handshakes  handshakes        // connections still authenticating (source.go)
	callers     callerBounds      // what each authenticated caller holds (callers.go)
	// nodeFrameLimit is the largest invoke frame sent to a node
	// (maxNodeInvoke unless a test changes it; negative: unchecked).
	nodeFrameLimit int
	// revokeOff stops watchRevocations from cutting (tests' control).
	revokeOff atomic.Bool
	adm       inflight.Limiter // execs in flight against gateway.limits (admission.go)
	execCalls atomic.Int64     // exec requests not yet returned (dispatch.go; drain.go waits for them)
	targets   targets          // the execution targets by host (target.go)
}

// New opens the gateway's state (creating the token on first start).
func New(opts Options) (*Gateway, error) {
	if opts.StateDir == "" {
		return nil, errors.New("gateway: no state directory")
	}
	if err := state.Ensure(opts.StateDir); err != nil {
		return nil, err
	}
	tok, err := LoadOrCreateToken(opts.StateDir)
	if err != nil {
		return nil, err
	}
	key, _, err := nodekey.LoadOrCreateFile(state.KeyPath(opts.StateDir))
	if err != nil {
		return nil, fmt.Errorf("gateway identity: %w", err)
	}
	reg, err := openRegistry(opts.StateDir)
	if err != nil {
		return nil, err
	}
	if opts.Config == nil {
		opts.Config = config.Default()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	g := &Gateway{
		opts:     opts,
		token:    tok,
		key:      key,
		keyStr:   key.PublicKeyString(),
		log:      opts.Logger,
		reg:      reg,
		sessions: session.NewStore(),
		live:     make(map[string]*nodeConn),
		pending:  make(map[string]*nodeConn),
		clients:  make(map[*bridge.Conn]caller),
		invokes:  make(map[string]*invokeWaiter),
		runs:     make(map[string]*run),
		refusals: newRefusalAudit(),
	}
	g.base = opts.Config
	g.cfg.Store(opts.Config)
	g.prompts = newPromptHub(g.log.Debug)
	g.prompts.onAnswer = g.auditRelay
	g.targets = newTargets(g)
	return g, nil
}

// Token returns the gateway token (for in-process clients such as `up`).
func (g *Gateway) Token() string { return g.token }

// PublicKey returns the gateway's identity key (unpadded base64url), which
// clients pin.
func (g *Gateway) PublicKey() string { return g.keyStr }

// Fingerprint returns the TLS certificate's SHA-256 fingerprint (hex), or
// "" when serving plain ws://.
func (g *Gateway) Fingerprint() string { return g.fingerprint }

// Serve accepts connections on ln until ctx ends, then closes every
// connection and returns. With gateway.tls configured it serves wss://.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	cfg := g.Config()
	if cfg.Gateway.TLS.Cert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.Gateway.TLS.Cert, cfg.Gateway.TLS.Key)
		if err != nil {
			return hint.Wrap(fmt.Errorf("load gateway certificate: %w", err), "gateway.tls.cert and .key must be PEM files")
		}
		sum := sha256.Sum256(cert.Certificate[0])
		g.fingerprint = hex.EncodeToString(sum[:])
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		g.log.Info("serving wss", "tlsFingerprint", g.fingerprint)
	}
	srv := &http.Server{
		Handler:           g,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	go g.watchApprovals(wctx)
	go g.watchRevocations(wctx, RevocationPoll)
	go g.flushRefusals(wctx)
	select {
	case err := <-errc:
		g.Close()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	if g.opts.DrainTimeout >= 0 {
		g.drain()
	}
	g.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return nil
}

// Close disconnects every client and node.
func (g *Gateway) Close() {
	g.mu.Lock()
	already := g.closed
	g.closed = true
	var conns []*bridge.Conn
	for c := range g.clients {
		conns = append(conns, c)
	}
	for _, n := range g.live {
		conns = append(conns, n.conn)
	}
	for _, n := range g.pending {
		conns = append(conns, n.conn)
	}
	g.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() { defer wg.Done(); c.Close("gateway shutting down") }()
	}
	wg.Wait()
	if !already {
		g.prompts.close()
	}
}

// HostEvent turns a lifecycle event of a host=gateway run into a system
// event for its session. Wire it to the gateway's host.Engine OnEvent.
func (g *Gateway) HostEvent(ev bridge.ExecEvent) {
	key := session.NewKey(ev.AgentID, ev.SessionKey)
	r := g.hostRun(ev.RunID, policy.HostGateway)
	if r != nil {
		key = r.key
	}
	g.lifecycle(key, r, "gateway", ev)
}
