package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/idprefix"
	"github.com/exechost/exechost/internal/nodekey"
	"github.com/exechost/exechost/internal/session"
)

// Join key lifetimes.
const (
	DefaultJoinKeyTTL = time.Hour
	MaxJoinKeyTTL     = 7 * 24 * time.Hour
)

// decode reads a request's params strictly (bridge.UnmarshalRequest):
// exact field names, no duplicate and no unknown member, so that what a
// handler reads is what every check before it read.
func decode[T any](method string, params json.RawMessage) (T, error) {
	var v T
	if len(params) == 0 {
		return v, nil
	}
	if err := bridge.UnmarshalRequest(params, &v); err != nil {
		return v, bridge.Errorf(bridge.CodeInvalidRequest, "bad %s params: %w", method, err).WithHint("field names are case-sensitive and each appears once; docs/gateway.md lists each method's fields")
	}
	return v, nil
}

// sessionEvents drains a session's queued system events.
func (g *Gateway) sessionEvents(p bridge.SessionParams) (bridge.SessionEventsResult, error) {
	if err := checkSession(p.AgentID, p.SessionKey); err != nil {
		return bridge.SessionEventsResult{}, err
	}
	evs := g.sessions.Drain(session.NewKey(p.AgentID, p.SessionKey))
	if evs == nil {
		evs = []bridge.SystemEvent{}
	}
	return bridge.SessionEventsResult{Events: evs}, nil
}

func view(rec nodeRecord, connected bool) bridge.NodeView {
	return bridge.NodeView{
		NodeID: rec.NodeID, DisplayName: rec.DisplayName, RemoteIP: rec.RemoteIP, Platform: rec.Platform,
		Version: rec.Version, Commands: rec.Commands, Connected: connected, LastSeen: rec.LastSeen, Paired: true,
		Fingerprint: fingerprintOf(rec.PublicKey),
	}
}

func (g *Gateway) listPaired() []bridge.NodeView {
	recs := g.reg.all()
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]bridge.NodeView, 0, len(recs))
	for _, r := range recs {
		_, live := g.live[r.NodeID]
		if live {
			r.LastSeen = time.Now().UnixMilli()
		}
		out = append(out, view(r, live))
	}
	return out
}

func (g *Gateway) listPending() []bridge.NodeView {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]bridge.NodeView, 0, len(g.pending))
	for _, nc := range g.pending {
		out = append(out, bridge.NodeView{
			NodeID: nc.id, DisplayName: nc.info.DisplayName, RemoteIP: nc.remoteIP, Platform: nc.client.Platform,
			Version: nc.client.Version, Commands: nc.info.Commands, Connected: true, LastSeen: nc.since.UnixMilli(),
			Fingerprint: nodekey.Fingerprint(nc.pub),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out
}

// MinApprovePrefix is the shortest id prefix that approves a pending
// node: 16 hex digits (64 bits), as long as the key fingerprint. A pending
// node's id is its key's hash, so anyone can grind a key whose id shares a
// short prefix with a real node's; a 64-bit prefix cannot be ground.
const MinApprovePrefix = 16

// findPending resolves an exact id, the key fingerprint (which is the
// id's first 16 hex digits), or a unique id prefix of at least minPrefix
// characters, among pending nodes. Display names and addresses are not
// accepted here: they are chosen by the unauthenticated node, so approving
// by them could pair an impostor.
func (g *Gateway) findPending(id string, minPrefix int) (*nodeConn, error) {
	if strings.Count(id, ":") == nodekey.FingerprintBytes/2-1 {
		id = strings.ReplaceAll(id, ":", "") // a fingerprint
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if nc := g.pending[id]; nc != nil {
		return nc, nil
	}
	short := false
	for pid := range g.pending {
		short = short || (len(id) >= MinPrefix && len(id) < minPrefix && strings.HasPrefix(pid, id))
	}
	if short {
		return nil, bridge.Errorf(bridge.CodeInvalidRequest, "%q is too short to approve a node: use the full id, its key fingerprint, or a prefix of at least %d characters", id, minPrefix).WithHint("`exechost nodes pending` shows both; compare the fingerprint with the one the node prints")
	}
	matches := idprefix.Match(slices.Collect(maps.Keys(g.pending)), id, minPrefix)
	switch len(matches) {
	case 1:
		return g.pending[matches[0]], nil
	case 0:
		return nil, bridge.Errorf(bridge.CodeNotFound, "no pending node %q", id).WithHint("`exechost nodes pending` lists them by id; a pending request ends when the node disconnects")
	}
	return nil, bridge.Errorf(bridge.CodeAmbiguous, "%q matches %d pending nodes: %s", id, len(matches), strings.Join(matches, ", ")).WithHint("use the full node id")
}

func (g *Gateway) approve(ctx context.Context, id string) (bridge.NodeView, error) {
	nc, err := g.findPending(id, MinApprovePrefix)
	if err != nil {
		return bridge.NodeView{}, err
	}
	// The token goes to the key that was pending (a pending entry is
	// never replaced by another key), and never rebinds an id paired
	// under another key.
	if old := g.reg.get(nc.id); old != nil && old.PublicKey != nodekey.EncodePublicKey(nc.pub) {
		return bridge.NodeView{}, errPairedOtherKey(nc.id)
	}
	// A pending name reserves nothing (names.go): a node paired since
	// may have taken it.
	if err := g.nameConflict(nc.id, nc.info.DisplayName); err != nil {
		return bridge.NodeView{}, bridge.Errorf(bridge.CodeInvalidRequest, "cannot approve %s: %s", nc.id, bridge.AsError(err).Message).WithHint("reject it; the node reconnects with another --display-name")
	}
	tok := newSecret("ehn_")
	rec := g.newRecord(nc, tok)
	if err := g.reg.put(rec); err != nil {
		return bridge.NodeView{}, err
	}
	g.auditNode(ctx, audit.ActionNodeApprove, audit.ReasonOperator, nc, "node approved by the operator")
	// Live before the node hears it is paired: it may send its first
	// request (or a caller may exec on it) the moment it knows.
	g.mu.Lock()
	if g.pending[nc.id] == nc {
		delete(g.pending, nc.id)
	}
	old := g.live[nc.id]
	g.live[nc.id] = nc
	g.liveChangedLocked()
	g.mu.Unlock()
	err = nc.notify(ctx, bridge.EventPairApproved, bridge.PairApproved{NodeID: nc.id, Token: tok})
	g.mu.Lock()
	if err != nil || nc.conn.Err() != nil {
		// Gone (nodeGone may have run before it was live): it
		// reconnects with its new token, or pairs again; an older
		// connection of the same id keeps its place.
		if g.live[nc.id] == nc {
			delete(g.live, nc.id)
			if old != nil {
				g.live[nc.id] = old
			}
		}
		old = nil
		g.liveChangedLocked()
	}
	g.mu.Unlock()
	if err != nil {
		_, _ = g.reg.remove(nc.id)
		g.auditNode(ctx, audit.ActionNodeRemove, audit.ReasonNodeGone, nc, fmt.Sprintf("node %s disconnected before it got its token: %v", nc.id, err))
		return bridge.NodeView{}, bridge.Errorf(bridge.CodeUnavailable, "node %s disconnected before it got its token: %v", nc.id, err)
	}
	if old != nil && old != nc {
		old.conn.Close("replaced by a newly paired connection")
	}
	g.log.Info("node approved", "node", nc.id, "displayName", nc.info.DisplayName)
	return view(rec, true), nil
}

func (g *Gateway) reject(ctx context.Context, id string) (bridge.NodeView, error) {
	nc, err := g.findPending(id, MinPrefix)
	if err != nil {
		return bridge.NodeView{}, err
	}
	g.auditNode(ctx, audit.ActionNodeReject, audit.ReasonOperator, nc, "pairing rejected by the operator")
	_ = nc.notify(ctx, bridge.EventPairRejected, bridge.NodeIDParams{NodeID: nc.id})
	nc.conn.Close("pairing rejected by the operator")
	g.log.Info("node rejected", "node", nc.id)
	return bridge.NodeView{NodeID: nc.id, DisplayName: nc.info.DisplayName, RemoteIP: nc.remoteIP, Fingerprint: nodekey.Fingerprint(nc.pub)}, nil
}

// remove revokes a node's token at once (written before anything else)
// and disconnects it.
func (g *Gateway) remove(ctx context.Context, id string) (bridge.NodeView, error) {
	c, err := Select(g.candidates(), id)
	if err != nil {
		return bridge.NodeView{}, selectError(err)
	}
	rec := g.reg.get(c.ID)
	if _, err := g.reg.remove(c.ID); err != nil {
		return bridge.NodeView{}, err
	}
	g.auditRemoved(ctx, c.ID, rec)
	g.mu.Lock()
	nc := g.live[c.ID]
	delete(g.live, c.ID)
	g.liveChangedLocked()
	g.mu.Unlock()
	if nc != nil {
		nc.conn.Close("node removed by the operator; its token is revoked")
	}
	g.log.Info("node removed", "node", c.ID)
	v := bridge.NodeView{NodeID: c.ID}
	if rec != nil {
		v = view(*rec, false)
		v.Paired = false
	}
	return v, nil
}

func (g *Gateway) joinKey(ctx context.Context, p bridge.JoinKeyParams) (bridge.JoinKeyResult, error) {
	ttl := time.Duration(p.TTLMs) * time.Millisecond
	if ttl <= 0 {
		ttl = DefaultJoinKeyTTL
	}
	if ttl > MaxJoinKeyTTL {
		return bridge.JoinKeyResult{}, bridge.Errorf(bridge.CodeInvalidRequest, "join key ttl %s is longer than the %s limit", ttl, MaxJoinKeyTTL)
	}
	key := newSecret("ehj_")
	exp := time.Now().Add(ttl)
	if err := g.reg.addJoinKey(hashSecret(key), exp); err != nil {
		return bridge.JoinKeyResult{}, err
	}
	res := bridge.JoinKeyResult{Key: key, ExpiresAt: exp.UnixMilli(), Fingerprint: g.fingerprint}
	g.auditJoinKeyIssued(ctx, res)
	return res, nil
}

// nodeApprovalsHandler answers nodes.approvals.get and .set.
func nodeApprovalsHandler(g *Gateway, ctx context.Context, _ caller, method string, params json.RawMessage) (any, error) {
	p, err := decode[bridge.NodeApprovalsParams](method, params)
	if err != nil {
		return nil, err
	}
	return g.nodeApprovals(ctx, method, p)
}

// nodeApprovals forwards system.execApprovals.get/set to a node.
func (g *Gateway) nodeApprovals(ctx context.Context, method string, p bridge.NodeApprovalsParams) (any, error) {
	nc, err := g.selectNode(p.Node)
	if err != nil {
		return nil, err
	}
	const timeout = 30 * time.Second
	if method == bridge.MethodNodeApprovalGet {
		payload, err := g.invoke(ctx, nc, bridge.CmdExecApprovalsGet, struct{}{}, timeout, "")
		if err != nil {
			return nil, err
		}
		return payload, nil
	}
	if p.BaseHash == "" {
		return nil, bridge.Errorf(bridge.CodeInvalidRequest, "baseHash is required").WithHint("get the file first; its hash protects concurrent edits")
	}
	g.auditApprovalsEdit(ctx, nc, p, g.currentApprovals(ctx, nc, timeout))
	payload, err := g.invoke(ctx, nc, bridge.CmdExecApprovalsSet, bridge.ApprovalsSetParams{File: p.File, BaseHash: p.BaseHash}, timeout, "")
	if err := g.auditApprovalsResult(ctx, nc, p, payload, err); err != nil {
		return nil, err
	}
	return payload, nil
}

// Approve pairs a pending node, as `exechost nodes approve` does. `exechost
// up` calls it in-process for the local node it started itself.
func (g *Gateway) Approve(ctx context.Context, id string) (bridge.NodeView, error) {
	return g.approve(ctx, id)
}
