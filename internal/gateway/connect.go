package gateway

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
)

// ConnectTimeout bounds how long a new connection may take to send its
// connect frame.
const ConnectTimeout = 10 * time.Second

// MaxPending bounds unpaired nodes waiting for approval: they have no
// credentials, so without a bound anyone reaching the port could hold
// unlimited connections.
const MaxPending = 64

// nodeIDPattern is what a node id may look like: it ends up in logs, events
// and file names, so it is kept to a safe alphabet.
var nodeIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// nodeConn is one connected node (paired or pending).
type nodeConn struct {
	id       string
	conn     *bridge.Conn
	info     bridge.NodeInfo
	client   bridge.ClientInfo
	remoteIP string
	since    time.Time
}

// ServeHTTP upgrades a request to a WebSocket and runs the connect
// handshake. Browser origins other than the gateway's own and
// gateway.allowedOrigins are refused by the upgrade itself.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: g.Config().Gateway.AllowedOrigins})
	if err != nil {
		g.log.Info("refused websocket upgrade", "remote", r.RemoteAddr, "origin", r.Header.Get("Origin"), "err", err)
		return
	}
	ws.SetReadLimit(bridge.MaxFrame)
	remoteIP, _, _ := net.SplitHostPort(r.RemoteAddr)
	ctx, cancel := context.WithTimeout(r.Context(), ConnectTimeout)
	defer cancel()
	f, err := bridge.ReadFrame(ctx, ws)
	if err != nil {
		refuse(ws, "", bridge.Errorf(bridge.CodeInvalidRequest, "expected a connect request: %v", err))
		return
	}
	if f.Type != bridge.TypeReq || f.Method != bridge.MethodConnect {
		refuse(ws, f.ID, bridge.Errorf(bridge.CodeInvalidRequest, "the first frame must be a connect request, got %s %s", f.Type, f.Method+f.Event))
		return
	}
	var p bridge.ConnectParams
	if err := json.Unmarshal(f.Params, &p); err != nil {
		refuse(ws, f.ID, bridge.Errorf(bridge.CodeInvalidRequest, "bad connect params: %v", err))
		return
	}
	switch p.Role {
	case bridge.RoleAgent, bridge.RoleOperator:
		if subtle.ConstantTimeCompare([]byte(p.Auth.Token), []byte(g.token)) != 1 {
			g.log.Warn("refused client: bad gateway token", "remote", r.RemoteAddr, "role", p.Role)
			refuse(ws, f.ID, g.clientRefused(ctx, p, r.RemoteAddr, bridge.Errorf(bridge.CodeUnauthorized, "invalid or missing gateway token (hint: local CLIs read it from the gateway's <state>/gateway.json; pass the gateway's --state-dir)")))
			return
		}
		g.acceptClient(ctx, ws, f.ID, p)
	case bridge.RoleNode:
		g.acceptNode(ctx, ws, f.ID, p, remoteIP)
	default:
		refuse(ws, f.ID, bridge.Errorf(bridge.CodeInvalidRequest, "unknown role %q (accepted: agent, operator, node)", p.Role))
	}
}

// refuse sends an error response and closes the socket.
func refuse(ws *websocket.Conn, id string, e *bridge.Error) {
	if id == "" {
		id = "connect"
	}
	ctx, cancel := context.WithTimeout(context.Background(), bridge.WriteTimeout)
	defer cancel()
	_ = bridge.WriteFrame(ctx, ws, bridge.NewFailure(id, e))
	msg := e.Message
	if len(msg) > 120 {
		msg = msg[:120]
	}
	go func() { _ = ws.Close(websocket.StatusPolicyViolation, msg) }()
}

func accepted(ctx context.Context, ws *websocket.Conn, id string, res bridge.ConnectResult) error {
	res.Protocol = bridge.ProtocolVersion
	f, err := bridge.NewResult(id, res)
	if err != nil {
		return err
	}
	return bridge.WriteFrame(ctx, ws, f)
}

func (g *Gateway) acceptClient(ctx context.Context, ws *websocket.Conn, id string, p bridge.ConnectParams) {
	if err := accepted(ctx, ws, id, bridge.ConnectResult{Role: p.Role}); err != nil {
		ws.CloseNow()
		return
	}
	role := p.Role
	who := caller{role: role, name: cleanText(p.Client.Name, 64)}
	// OnClose may run before NewConn returns (a peer that hangs up at
	// once), so the conn reaches it through an atomic holder, and a conn
	// already closed is never registered.
	var self atomic.Pointer[bridge.Conn]
	c := bridge.NewConn(ws, bridge.Options{
		OnRequest: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
			return g.dispatchClient(ctx, who, method, params)
		},
		OnClose: func(error) {
			if c := self.Load(); c != nil {
				g.mu.Lock()
				delete(g.clients, c)
				g.mu.Unlock()
				g.appr.removeOperator(c)
			}
		},
	})
	self.Store(c)
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		c.Close("gateway shutting down")
		return
	}
	if c.Err() == nil {
		g.clients[c] = true
	}
	g.mu.Unlock()
	if role == bridge.RoleOperator && c.Err() == nil {
		g.appr.addOperator(c, who.name)
		if c.Err() != nil { // closed meanwhile: OnClose may have run first
			g.appr.removeOperator(c)
		}
	}
}

func (g *Gateway) acceptNode(ctx context.Context, ws *websocket.Conn, id string, p bridge.ConnectParams, remoteIP string) {
	if p.Node == nil || !nodeIDPattern.MatchString(p.Node.NodeID) {
		refuse(ws, id, bridge.Errorf(bridge.CodeInvalidRequest, "a node must send node.nodeId (letters, digits, '.', '_' or '-', at most 128)"))
		return
	}
	nid := p.Node.NodeID
	// Everything else the node says about itself ends up in operators'
	// terminals and logs: no control or bidi characters, bounded length.
	p.Node.DisplayName = cleanText(p.Node.DisplayName, 64)
	p.Client.Name, p.Client.Version, p.Client.Platform = cleanText(p.Client.Name, 64), cleanText(p.Client.Version, 64), cleanText(p.Client.Platform, 64)
	if len(p.Node.Commands) > 32 {
		p.Node.Commands = p.Node.Commands[:32]
	}
	for i, c := range p.Node.Commands {
		p.Node.Commands[i] = cleanText(c, 64)
	}
	now := time.Now()
	nc := &nodeConn{id: nid, info: *p.Node, client: p.Client, remoteIP: remoteIP, since: now}
	res := bridge.ConnectResult{Role: bridge.RoleNode, NodeID: nid, Status: bridge.StatusPaired}
	switch {
	case p.Auth.Token != "":
		rec := g.reg.get(nid)
		if rec == nil || !equalSecret(p.Auth.Token, rec.TokenHash) {
			g.log.Warn("refused node: token rejected", "node", nid, "remote", remoteIP)
			refuse(ws, id, g.nodeRefused(ctx, audit.ActionNodeConnect, audit.ReasonBadToken, nid, remoteIP, bridge.Errorf(bridge.CodeUnauthorized, "node token rejected for %s: the node was removed or re-paired (hint: remove \"token\" from node.json and pair again)", nid)))
			return
		}
	case p.Auth.JoinKey != "":
		tok := newSecret("ehn_")
		rec := g.newRecord(nc, tok)
		if err := g.reg.consumeJoinKey(p.Auth.JoinKey, rec); err != nil {
			g.log.Warn("refused node: join key", "node", nid, "remote", remoteIP, "err", err)
			refuse(ws, id, g.nodeRefused(ctx, audit.ActionJoinKeyUse, audit.ReasonBadJoinKey, nid, remoteIP, bridge.AsError(err)))
			return
		}
		res.Token = tok
		g.auditNode(ctx, audit.ActionJoinKeyUse, audit.ReasonJoinKey, nc, "node paired itself with a one-time join key")
		g.log.Info("node paired with a join key", "node", nid, "displayName", p.Node.DisplayName, "remote", remoteIP)
	default:
		g.mu.Lock()
		_, again := g.pending[nid]
		full := len(g.pending) >= MaxPending && !again
		g.mu.Unlock()
		if full {
			g.log.Warn("refused node: too many pending", "node", nid, "remote", remoteIP)
			refuse(ws, id, bridge.Errorf(bridge.CodeBusy, "too many nodes are waiting for approval (limit %d); try again later", MaxPending))
			return
		}
		res.Status = bridge.StatusPending
	}
	if err := accepted(ctx, ws, id, res); err != nil {
		ws.CloseNow()
		return
	}
	nc.conn = bridge.NewConn(ws, bridge.Options{
		OnRequest: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
			return g.handleNode(ctx, nc, method, params)
		},
		// node.event as an event frame: handled on the read loop, so a
		// run's events are queued before its result (a request, read
		// after them) is processed, without a round trip per event.
		OnEvent: func(event string, payload json.RawMessage) {
			if event != bridge.MethodNodeEvent {
				return
			}
			if err := g.nodeEvent(nc, payload); err != nil {
				g.log.Debug("node event refused", "node", nc.id, "err", err)
			}
		},
		OnClose: func(err error) { g.nodeGone(nc, err) },
	})
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		nc.conn.Close("gateway shutting down")
		return
	}
	if nc.conn.Err() != nil {
		// Gone already; nodeGone may have run before registration.
		g.mu.Unlock()
		return
	}
	var old *nodeConn
	if res.Status == bridge.StatusPending {
		old = g.pending[nid]
		g.pending[nid] = nc
	} else {
		old = g.live[nid]
		g.live[nid] = nc
		g.liveChangedLocked()
	}
	g.mu.Unlock()
	if old != nil {
		old.conn.Close("replaced by a newer connection of the same node")
	}
	if res.Status == bridge.StatusPending {
		g.log.Info("node waiting for approval", "node", nid, "displayName", p.Node.DisplayName, "remote", remoteIP,
			"hint", "exechost nodes approve "+nid)
		return
	}
	g.reg.touch(nid, func(r *nodeRecord) {
		r.DisplayName, r.Platform, r.Version = p.Node.DisplayName, p.Client.Platform, p.Client.Version
		r.Commands, r.RemoteIP, r.LastSeen = p.Node.Commands, remoteIP, now.UnixMilli()
	})
	g.log.Info("node connected", "node", nid, "displayName", p.Node.DisplayName, "remote", remoteIP)
}

func (g *Gateway) newRecord(nc *nodeConn, token string) nodeRecord {
	now := time.Now().UnixMilli()
	return nodeRecord{
		NodeID: nc.id, DisplayName: nc.info.DisplayName, TokenHash: hashSecret(token),
		Platform: nc.client.Platform, Version: nc.client.Version, Commands: nc.info.Commands,
		RemoteIP: nc.remoteIP, PairedAt: now, LastSeen: now,
	}
}

// nodeGone forgets a closed node connection (unless a newer one replaced
// it) and fails its in-flight invokes at once.
func (g *Gateway) nodeGone(nc *nodeConn, err error) {
	g.mu.Lock()
	if g.live[nc.id] == nc {
		delete(g.live, nc.id)
		g.liveChangedLocked()
	}
	if g.pending[nc.id] == nc {
		delete(g.pending, nc.id)
	}
	g.mu.Unlock()
	g.reg.touch(nc.id, func(r *nodeRecord) { r.LastSeen = time.Now().UnixMilli() })
	g.log.Info("node disconnected", "node", nc.id, "reason", err)
}

// cleanText drops control and format (bidi override, zero-width)
// characters and invalid UTF-8 from a peer-chosen string and bounds it to
// max runes.
func cleanText(s string, max int) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			continue
		}
		if n == max {
			break
		}
		b.WriteRune(r)
		n++
	}
	return strings.TrimSpace(b.String())
}
