package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/host"
)

// InvokeMargin is bridge.InvokeMargin: the gateway waits on a node for a
// command's own timeout plus this.
const InvokeMargin = bridge.InvokeMargin

// invokeWaiter is one node.invoke in flight.
type invokeWaiter struct {
	nodeID string
	// run asks invokeResult to decode a system.run payload straight into
	// a bridge.SystemRunResult (bridge.Codec.DecodeRunResult).
	run bool
	ch  chan invokeReply
}

// invokeReply is a node's answer: the result, and for a waiter with run
// set, the payload already decoded (nil: decode res.Payload).
type invokeReply struct {
	res bridge.InvokeResult
	run *bridge.SystemRunResult
}

// invoke sends command to the node and waits for its result, the node's
// disconnection (failing at once), the timeout or ctx.
func (g *Gateway) invoke(ctx context.Context, nc *nodeConn, command string, params any, timeout time.Duration, idemKey string) (json.RawMessage, error) {
	r, err := g.invokeReply(ctx, nc, command, params, timeout, idemKey, false)
	return r.res.Payload, err
}

// invokeRun is invoke of system.run, returning the node's result as it
// came (no conversion: it goes back out in the exec result).
func (g *Gateway) invokeRun(ctx context.Context, nc *nodeConn, req host.Request, timeout time.Duration, idemKey string) (bridge.SystemRunResult, error) {
	r, err := g.invokeReply(ctx, nc, bridge.CmdSystemRun, req.Wire(""), timeout, idemKey, true)
	if err != nil {
		return bridge.SystemRunResult{}, err
	}
	if r.run != nil {
		return *r.run, nil
	}
	var res bridge.SystemRunResult
	if err := bridge.UnmarshalOwn(r.res.Payload, bridge.KeepingWire(&res)); err != nil {
		return bridge.SystemRunResult{}, bridge.Errorf(bridge.CodeInternal, "node %s sent a bad system.run result: %v", nc.id, err)
	}
	return res, nil
}

func (g *Gateway) invokeReply(ctx context.Context, nc *nodeConn, command string, params any, timeout time.Duration, idemKey string, run bool) (invokeReply, error) {
	raw, err := bridge.Marshal(params)
	if err != nil {
		return invokeReply{}, fmt.Errorf("encode %s params: %w", command, err)
	}
	id := uuid.NewString()
	if idemKey == "" {
		idemKey = id
	}
	if err := g.fitsNode(nc, command, len(raw)+len(idemKey)); err != nil {
		return invokeReply{}, err
	}
	w := &invokeWaiter{nodeID: nc.id, run: run, ch: make(chan invokeReply, 1)}
	g.mu.Lock()
	g.invokes[id] = w
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.invokes, id)
		g.mu.Unlock()
	}()
	req := bridge.InvokeRequest{ID: id, NodeID: nc.id, Command: command, Params: raw, TimeoutMs: timeout.Milliseconds(), IdempotencyKey: idemKey}
	if err := nc.notify(ctx, bridge.EventInvokeRequest, req); err != nil {
		return invokeReply{}, bridge.Errorf(bridge.CodeUnavailable, "node %s: send %s: %v", nc.id, command, err)
	}
	t := time.NewTimer(timeout + InvokeMargin)
	defer t.Stop()
	sent := time.Now()
	select {
	case r := <-w.ch:
		g.opts.Metrics.ObserveNodeInvoke(time.Since(sent))
		if !r.res.OK {
			if r.res.Error == nil {
				return invokeReply{}, bridge.Errorf(bridge.CodeInternal, "node %s: %s failed without an error", nc.id, command)
			}
			return invokeReply{}, r.res.Error
		}
		return r, nil
	case <-nc.conn.Done():
		return invokeReply{}, bridge.Errorf(bridge.CodeUnavailable, "node %s disconnected during %s (%v); the command's outcome is unknown", nc.id, command, nc.conn.Err())
	case <-t.C:
		return invokeReply{}, bridge.Errorf(bridge.CodeTimeout, "node %s did not answer %s within %s", nc.id, command, timeout+InvokeMargin)
	case <-ctx.Done():
		g.cancelInvoke(nc, id, context.Cause(ctx)) // the node must not go on with it
		return invokeReply{}, bridge.Errorf(bridge.CodeUnavailable, "%s on node %s abandoned: %v", command, nc.id, context.Cause(ctx))
	}
}

// handleNode answers requests from a node connection: a node still
// pending may call nothing; a paired one what the method table allows
// (dispatch.go).
func (g *Gateway) handleNode(ctx context.Context, nc *nodeConn, method string, params json.RawMessage) (any, error) {
	if !g.isLive(nc) {
		return nil, bridge.Errorf(bridge.CodeForbidden, "node %s is not paired yet", nc.id).WithHint(fmt.Sprintf("exechost nodes approve %s", nc.id))
	}
	return g.dispatch(ctx, caller{role: bridge.RoleNode, name: nc.id, node: nc}, method, params)
}

// invokeResult takes a node's node.invoke.result to the invoke waiting
// for it.
func (g *Gateway) invokeResult(nc *nodeConn, method string, params json.RawMessage) (any, error) {
	var reply invokeReply
	var w *invokeWaiter
	var codec bridge.Codec // the wire's fast paths, held to its plain decoder (bridge.FuzzCodec)
	if id, ok := codec.PeekInvokeID(params); ok {
		g.mu.Lock()
		w = g.invokes[id]
		g.mu.Unlock()
		if w != nil && w.run && w.nodeID == nc.id {
			var err error
			if reply.res, reply.run, err = codec.DecodeRunResult(params, id); err != nil {
				return nil, bridge.Errorf(bridge.CodeInvalidRequest, "bad %s params: %v", method, err)
			}
		} else {
			w = nil
		}
	}
	if w == nil {
		if err := bridge.Unmarshal(params, &reply.res); err != nil {
			return nil, bridge.Errorf(bridge.CodeInvalidRequest, "bad %s params: %v", method, err)
		}
		g.mu.Lock()
		w = g.invokes[reply.res.ID]
		g.mu.Unlock()
	}
	// Only the node the invoke went to may answer it.
	if w == nil || w.nodeID != nc.id {
		return nil, bridge.Errorf(bridge.CodeNotFound, "no pending invoke %q for node %s (it may have timed out)", reply.res.ID, nc.id)
	}
	select {
	case w.ch <- reply:
	default:
	}
	return map[string]bool{"ok": true}, nil
}

// nodeEvent maps one node.event (sent as an event frame, handled in order
// on the read loop, or as a request) to a system event.
func (g *Gateway) nodeEvent(nc *nodeConn, params json.RawMessage) error {
	if !g.isLive(nc) {
		return bridge.Errorf(bridge.CodeForbidden, "node %s is not paired yet", nc.id)
	}
	// bridge.NodeEvent's shape, its payload decoded in the same pass (a
	// finished event carries an output tail).
	var he bridge.ExecEvent
	ev := struct {
		Event   string            `json:"event"`
		Payload *bridge.ExecEvent `json:"payload"`
	}{Payload: &he}
	if err := bridge.UnmarshalOwn(params, &ev); err != nil {
		return bridge.Errorf(bridge.CodeInvalidRequest, "bad %s params: %v", bridge.MethodNodeEvent, err)
	}
	// Route by the run the gateway sent to this node, never by the
	// node's say-so, so a node cannot write into arbitrary sessions.
	r := g.nodeRun(he.RunID, nc.id)
	if r == nil {
		g.log.Debug("node event for an unknown run dropped", "node", nc.id, "event", ev.Event, "runId", he.RunID)
		return nil
	}
	he.Kind = ev.Event
	g.lifecycle(r.key, r, nc.id, he)
	return nil
}

func (g *Gateway) isLive(nc *nodeConn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.live[nc.id] == nc
}

// cancelInvoke tells a node that the gateway stopped waiting for invoke id
// (its caller went away or its deadline passed): the node withdraws the
// prompt the command waits on, so a late approval cannot run it. Best
// effort, bounded by the connection's keepalive (bridge.PingInterval); a
// node that never gets it still has its own timeout.
func (g *Gateway) cancelInvoke(nc *nodeConn, id string, cause error) {
	reason := "abandoned"
	if cause != nil {
		reason = cause.Error()
	}
	go func() {
		if err := nc.notify(nc.conn.Context(), bridge.EventInvokeCancel, bridge.InvokeCancel{ID: id, NodeID: nc.id, Reason: reason}); err != nil {
			g.log.Debug("invoke cancel not delivered", "node", nc.id, "invoke", id, "err", err)
		}
	}()
}

// maxNodeInvoke is the largest invoke a node reads: its read limit
// (bridge.MaxFrame) less room for the frame around the params.
const maxNodeInvoke = bridge.MaxFrame - 4<<10

// fitsNode refuses an invoke larger than the node reads. Sent, it would
// make the node drop its connection, and every other caller's runs on
// that node end UNAVAILABLE; refused here, only its sender hears of it.
func (g *Gateway) fitsNode(nc *nodeConn, command string, size int) error {
	limit := g.nodeFrameLimit
	if limit == 0 {
		limit = maxNodeInvoke
	}
	if limit < 0 || size+len(nc.id) <= limit {
		return nil
	}
	return bridge.Errorf(bridge.CodeInvalidRequest, "%s for node %s is %d bytes; the node reads at most %d", command, nc.id, size, limit).WithHint("put a long script in a file on the node and run the file")
}
