package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/nodekey"
	"github.com/exechost/exechost/internal/textsafe"
)

// ConnectTimeout bounds how long a new connection may take to send its
// connect frame.
const ConnectTimeout = 10 * time.Second

// MaxPending bounds unpaired nodes waiting for approval: they have no
// credentials, so without a bound anyone reaching the port could hold
// unlimited connections.
const MaxPending = 64

// MaxPendingPerAddr bounds unpaired nodes waiting from one source
// (sourceKey: an address, all of loopback, an IPv6 /64), so one client (or
// one browser page) cannot fill every pending slot and lock real nodes
// out of interactive pairing.
const MaxPendingPerAddr = 4

// nodeIDPattern is what a node id may look like: it ends up in logs, events
// and file names, so it is kept to a safe alphabet.
var nodeIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`) })

// nodeConn is one connected node (paired or pending).
type nodeConn struct {
	id       string
	conn     *bridge.Conn
	info     bridge.NodeInfo
	client   bridge.ClientInfo
	remoteIP string
	since    time.Time
	// pub is the node's raw Ed25519 public key, proven on connect.
	pub []byte
	// ready is closed once the connect result is on the wire (or could
	// not be written). The node is registered before it is answered, so
	// that an exec sent the moment the node knows it is connected finds
	// it; nothing is sent to it before its answer (notify waits).
	ready chan struct{}
}

// notify sends event to the node once its connect result was written.
func (nc *nodeConn) notify(ctx context.Context, event string, payload any) error {
	select {
	case <-nc.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nc.conn.Notify(ctx, event, payload)
}

// ServeHTTP upgrades a request to a WebSocket and runs the connect
// handshake: the gateway first sends a connect.challenge event with a
// fresh nonce (which a node signs), then reads the connect request.
// Requests failing checkBrowser's Host/Origin policy are refused before
// the upgrade.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := checkBrowser(r, g.Config().Gateway); err != nil {
		g.log.Warn("refused websocket upgrade", "remote", r.RemoteAddr, "host", cleanText(r.Host, 128), "origin", cleanText(r.Header.Get("Origin"), 128), "err", err)
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	remoteIP, _, _ := net.SplitHostPort(r.RemoteAddr)
	release, err := g.handshakes.enter(g.handshakeSource(r)) // source.go
	if err != nil {
		g.log.Debug("refused websocket upgrade: handshake limit", "remote", r.RemoteAddr, "err", err)
		g.auditUnauth(r.Context(), audit.Record{
			Event: audit.EventDenied, Reason: bridge.AsError(err).Message, DecidedBy: "gateway",
			GatewayFields: audit.GatewayFields{Action: audit.ActionClientConnect, ReasonCode: audit.ReasonBusy, Actor: "peer from " + remoteIP, RemoteIP: remoteIP},
		})
		refuseBusy(w, bridge.AsError(err))
		return
	}
	defer release()
	// The Origin was checked above, by a stricter rule than the
	// library's (which accepts any Origin equal to Host).
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		g.log.Info("refused websocket upgrade", "remote", r.RemoteAddr, "origin", r.Header.Get("Origin"), "err", err)
		return
	}
	// The connect request is read with a small limit (MaxConnectFrame);
	// bridge.NewConn raises it to bridge.MaxFrame once the peer is
	// accepted.
	ctx, cancel := context.WithTimeout(r.Context(), ConnectTimeout)
	defer cancel()
	nonce := bridge.NewNonce()
	ck, err := bridge.NewChannelKey()
	if err != nil {
		g.log.Error("refused websocket upgrade: no channel key", "err", err)
		ws.CloseNow()
		return
	}
	chf, err := bridge.NewEvent(bridge.EventConnectChallenge, bridge.ConnectChallenge{Nonce: nonce, Ts: time.Now().UnixMilli(), GatewayKey: g.keyStr, ChannelKey: ck.Public}, 0)
	if err == nil {
		err = bridge.WriteFrame(ctx, ws, chf)
	}
	if err != nil {
		ws.CloseNow()
		return
	}
	f, err := bridge.ReadFrameLimit(ctx, ws, MaxConnectFrame)
	if err != nil {
		refuse(ws, "", bridge.Errorf(bridge.CodeInvalidRequest, "expected a connect request (at most %d bytes): %v", MaxConnectFrame, err))
		return
	}
	if f.Type != bridge.TypeReq || f.Method != bridge.MethodConnect {
		refuse(ws, f.ID, bridge.Errorf(bridge.CodeInvalidRequest, "the first frame must be a connect request, got %s %s", f.Type, f.Method+f.Event))
		return
	}
	var p bridge.ConnectParams
	if err := bridge.Unmarshal(f.Params, &p); err != nil {
		refuse(ws, f.ID, bridge.Errorf(bridge.CodeInvalidRequest, "bad connect params: %v", err))
		return
	}
	if len(p.ClientNonce) < 32 || len(p.ClientNonce) > 128 {
		refuse(ws, f.ID, bridge.Errorf(bridge.CodeInvalidRequest, "connect.params.clientNonce is missing or malformed").WithHint("upgrade the client: this gateway proves its identity and never reads a secret off the wire"))
		return
	}
	hs, err := g.bindChannel(p, nonce, ck)
	if err != nil {
		g.log.Warn("refused connect: channel", "remote", r.RemoteAddr, "role", cleanText(p.Role, 16), "err", err)
		refuse(ws, f.ID, bridge.AsError(err))
		return
	}
	switch p.Role {
	case bridge.RoleAgent, bridge.RoleOperator:
		who, err := g.authClient(p, hs)
		if err != nil {
			g.log.Warn("refused client", "remote", r.RemoteAddr, "role", p.Role, "kind", p.Auth.Kind, "ref", cleanText(p.Auth.Ref, 64), "err", err)
			refuse(ws, f.ID, g.clientRefused(ctx, p, r.RemoteAddr, bridge.AsError(err)))
			return
		}
		g.acceptClient(ctx, ws, f.ID, p, hs, who)
	case bridge.RoleNode:
		g.acceptNode(ctx, ws, f.ID, p, remoteIP, hs)
	default:
		refuse(ws, f.ID, bridge.Errorf(bridge.CodeInvalidRequest, "unknown role %q (accepted: agent, operator, node)", p.Role))
	}
}

// handshake is what one connection's handshake established: the
// challenge nonce, the channel binding every proof and the gateway's
// signature cover (bridge.Transcript.Binding), and the channel every later
// frame travels on (nil only with Options.unboundChannel).
type handshake struct {
	nonce   string
	binding string
	channel *bridge.Channel
}

// bindChannel derives the connection's channel from the client's channel
// key. A client without one is older than the channel: it is refused (its
// proof would be good on any connection that relays it).
func (g *Gateway) bindChannel(p bridge.ConnectParams, nonce string, ck *bridge.ChannelKey) (handshake, error) {
	hs := handshake{nonce: nonce}
	if p.ChannelKey == "" {
		if g.opts.unboundChannel {
			return hs, nil
		}
		return hs, bridge.Errorf(bridge.CodeInvalidRequest, "connect.params.channelKey is missing: this gateway accepts only connections whose credential proof is bound to the channel").
			WithHint("the client is older than the gateway; upgrade it (exechost on the client's machine, or the node)")
	}
	t := bridge.Transcript{GatewayKey: g.keyStr, Nonce: nonce, ClientNonce: p.ClientNonce, GatewayChannelKey: ck.Public, ClientChannelKey: p.ChannelKey}
	ch, err := ck.Channel(t, true)
	if err != nil {
		return hs, bridge.Errorf(bridge.CodeInvalidRequest, "connect.params.channelKey: %v", err)
	}
	hs.binding, hs.channel = t.Binding(), ch
	return hs, nil
}

// authClient checks an agent's or operator's proof: an issued credential
// (which fixes the agent id and the highest role), or the gateway token
// of gateway.json (an operator's, acting for any agent). The token itself
// never travels: the client sends a MAC over this connection's payload.
func (g *Gateway) authClient(p bridge.ConnectParams, hs handshake) (caller, error) {
	who := caller{role: p.Role, name: cleanText(p.Client.Name, 64)}
	switch p.Auth.Kind {
	case bridge.AuthCredential:
		rec, err := g.verifyCredential(p, hs)
		if err != nil {
			return who, err
		}
		who.name, who.credential = rec.Name, rec.ID
		if rec.Role == bridge.RoleAgent {
			who.agent = rec.Agent
		}
		return who, nil
	case bridge.AuthToken:
		payload := bridge.ClientAuthPayload(g.keyStr, hs.nonce, p.ClientNonce, hs.binding, p.Role, p.Auth.Kind, p.Auth.Ref)
		if p.Auth.Ref == "" && bridge.VerifySecretProof(hashSecret(g.token), payload, p.Auth.Proof) {
			return who, nil
		}
	}
	return who, bridge.Errorf(bridge.CodeUnauthorized, "invalid or missing gateway token or credential").WithHint("local CLIs prove the token in the gateway's <state>/gateway.json, so pass the gateway's --state-dir; others need a credential file from `exechost credentials issue`, passed with --credential")
}

// answerRefusal sends the connect request id its error response.
func answerRefusal(ws *websocket.Conn, id string, e *bridge.Error) {
	if id == "" {
		id = "connect"
	}
	ctx, cancel := context.WithTimeout(context.Background(), bridge.WriteTimeout)
	defer cancel()
	_ = bridge.WriteFrame(ctx, ws, bridge.NewFailure(id, e))
}

// refuse sends an error response and closes the socket.
func refuse(ws *websocket.Conn, id string, e *bridge.Error) {
	answerRefusal(ws, id, e)
	msg := e.Message
	if len(msg) > 120 {
		msg = msg[:120]
	}
	go func() { _ = ws.Close(websocket.StatusPolicyViolation, msg) }()
}

// accepted sends the connect result, signed with the gateway's key over
// the connection's nonces and channel keys so the client knows which
// gateway it reached, and that the channel is the gateway's. It is the
// channel's first sealed frame.
func (g *Gateway) accepted(ctx context.Context, ws *websocket.Conn, id string, hs handshake, p bridge.ConnectParams, res bridge.ConnectResult) error {
	res.Protocol = bridge.ProtocolVersion
	res.GatewaySignature = g.key.Sign([]byte(bridge.GatewayAuthPayload(g.keyStr, hs.nonce, p.ClientNonce, hs.binding, p.Role, res.Status)))
	f, err := bridge.NewResult(id, res)
	if err != nil {
		return err
	}
	if hs.channel != nil {
		// Sealed: it may carry a node's new token.
		return hs.channel.WriteFrame(ctx, ws, f)
	}
	return bridge.WriteFrame(ctx, ws, f)
}

func (g *Gateway) acceptClient(ctx context.Context, ws *websocket.Conn, id string, p bridge.ConnectParams, hs handshake, who caller) {
	leave, err := g.callers.connect(who) // callers.go
	if err != nil {
		g.log.Warn("refused client: connection limit", "caller", who.key(), "err", err)
		refuse(ws, id, bridge.AsError(err))
		return
	}
	if err := g.accepted(ctx, ws, id, hs, p, bridge.ConnectResult{Role: p.Role, Agent: who.agent}); err != nil {
		leave()
		ws.CloseNow()
		return
	}
	role := p.Role
	// OnClose may run before NewConn returns (a peer that hangs up at
	// once), so the conn reaches it through an atomic holder, and a conn
	// already closed is never registered.
	var self atomic.Pointer[bridge.Conn]
	c := bridge.NewConn(ws, bridge.Options{
		Channel: hs.channel,
		OnRequest: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
			return g.dispatch(ctx, who, method, params)
		},
		OnClose: func(error) {
			leave()
			if c := self.Load(); c != nil {
				g.mu.Lock()
				delete(g.clients, c)
				g.mu.Unlock()
				g.prompts.removeOperator(c)
			}
		},
	})
	self.Store(c)
	ws.SetReadLimit(who.readLimit()) // NewConn set bridge.MaxFrame; callers.go
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		c.Close("gateway shutting down")
		return
	}
	if c.Err() == nil {
		g.clients[c] = who
	}
	g.mu.Unlock()
	if role == bridge.RoleOperator && c.Err() == nil {
		g.prompts.addOperator(c, who.name)
		if c.Err() != nil { // closed meanwhile: OnClose may have run first
			g.prompts.removeOperator(c)
		}
	}
}

func (g *Gateway) acceptNode(ctx context.Context, ws *websocket.Conn, id string, p bridge.ConnectParams, remoteIP string, hs handshake) {
	if p.Node == nil || !nodeIDPattern().MatchString(p.Node.NodeID) {
		refuse(ws, id, bridge.Errorf(bridge.CodeInvalidRequest, "a node must send node.nodeId (letters, digits, '.', '_' or '-', at most 128)"))
		return
	}
	nid := p.Node.NodeID
	pub, err := g.verifyDevice(p, hs)
	if err != nil {
		g.log.Warn("refused node: key proof", "node", nid, "remote", remoteIP, "err", err)
		refuse(ws, id, bridge.AsError(err))
		return
	}
	pubStr := nodekey.EncodePublicKey(pub)
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
	if err := g.nameConflict(nid, p.Node.DisplayName); err != nil {
		g.log.Warn("refused node: display name", "node", nid, "displayName", p.Node.DisplayName, "remote", remoteIP, "err", err)
		refuse(ws, id, bridge.AsError(err))
		return
	}
	now := time.Now()
	nc := &nodeConn{id: nid, info: *p.Node, client: p.Client, remoteIP: remoteIP, since: now, pub: pub, ready: make(chan struct{})}
	res := bridge.ConnectResult{Role: bridge.RoleNode, NodeID: nid, Status: bridge.StatusPaired}
	payload := bridge.DeviceAuthPayload(p.Device.ID, nid, p.Role, p.Device.SignedAt, g.keyStr, hs.nonce, p.ClientNonce, hs.binding, p.Auth.Kind, p.Auth.Ref)
	switch p.Auth.Kind {
	case bridge.AuthToken:
		rec := g.reg.get(nid)
		if rec == nil || !bridge.VerifySecretProof(rec.TokenHash, payload, p.Auth.Proof) {
			g.log.Warn("refused node: token rejected", "node", nid, "remote", remoteIP)
			refuse(ws, id, g.nodeRefused(ctx, audit.ActionNodeConnect, audit.ReasonBadToken, nid, remoteIP, bridge.Errorf(bridge.CodeUnauthorized, "node token rejected for %s: the node was removed or re-paired", nid).WithHint("remove \"token\" from node.json and pair again")))
			return
		}
		// The token is bound to the key it was paired with; a record
		// from before keys existed binds the first key shown with a
		// valid token, once.
		bound, err := g.reg.bindKey(nid, rec.TokenHash, pubStr)
		if err != nil {
			g.log.Warn("refused node: key does not match its pairing", "node", nid, "remote", remoteIP, "fingerprint", nodekey.Fingerprint(pub), "err", err)
			refuse(ws, id, bridge.AsError(err))
			return
		}
		if bound {
			g.log.Warn("node bound its key on first connect (migrated from a key-less pairing); the key is now required", "node", nid, "fingerprint", nodekey.Fingerprint(pub), "remote", remoteIP)
		}
	case bridge.AuthJoinKey:
		if err := newNodeID(nid, pub); err != nil {
			refuse(ws, id, bridge.AsError(err))
			return
		}
		if err := g.pendingConflict(nid, pub); err != nil {
			g.log.Warn("refused node: join key for an id pending under another key", "node", nid, "remote", remoteIP)
			refuse(ws, id, bridge.AsError(err))
			return
		}
		tok := newSecret("ehn_")
		rec := g.newRecord(nc, tok)
		if err := g.reg.consumeJoinKey(p.Auth.Ref, payload, p.Auth.Proof, rec); err != nil {
			g.log.Warn("refused node: join key", "node", nid, "remote", remoteIP, "err", err)
			refuse(ws, id, g.nodeRefused(ctx, audit.ActionJoinKeyUse, audit.ReasonBadJoinKey, nid, remoteIP, bridge.AsError(err)))
			return
		}
		res.Token = tok
		g.auditNode(ctx, audit.ActionJoinKeyUse, audit.ReasonJoinKey, nc, "node paired itself with a one-time join key")
		g.log.Info("node paired with a join key", "node", nid, "displayName", p.Node.DisplayName, "remote", remoteIP)
	case "":
		if err := newNodeID(nid, pub); err != nil {
			refuse(ws, id, bridge.AsError(err))
			return
		}
		if rec := g.reg.get(nid); rec != nil && rec.PublicKey != pubStr {
			g.log.Warn("refused node: pairing request for an id paired under another key", "node", nid, "remote", remoteIP)
			refuse(ws, id, bridge.AsError(errPairedOtherKey(nid)))
			return
		}
		if err := g.pendingRoom(nid, pub, remoteIP); err != nil {
			g.log.Warn("refused node: pending", "node", nid, "remote", remoteIP, "err", err)
			refuse(ws, id, bridge.AsError(err))
			return
		}
		res.Status = bridge.StatusPending
	default:
		refuse(ws, id, bridge.Errorf(bridge.CodeUnauthorized, "a node proves a token, a join key or nothing (pairing), not %q", cleanText(p.Auth.Kind, 32)))
		return
	}
	// The node sends nothing before its answer, and nothing is sent to it
	// before that (nodeConn.notify), so the connection is read and the
	// node registered first: once the node reads its answer, an exec
	// routed to it finds it connected.
	nc.conn = bridge.NewConn(ws, bridge.Options{
		Channel: hs.channel,
		OnRequest: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
			return g.handleNode(ctx, nc, method, params)
		},
		// Both carry a command's output, and both handlers decode their
		// params with bridge.Unmarshal before using anything in them.
		CheckedByHandler: func(name string) bool {
			return name == bridge.MethodInvokeResult || name == bridge.MethodNodeEvent
		},
		// A result is decoded, handed to the exec waiting for it (a send
		// that never blocks, invokeResult) and acknowledged: nothing in it
		// waits, and the node's read loop never writes, so the answer
		// written from this read loop cannot wait on this one.
		Inline: func(method string) bool { return method == bridge.MethodInvokeResult },
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
	defer close(nc.ready)
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
		// pendingRoom checked before accepting; this repeats it under
		// the same lock as the insert, so concurrent connections can
		// neither exceed the limits nor displace another key's entry.
		if err := g.pendingRoomLocked(nid, nc.pub, remoteIP); err != nil {
			g.mu.Unlock()
			// Answered as every other refusal is, then closed.
			e := bridge.AsError(err)
			answerRefusal(ws, id, e)
			nc.conn.Close(e.Message)
			return
		}
		g.pending[nid] = nc
	} else {
		old = g.live[nid]
		g.live[nid] = nc
		g.liveChangedLocked()
	}
	g.mu.Unlock()
	if err := g.accepted(ctx, ws, id, hs, p, res); err != nil {
		nc.conn.Close("connect result not delivered")
		return
	}
	if old != nil {
		old.conn.Close("replaced by a newer connection of the same node")
	}
	if res.Status == bridge.StatusPending {
		g.log.Info("node waiting for approval", "node", nid, "displayName", p.Node.DisplayName, "remote", remoteIP,
			"fingerprint", nodekey.Fingerprint(pub), "hint", "exechost nodes approve "+nid)
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
		NodeID: nc.id, DisplayName: nc.info.DisplayName, TokenHash: hashSecret(token), PublicKey: nodekey.EncodePublicKey(nc.pub),
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
// max runes: textsafe's one definition of what a human must not be shown.
func cleanText(s string, max int) string { return textsafe.Strip(s, max) }

// verifyDevice checks a node's proof of key possession: the device id is
// the hash of the public key, and the signature covers this connection's
// nonces, the gateway's key, the claimed node id, role and credential
// reference. It returns the raw public key.
func (g *Gateway) verifyDevice(p bridge.ConnectParams, hs handshake) ([]byte, error) {
	d := p.Device
	if d == nil {
		return nil, bridge.Errorf(bridge.CodeUnauthorized, "a node must prove its key: connect.params.device is missing").WithHint("upgrade exechost on the node; it creates its key on start")
	}
	pub, err := nodekey.ParsePublicKey(d.PublicKey)
	if err != nil {
		return nil, bridge.Errorf(bridge.CodeUnauthorized, "device key: %v", err)
	}
	if d.ID != nodekey.DeviceID(pub) {
		return nil, bridge.Errorf(bridge.CodeUnauthorized, "device id is not the sha256 of its public key")
	}
	if d.Nonce != hs.nonce {
		return nil, bridge.Errorf(bridge.CodeUnauthorized, "device signature is not for this connection's challenge")
	}
	msg := bridge.DeviceAuthPayload(d.ID, p.Node.NodeID, p.Role, d.SignedAt, g.keyStr, hs.nonce, p.ClientNonce, hs.binding, p.Auth.Kind, p.Auth.Ref)
	if !nodekey.Verify(pub, []byte(msg), d.Signature) {
		return nil, bridge.Errorf(bridge.CodeUnauthorized, "device signature does not verify")
	}
	return pub, nil
}

// newNodeID requires a node pairing for the first time to use its device
// id as node id, so an unpaired connection cannot even name another
// node's id (only a pairing from before keys may keep an older id, and it
// authenticates with its token).
func newNodeID(nid string, pub []byte) error {
	if nid != nodekey.DeviceID(pub) {
		return bridge.Errorf(bridge.CodeUnauthorized, "a new node's id must be its device id %s", nodekey.DeviceID(pub)).WithHint("remove nodeId from node.json; the node derives it from its key")
	}
	return nil
}

func errPairedOtherKey(nid string) error {
	return bridge.Errorf(bridge.CodeUnauthorized, "node id %s is already paired with another key", nid).WithHint(fmt.Sprintf("to replace that node, `exechost nodes remove %s` first", nid))
}

// pendingConflict refuses an id pending under another key.
func (g *Gateway) pendingConflict(nid string, pub []byte) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if old := g.pending[nid]; old != nil && !bytes.Equal(old.pub, pub) {
		return bridge.Errorf(bridge.CodeUnauthorized, "node id %s is already pending under another key", nid)
	}
	return nil
}

// pendingRoom decides whether a new pending entry may take a slot: not
// an id pending under another key, at most MaxPendingPerAddr from one
// source and MaxPending in all. The same node reconnecting (same id and
// key) reuses its slot.
func (g *Gateway) pendingRoom(nid string, pub []byte, remoteIP string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pendingRoomLocked(nid, pub, remoteIP)
}

// pendingRoomLocked is pendingRoom with g.mu held.
func (g *Gateway) pendingRoomLocked(nid string, pub []byte, remoteIP string) error {
	old := g.pending[nid]
	if old != nil && !bytes.Equal(old.pub, pub) {
		return bridge.Errorf(bridge.CodeUnauthorized, "node id %s is already pending under another key", nid)
	}
	if old != nil {
		return nil
	}
	src, fromAddr := sourceKey(remoteIP), 0
	for _, nc := range g.pending {
		if sourceKey(nc.remoteIP) == src {
			fromAddr++
		}
	}
	if fromAddr >= MaxPendingPerAddr {
		return bridge.Errorf(bridge.CodeBusy, "too many nodes from %s are waiting for approval (limit %d per source); approve or reject them first", src, MaxPendingPerAddr)
	}
	if len(g.pending) >= MaxPending {
		return bridge.Errorf(bridge.CodeBusy, "too many nodes are waiting for approval (limit %d); try again later", MaxPending)
	}
	return nil
}
