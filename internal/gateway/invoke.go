package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/session"
)

// InvokeMargin is added to a command's own timeout for the gateway's wait
// on the node, covering transport and the node's prompt.
const InvokeMargin = 10 * time.Second

// invokeWaiter is one node.invoke in flight.
type invokeWaiter struct {
	nodeID string
	ch     chan bridge.InvokeResult
}

// invoke sends command to the node and waits for its result, the node's
// disconnection (failing at once), the timeout or ctx.
func (g *Gateway) invoke(ctx context.Context, nc *nodeConn, command string, params any, timeout time.Duration, idemKey string) (json.RawMessage, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("encode %s params: %w", command, err)
	}
	id := uuid.NewString()
	if idemKey == "" {
		idemKey = id
	}
	w := &invokeWaiter{nodeID: nc.id, ch: make(chan bridge.InvokeResult, 1)}
	g.mu.Lock()
	g.invokes[id] = w
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.invokes, id)
		g.mu.Unlock()
	}()
	req := bridge.InvokeRequest{ID: id, NodeID: nc.id, Command: command, Params: raw, TimeoutMs: timeout.Milliseconds(), IdempotencyKey: idemKey}
	if err := nc.conn.Notify(ctx, bridge.EventInvokeRequest, req); err != nil {
		return nil, bridge.Errorf(bridge.CodeUnavailable, "node %s: send %s: %v", nc.id, command, err)
	}
	t := time.NewTimer(timeout + InvokeMargin)
	defer t.Stop()
	sent := time.Now()
	select {
	case r := <-w.ch:
		g.opts.Metrics.ObserveNodeInvoke(time.Since(sent))
		if !r.OK {
			if r.Error == nil {
				return nil, bridge.Errorf(bridge.CodeInternal, "node %s: %s failed without an error", nc.id, command)
			}
			return nil, r.Error
		}
		return r.Payload, nil
	case <-nc.conn.Done():
		return nil, bridge.Errorf(bridge.CodeUnavailable, "node %s disconnected during %s (%v); the command's outcome is unknown", nc.id, command, nc.conn.Err())
	case <-t.C:
		return nil, bridge.Errorf(bridge.CodeTimeout, "node %s did not answer %s within %s", nc.id, command, timeout+InvokeMargin)
	case <-ctx.Done():
		g.cancelInvoke(nc, id, context.Cause(ctx)) // the node must not go on with it (approvals.go)
		return nil, bridge.Errorf(bridge.CodeUnavailable, "%s on node %s abandoned: %v", command, nc.id, context.Cause(ctx))
	}
}

// handleNode answers requests from a node connection.
func (g *Gateway) handleNode(ctx context.Context, nc *nodeConn, method string, params json.RawMessage) (any, error) {
	if !g.isLive(nc) {
		return nil, bridge.Errorf(bridge.CodeForbidden, "node %s is not paired yet (hint: exechost nodes approve %s)", nc.id, nc.id)
	}
	switch method {
	case bridge.MethodInvokeResult:
		var r bridge.InvokeResult
		if err := json.Unmarshal(params, &r); err != nil {
			return nil, bridge.Errorf(bridge.CodeInvalidRequest, "bad %s params: %v", method, err)
		}
		g.mu.Lock()
		w := g.invokes[r.ID]
		g.mu.Unlock()
		// Only the node the invoke went to may answer it.
		if w == nil || w.nodeID != nc.id {
			return nil, bridge.Errorf(bridge.CodeNotFound, "no pending invoke %q for node %s (it may have timed out)", r.ID, nc.id)
		}
		select {
		case w.ch <- r:
		default:
		}
		return map[string]bool{"ok": true}, nil
	case bridge.MethodNodeEvent:
		if err := g.nodeEvent(nc, params); err != nil {
			return nil, err
		}
		return map[string]bool{"ok": true}, nil
	}
	if res, ok, err := g.nodeApproval(ctx, nc, method, params); ok {
		return res, err
	}
	return nil, bridge.Errorf(bridge.CodeNotFound, "unknown node method %q", method)
}

// nodeEvent maps one node.event (sent as an event frame, handled in order
// on the read loop, or as a request) to a system event.
func (g *Gateway) nodeEvent(nc *nodeConn, params json.RawMessage) error {
	if !g.isLive(nc) {
		return bridge.Errorf(bridge.CodeForbidden, "node %s is not paired yet", nc.id)
	}
	var ev bridge.NodeEvent
	if err := json.Unmarshal(params, &ev); err != nil {
		return bridge.Errorf(bridge.CodeInvalidRequest, "bad %s params: %v", bridge.MethodNodeEvent, err)
	}
	var he host.Event
	if err := json.Unmarshal(ev.Payload, &he); err != nil {
		return bridge.Errorf(bridge.CodeInvalidRequest, "bad %s payload: %v", ev.Event, err)
	}
	// Route by the run the gateway sent to this node, never by the
	// node's say-so, so a node cannot write into arbitrary sessions.
	key, ok := g.runSession(he.RunID, nc.id)
	if !ok {
		g.log.Debug("node event for an unknown run dropped", "node", nc.id, "event", ev.Event, "runId", he.RunID)
		return nil
	}
	g.enqueueLifecycle(key, nc.id, ev.Event, he)
	return nil
}

func (g *Gateway) isLive(nc *nodeConn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.live[nc.id] == nc
}

// enqueueLifecycle maps a lifecycle event to its system event text.
func (g *Gateway) enqueueLifecycle(key session.Key, nodeID, kind string, ev host.Event) {
	var text string
	switch kind {
	case host.EventStarted:
		text = session.StartedText(nodeID, ev.RunID)
	case host.EventFinished:
		code := -1
		if ev.ExitCode != nil {
			code = *ev.ExitCode
		}
		text = session.FinishedText(nodeID, ev.RunID, code, ev.Tail)
	case host.EventDenied:
		text = session.DeniedText(nodeID, ev.RunID, ev.Reason)
	default:
		return
	}
	if g.sessions.Enqueue(key, bridge.SystemEvent{Text: text, Kind: kind, RunID: ev.RunID, NodeID: nodeID}) > 0 {
		g.opts.Metrics.EventQueueDrop()
	}
}
