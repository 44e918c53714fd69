package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/inflight"
	"github.com/exechost/exechost/internal/nodekey"
)

// Executor runs one system.run under this machine's policy; *host.Engine
// implements it.
type Executor interface {
	Run(ctx context.Context, req host.Request) (host.Result, error)
}

// Reconnect backoff bounds. The actual delay is jittered so that many nodes
// do not stampede a restarted gateway.
const (
	MinBackoff = 250 * time.Millisecond
	MaxBackoff = 15 * time.Second
)

// Terminal outcomes: the client stops instead of reconnecting, because
// retrying cannot help without a human.
var (
	ErrRejected = errors.New("pairing rejected by the gateway operator")
	ErrRevoked  = errors.New("the gateway rejected this node's token (removed or re-paired)")
	ErrJoinKey  = errors.New("the gateway refused the join key")
	// ErrRefused: the gateway found this node's connect request itself
	// invalid (a display name another node holds, …); the same request
	// would be refused again, so the node stops with the gateway's fix.
	ErrRefused = errors.New("the gateway refused this node's connect request")
)

// Options configure a Client.
type Options struct {
	// StateDir holds node.json and this node's exec-approvals.json.
	StateDir string
	// GatewayURL overrides node.json's gateway.url (and is saved there).
	GatewayURL string
	// DisplayName overrides node.json's displayName (and is saved there).
	DisplayName string
	// JoinKey pairs headlessly with a one-time key.
	JoinKey string
	// TLSFingerprint, when set, is the expected SHA-256 (hex) of a wss://
	// gateway's certificate; without it the first pairing pins what it
	// sees.
	TLSFingerprint string
	// GatewayKey, when set, pins the gateway's identity key (unpadded
	// base64url, as `exechost up` and the gateway's log print it). Without
	// it the node pins the key of the gateway it first pairs with.
	GatewayKey string
	// Executor runs system.run; nil refuses every system.run.
	Executor Executor
	// Logger receives operational logs; nil discards them.
	Logger *slog.Logger
	// Version is reported to the gateway.
	Version string
	// OnPending runs when the gateway holds the node for approval. The
	// operator compares Client.Fingerprint with `exechost nodes pending`.
	OnPending func(nodeID string)
	// OnPaired runs each time the node is connected and paired.
	OnPaired func(nodeID string)
	// MaxRuns bounds the system.run invokes in flight; more are answered
	// BUSY (admission.go). DefaultMaxRuns when 0.
	MaxRuns int
	// AllowRemoteWidening lets the gateway's `approvals set --node` widen
	// this node's exec-approvals.json (approvals.RemoteWideningFlag); off,
	// a widening needs ConfirmWidening's answer.
	AllowRemoteWidening bool
	// ConfirmWidening asks this machine's approver to confirm a remote
	// widening (nil: nobody can, and every widening is refused).
	ConfirmWidening approvals.Asker
	// Audit, when set, records the system.runs the node refuses before
	// its engine sees them (BUSY); *audit.Recorder implements it.
	Audit AuditRecorder
}

// AuditRecorder is where a node records its own refusals;
// *audit.Recorder implements it.
type AuditRecorder interface {
	Record(audit.Record) error
}

// Client is the node's side of its gateway connection: it pairs, keeps
// the connection (reconnecting with backoff), and serves the gateway's
// invokes with Options.Executor. Run (run.go) builds one beside this
// machine's host engine; together they are the node runner daemon.
type Client struct {
	opts Options
	log  *slog.Logger

	key *nodekey.Key // node.key: proves the node's identity on connect

	mu   sync.Mutex
	id   *Identity
	conn *bridge.Conn
	idem *idemCache
	// cancels ends invokes the gateway gave up on (cancel.go).
	cancels invokeCancels
	// runs counts system.run invokes in flight (admission.go).
	runs inflight.Limiter
}

// New loads (or creates) the node identity: node.json and the key pair
// in node.key. A node without a token (never paired, or told to pair
// again) takes its key's device id as node id; a paired node from before
// keys existed keeps its id, and its first connect with the valid token
// binds the new key on the gateway.
func New(opts Options) (*Client, error) {
	id, err := LoadIdentity(opts.StateDir)
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	key, created, err := nodekey.LoadOrCreate(opts.StateDir)
	if err != nil {
		return nil, err
	}
	if id.Token == "" {
		id.NodeID = key.DeviceID()
	} else if created {
		opts.Logger.Warn("generated this node's key; its next connect binds it to the existing pairing", "node", id.NodeID, "fingerprint", key.Fingerprint())
	}
	if opts.GatewayURL != "" && opts.GatewayURL != id.Gateway.URL {
		if id.Gateway.URL != "" && id.Token != "" {
			// A token belongs to the gateway that issued it: sending it
			// elsewhere would let that server replay it.
			opts.Logger.Warn("gateway URL changed: dropping this node's token; it pairs again", "old", id.Gateway.URL, "new", opts.GatewayURL)
			id.Token, id.Gateway.TLSFingerprint, id.Gateway.PublicKey = "", "", ""
		}
		id.Gateway.URL = opts.GatewayURL
	}
	if id.Gateway.URL == "" {
		return nil, hint.Wrap(errors.New("no gateway URL"), "pass --gateway ws://HOST:18789")
	}
	if opts.DisplayName != "" {
		id.DisplayName = opts.DisplayName
	}
	if opts.GatewayKey != "" {
		if id.Gateway.PublicKey != "" && id.Gateway.PublicKey != opts.GatewayKey {
			return nil, hint.Wrap(fmt.Errorf("--gateway-key %s differs from the key pinned in node.json (%s)", bridge.KeyFingerprint(opts.GatewayKey), bridge.KeyFingerprint(id.Gateway.PublicKey)), "if the gateway's key really changed, move node.json away and pair again")
		}
		id.Gateway.PublicKey = opts.GatewayKey
	}
	if opts.TLSFingerprint != "" {
		id.Gateway.TLSFingerprint = normalizeFingerprint(opts.TLSFingerprint)
	}
	if err := id.Save(opts.StateDir); err != nil {
		return nil, err
	}
	return &Client{opts: opts, log: opts.Logger, key: key, id: id, idem: newIdemCache(1024)}, nil
}

// Fingerprint returns the short fingerprint of this node's key, which
// `exechost nodes pending` shows next to the node's id.
func (c *Client) Fingerprint() string { return c.key.Fingerprint() }

// NodeID returns this node's id.
func (c *Client) NodeID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id.NodeID
}

// Run connects and serves until ctx ends (returning nil) or the gateway
// refuses the node for good (ErrRejected, ErrRevoked, ErrJoinKey).
func (c *Client) Run(ctx context.Context) error {
	backoff := MinBackoff
	for {
		served, err := c.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrRejected) || errors.Is(err, ErrRevoked) || errors.Is(err, ErrJoinKey) || errors.Is(err, ErrRefused) || errors.Is(err, errPin) {
			return err
		}
		if served {
			backoff = MinBackoff
		}
		d := backoff/2 + rand.N(backoff/2+1)
		c.log.Info("gateway connection lost; reconnecting", "err", err, "in", d.Round(time.Millisecond))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(backoff*2, MaxBackoff)
	}
}

// session runs one connection. served reports whether the connection got
// past the handshake (which resets the backoff).
func (c *Client) session(ctx context.Context) (served bool, err error) {
	c.mu.Lock()
	id := *c.id
	c.mu.Unlock()
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ws, err := c.dial(dctx, id)
	if err != nil {
		return false, err
	}
	auth := bridge.Auth{Token: id.Token}
	if id.Token == "" {
		c.mu.Lock()
		auth.JoinKey = c.opts.JoinKey
		c.mu.Unlock()
	}
	cr, channel, err := bridge.Handshake(dctx, ws, bridge.ConnectParams{
		Role:   bridge.RoleNode,
		Auth:   auth,
		Client: bridge.ClientInfo{Name: "exechost-node", Version: c.opts.Version, Platform: runtime.GOOS + "/" + runtime.GOARCH},
		Node:   &bridge.NodeInfo{NodeID: id.NodeID, DisplayName: id.DisplayName, Commands: bridge.NodeCommands},
	}, bridge.ClientAuth{Device: c.key, GatewayKey: id.Gateway.PublicKey})
	if err != nil {
		ws.CloseNow()
		if errors.Is(err, bridge.ErrGatewayKey) {
			// Not the gateway this node paired with: obey nothing, and
			// keep trying (the real one may be back on the address).
			c.log.Error("refusing the server at the gateway address: it is not this node's gateway", "url", id.Gateway.URL, "err", err)
			return false, err
		}
		var e *bridge.Error
		if !errors.As(err, &e) {
			return false, fmt.Errorf("connect: %w", err)
		}
		if e.Code == bridge.CodeUnauthorized {
			if auth.Token != "" {
				return false, fmt.Errorf("%w: %s", ErrRevoked, e.Message)
			}
			if auth.JoinKey != "" {
				return false, fmt.Errorf("%w: %s", ErrJoinKey, e.Message)
			}
		}
		if e.Code == bridge.CodeInvalidRequest {
			return false, fmt.Errorf("%w: %s", ErrRefused, e.Message)
		}
		return false, fmt.Errorf("connect: %s", e.Message)
	}
	if id.Gateway.PublicKey == "" || cr.Token != "" {
		// One write: the gateway's key pinned on first contact (from
		// now on only it is accepted at this URL) and a join key's token.
		if err := c.savePairing(cr.GatewayKey, cr.Token); err != nil {
			ws.CloseNow()
			return false, err
		}
		if id.Gateway.PublicKey == "" {
			c.log.Info("pinned the gateway's key", "url", id.Gateway.URL, "fingerprint", bridge.KeyFingerprint(cr.GatewayKey))
		}
		if cr.Token != "" {
			c.log.Info("paired with a join key", "node", id.NodeID)
		}
	}

	var (
		ready    = make(chan struct{})
		conn     *bridge.Conn
		rejected bool
		rmu      sync.Mutex
	)
	conn = bridge.NewConn(ws, bridge.Options{
		Channel: channel,
		OnEvent: func(event string, payload json.RawMessage) {
			switch event {
			case bridge.EventInvokeRequest:
				var req bridge.InvokeRequest
				if err := bridge.Unmarshal(payload, &req); err != nil {
					c.log.Warn("bad invoke request", "err", err)
					return
				}
				go func() { <-ready; c.handleInvoke(ctx, req) }()
			case bridge.EventInvokeCancel:
				var ic bridge.InvokeCancel
				if bridge.Unmarshal(payload, &ic) == nil {
					c.log.Info("invoke cancelled by the gateway", "invoke", ic.ID, "reason", ic.Reason)
					c.cancels.cancel(ic.ID, ic.Reason)
				}
			case bridge.EventPairApproved:
				var pa bridge.PairApproved
				if err := bridge.Unmarshal(payload, &pa); err != nil || pa.Token == "" {
					c.log.Warn("bad pairing approval", "err", err)
					return
				}
				if err := c.saveToken(pa.Token); err != nil {
					c.log.Error("save token", "err", err)
					return
				}
				c.log.Info("pairing approved", "node", id.NodeID)
				if c.opts.OnPaired != nil {
					go c.opts.OnPaired(id.NodeID)
				}
			case bridge.EventPairRejected:
				rmu.Lock()
				rejected = true
				rmu.Unlock()
			}
		},
	})
	c.mu.Lock()
	c.conn = conn
	c.mu.Unlock()
	close(ready)
	defer func() {
		c.mu.Lock()
		if c.conn == conn {
			c.conn = nil
		}
		c.mu.Unlock()
	}()
	if cr.Status == bridge.StatusPending {
		c.log.Info("waiting for the operator to approve this node", "node", id.NodeID, "fingerprint", c.key.Fingerprint(),
			"run", "exechost nodes approve "+id.NodeID)
		if c.opts.OnPending != nil {
			go c.opts.OnPending(id.NodeID)
		}
	} else {
		c.log.Info("connected to gateway", "node", id.NodeID, "url", id.Gateway.URL)
		if c.opts.OnPaired != nil {
			go c.opts.OnPaired(id.NodeID)
		}
	}
	select {
	case <-ctx.Done():
		conn.Close("node shutting down")
		return true, nil
	case <-conn.Done():
	}
	rmu.Lock()
	defer rmu.Unlock()
	if rejected {
		return true, ErrRejected
	}
	return true, conn.Err()
}

// savePairing pins the gateway's key (if none is pinned) and stores a
// new token (if any) in one write of node.json.
func (c *Client) savePairing(gatewayKey, tok string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.id.Gateway.PublicKey == "" {
		c.id.Gateway.PublicKey = gatewayKey
	}
	if tok != "" {
		c.id.Token = tok
		c.opts.JoinKey = ""
	}
	return c.id.Save(c.opts.StateDir)
}

func (c *Client) saveToken(tok string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.id.Token = tok
	c.opts.JoinKey = ""
	return c.id.Save(c.opts.StateDir)
}

// HostEvent forwards a lifecycle event of the local engine to the gateway
// as a node.event event frame. Wire it to the node's host.Engine OnEvent.
// Frames on one connection arrive in order and the gateway handles events
// on its read loop, so a run's events are queued before its result is
// processed — without a round trip per event.
func (c *Client) HostEvent(ev bridge.ExecEvent) {
	c.mu.Lock()
	conn := c.conn
	nid := c.id.NodeID
	c.mu.Unlock()
	if conn == nil {
		return
	}
	ev.NodeID = nid
	payload, err := bridge.Marshal(ev)
	if err != nil {
		return
	}
	// The connection's own context: Notify's context only decides whether
	// the frame is sent at all (the keepalive bounds the write itself), and
	// a timer here would wake an idle thread on every event.
	if err := conn.Notify(conn.Context(), bridge.MethodNodeEvent, bridge.NodeEvent{Event: ev.Kind, Payload: payload}); err != nil {
		c.log.Debug("node event not delivered", "event", ev.Kind, "err", err)
	}
}

func (c *Client) reply(res bridge.InvokeResult) {
	c.mu.Lock()
	conn := c.conn
	c.mu.Unlock()
	if conn == nil {
		c.log.Warn("invoke result lost: not connected", "id", res.ID)
		return
	}
	ctx, cancel := context.WithTimeout(conn.Context(), 10*time.Second)
	defer cancel()
	if err := conn.Call(ctx, bridge.MethodInvokeResult, res, nil); err != nil {
		c.log.Warn("invoke result not delivered", "id", res.ID, "err", err)
	}
}
