package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/exechost/exechost/internal/approvalroute"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/idprefix"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
)

// Bounds on prompts routed through the gateway.
const (
	// MaxPromptWait caps how long the gateway holds a prompt, whatever
	// expiry the execution host asked for: every wait has a deadline.
	MaxPromptWait = 10 * time.Minute
	// MaxNodePrompts bounds the prompts one node may have pending, so a
	// misbehaving node cannot flood the operators' queue.
	MaxNodePrompts = 64
)

// ErrPromptWithdrawn is the reason a node's prompt ends when the node
// withdraws it (its local approver answered first).
var ErrPromptWithdrawn = errors.New("prompt withdrawn by its execution host")

// promptHub holds the prompts routed to the gateway (from nodes and from
// the gateway's own engine) in one prompt.Broker, shared with the web
// UI, and mirrors the broker's changes to operator clients as
// exec.approval.requested / exec.approval.resolved events.
type promptHub struct {
	broker *prompt.Broker
	log    func(msg string, args ...any)
	// onAnswer hears every prompt's outcome, for the audit log (audit.go).
	onAnswer func(req prompt.Request, peer, id string, a policy.Approval, by string, err error)

	mu        sync.Mutex
	operators map[*bridge.Conn]*operatorState
	nodeRefs  map[string]nodePrompt // nodeID "\x00" ref → its wait
	withdrawn map[string]bool       // refs cancelled before their request arrived
	perNode   map[string]int        // nodeID → prompts pending
	joins     chan *bridge.Conn     // operators to send the current queue to
	stop      func()
	done      chan struct{}
}

type nodePrompt struct {
	cancel context.CancelCauseFunc
}

// operatorState is one operator connection's event stream. joined, seen
// and q belong to the broadcast loop alone.
type operatorState struct {
	name   string
	joined bool            // has been sent the queue as it was on joining
	seen   map[string]bool // ids in that snapshot whose "added" change is still to come
	// q is the operator's own send queue (made on joining), so one
	// operator that stops reading delays no other and no queue change
	// (the broker drops changes for a subscriber that lags): it is
	// dropped instead, and sent the queue afresh when it reconnects.
	q *bridge.SendQueue
}

func newPromptHub(log func(string, ...any)) *promptHub {
	h := &promptHub{
		broker:    prompt.NewBroker(),
		log:       log,
		operators: make(map[*bridge.Conn]*operatorState),
		nodeRefs:  make(map[string]nodePrompt),
		withdrawn: make(map[string]bool),
		perNode:   make(map[string]int),
		joins:     make(chan *bridge.Conn, 64),
		done:      make(chan struct{}),
	}
	ch, stop := h.broker.Subscribe()
	h.stop = stop
	go h.broadcast(ch)
	return h
}

// close ends the broadcast loop.
func (h *promptHub) close() {
	h.stop()
	<-h.done
}

// addOperator starts sending approval events to c. The broadcast loop
// first sends it the prompts already pending, then every later change, so
// an operator that connects while a prompt waits sees it, each prompt is
// announced once, and its resolution comes after its announcement.
func (h *promptHub) addOperator(c *bridge.Conn, name string) {
	h.mu.Lock()
	h.operators[c] = &operatorState{name: name}
	h.mu.Unlock()
	select {
	case h.joins <- c:
	default:
		go func() {
			select {
			case h.joins <- c:
			case <-h.done:
			case <-c.Done():
			}
		}()
	}
}

func (h *promptHub) removeOperator(c *bridge.Conn) {
	h.mu.Lock()
	delete(h.operators, c)
	h.mu.Unlock()
}

// broadcast sends each queue change to every operator, in order, and the
// current queue to each operator that joins.
func (h *promptHub) broadcast(ch <-chan prompt.Change) {
	defer close(h.done)
	for {
		var c prompt.Change
		select {
		case oc := <-h.joins:
			h.mu.Lock()
			st := h.operators[oc]
			h.mu.Unlock()
			if st == nil || st.joined {
				continue
			}
			list := h.broker.List()
			st.joined, st.seen = true, map[string]bool{}
			st.q = bridge.NewSendQueue(oc, len(list)+bridge.DefaultSendQueue)
			for _, p := range list {
				st.seen[p.ID] = true
				h.send(st, approvalroute.EventRequested, requested(p), p.ID)
			}
			continue
		case chg, ok := <-ch:
			if !ok {
				return
			}
			c = chg
		}
		var event string
		var payload any
		switch c.Kind {
		case prompt.ChangeAdded:
			event, payload = approvalroute.EventRequested, requested(c.Pending)
		case prompt.ChangeResolved:
			event, payload = approvalroute.EventResolved, approvalroute.Resolved{ID: c.Pending.ID, Outcome: approvalroute.OutcomeAnswered, Decision: string(c.Decision), By: c.By}
		case prompt.ChangeExpired:
			event, payload = approvalroute.EventResolved, approvalroute.Resolved{ID: c.Pending.ID, Outcome: approvalroute.OutcomeExpired}
		default:
			continue
		}
		type target struct {
			c  *bridge.Conn
			st *operatorState
		}
		h.mu.Lock()
		targets := make([]target, 0, len(h.operators))
		for oc, st := range h.operators {
			targets = append(targets, target{oc, st})
		}
		h.mu.Unlock()
		id := c.Pending.ID
		for _, t := range targets {
			if !t.st.joined {
				continue // its snapshot, taken later, covers this change
			}
			if t.st.seen[id] {
				if c.Kind == prompt.ChangeAdded {
					delete(t.st.seen, id) // announced in its snapshot
					continue
				}
				delete(t.st.seen, id)
			}
			h.send(t.st, event, payload, id)
		}
	}
}

// send queues one event for one operator without waiting for the write
// (which the queue bounds by bridge.WriteTimeout). An operator whose queue
// is full is disconnected by it.
func (h *promptHub) send(st *operatorState, event string, payload any, id string) {
	err := st.q.Enqueue(event, payload)
	switch {
	case err == nil:
	case errors.Is(err, bridge.ErrSlowPeer):
		h.log("operator disconnected: it stopped reading approval events", "operator", st.name, "err", err)
	case !errors.Is(err, bridge.ErrClosed):
		h.log("approval event not delivered", "event", event, "id", id, "operator", st.name, "err", err)
	}
}

// requested is the wire view of a pending prompt.
func requested(p prompt.Pending) approvalroute.Requested {
	r := approvalroute.Requested{
		ID: p.ID, Request: p.Request, Host: p.Request.Host, NodeID: p.Request.NodeID,
		ExpiresAtMs: p.ExpiresAt.UnixMilli(), ReceivedAtMs: p.ReceivedAt.UnixMilli(),
	}
	if p.ExpiresAt.IsZero() {
		r.ExpiresAtMs = 0
	}
	return r
}

// submit queues a prompt and waits for an operator's answer, ctx's end or
// the prompt's expiry (capped at MaxPromptWait), whichever comes first.
// Expiry returns an error wrapping prompt.ErrTimeout.
func (h *promptHub) submit(ctx context.Context, req prompt.Request, peer string) (id string, a policy.Approval, by string, err error) {
	now := time.Now()
	exp := now.Add(MaxPromptWait)
	if req.ExpiresAtMs > 0 {
		if e := time.UnixMilli(req.ExpiresAtMs); e.Before(exp) {
			exp = e
		}
	}
	req.ExpiresAtMs = exp.UnixMilli()
	id = uuid.NewString()
	wctx, cancel := context.WithDeadline(ctx, exp)
	defer cancel()
	a, by, err = h.broker.Submit(wctx, prompt.Pending{ID: id, Request: req, Peer: peer, ReceivedAt: now, ExpiresAt: exp})
	if err != nil {
		if errors.Is(wctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("%w: no operator answered prompt %s by %s", prompt.ErrTimeout, id, exp.Format(time.TimeOnly))
		}
		a, by = "", ""
	}
	if h.onAnswer != nil {
		h.onAnswer(req, peer, id, a, by, err)
	}
	return id, a, by, err
}

// resolve answers a prompt by id or unique prefix on behalf of by.
func (h *promptHub) resolve(idOrPrefix, decision, by string) (approvalroute.Resolved, error) {
	a, err := policy.ParseApproval(strings.TrimSpace(decision))
	if err != nil || !a.Valid() {
		return approvalroute.Resolved{}, bridge.Errorf(bridge.CodeInvalidRequest, "decision %q: want allow-once, allow-always or deny", decision)
	}
	id, err := h.fullID(idOrPrefix)
	if err == nil {
		err = h.broker.Resolve(id, a, by)
	}
	if err != nil {
		if errors.Is(err, prompt.ErrExpired) {
			// A decision for a prompt whose requester went away (or that
			// expired): refused, and logged so the refusal is on record.
			h.log("late decision refused", "id", id, "decision", string(a), "by", by, "err", err)
		}
		return approvalroute.Resolved{}, resolveError(err)
	}
	return approvalroute.Resolved{ID: id, Outcome: approvalroute.OutcomeAnswered, Decision: string(a), By: by}, nil
}

// fullID expands a unique prefix among pending prompts to the full id, so
// the answer names the prompt it resolved; anything else is left to the
// broker, whose errors say unknown, ambiguous, expired or answered.
func (h *promptHub) fullID(q string) (string, error) {
	q = strings.TrimSpace(q)
	if q == "" {
		return "", fmt.Errorf("resolve: %w: empty id", prompt.ErrUnknownID)
	}
	var ids []string
	for _, p := range h.broker.List() {
		ids = append(ids, p.ID)
	}
	if m := idprefix.Match(ids, q, 1); len(m) == 1 {
		return m[0], nil
	}
	// Unknown or ambiguous: the broker says so, with every candidate.
	return q, nil
}

// resolveError maps the broker's sentinels to wire errors with hints.
func resolveError(err error) error {
	switch {
	case errors.Is(err, prompt.ErrAmbiguousID):
		return &bridge.Error{Code: bridge.CodeAmbiguous, Message: err.Error()}
	case errors.Is(err, prompt.ErrExpired), errors.Is(err, prompt.ErrAnswered):
		return &bridge.Error{Code: bridge.CodeStale, Message: err.Error(), Cause: err}
	case errors.Is(err, prompt.ErrNotOffered):
		return &bridge.Error{Code: bridge.CodeInvalidRequest, Message: err.Error()}
	case errors.Is(err, prompt.ErrUnknownID):
		return (&bridge.Error{Code: bridge.CodeNotFound, Message: err.Error()}).WithHint("`exechost approvals pending` lists the prompts waiting for an answer")
	}
	return bridge.Errorf(bridge.CodeInvalidRequest, "%w", err)
}

// pending lists the prompts waiting for an answer.
func (h *promptHub) pending() approvalroute.PendingResult {
	ps := h.broker.List()
	out := approvalroute.PendingResult{Approvals: make([]approvalroute.Requested, 0, len(ps))}
	for _, p := range ps {
		out.Approvals = append(out.Approvals, requested(p))
	}
	return out
}

// nodeRequest handles node.approval.request: the prompt waits until an
// operator answers, it expires, the node withdraws it, or the node's
// connection drops (ctx is the connection's context).
func (h *promptHub) nodeRequest(ctx context.Context, nodeID string, p approvalroute.NodeRequest) (approvalroute.NodeAnswer, error) {
	if p.Ref == "" || len(p.Ref) > 128 {
		return approvalroute.NodeAnswer{}, bridge.Errorf(bridge.CodeInvalidRequest, "node.approval.request needs a ref of 1..128 bytes")
	}
	key := nodeID + "\x00" + p.Ref
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	h.mu.Lock()
	if h.withdrawn[key] {
		// The node gave up before its request got here (the cancel
		// overtook it): nothing to ask.
		delete(h.withdrawn, key)
		h.mu.Unlock()
		return approvalroute.NodeAnswer{}, bridge.Errorf(bridge.CodeStale, "prompt %s: %w", p.Ref, ErrPromptWithdrawn)
	}
	if _, dup := h.nodeRefs[key]; dup {
		h.mu.Unlock()
		return approvalroute.NodeAnswer{}, bridge.Errorf(bridge.CodeInvalidRequest, "prompt ref %q is already pending", p.Ref)
	}
	if h.perNode[nodeID] >= MaxNodePrompts {
		h.mu.Unlock()
		return approvalroute.NodeAnswer{}, bridge.Errorf(bridge.CodeBusy, "node %s has %d prompts pending (limit %d)", nodeID, MaxNodePrompts, MaxNodePrompts)
	}
	h.nodeRefs[key] = nodePrompt{cancel: cancel}
	h.perNode[nodeID]++
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.nodeRefs, key)
		if h.perNode[nodeID]--; h.perNode[nodeID] <= 0 {
			delete(h.perNode, nodeID)
		}
		h.mu.Unlock()
	}()
	// The node's word on where it is does not count: the connection does.
	req := p.Request
	req.Host, req.NodeID = string(policy.HostNode), nodeID
	id, a, by, err := h.submit(ctx, req, "node "+nodeID)
	switch {
	case err == nil:
		return approvalroute.NodeAnswer{ID: id, Decision: string(a), By: by}, nil
	case errors.Is(err, prompt.ErrTimeout):
		return approvalroute.NodeAnswer{}, &bridge.Error{Code: bridge.CodeTimeout, Message: err.Error()}
	case errors.Is(context.Cause(ctx), ErrPromptWithdrawn):
		return approvalroute.NodeAnswer{}, bridge.Errorf(bridge.CodeStale, "prompt %s: %w", id, ErrPromptWithdrawn)
	}
	return approvalroute.NodeAnswer{}, bridge.Errorf(bridge.CodeUnavailable, "prompt %s: %w", id, err)
}

// maxWithdrawn bounds the remembered early cancels; beyond it they are
// forgotten (such a prompt then waits for its expiry, as any unanswered
// one does).
const maxWithdrawn = 1024

// nodeCancel withdraws a node's pending prompt. A ref not pending was
// either answered meanwhile or its request has not arrived yet (the two
// frames race on the node's side); it is remembered so the request, if it
// comes, ends at once.
func (h *promptHub) nodeCancel(nodeID, ref string) {
	if ref == "" || len(ref) > 128 {
		return
	}
	key := nodeID + "\x00" + ref
	h.mu.Lock()
	np, ok := h.nodeRefs[key]
	if !ok {
		if len(h.withdrawn) >= maxWithdrawn {
			clear(h.withdrawn)
		}
		h.withdrawn[key] = true
	}
	h.mu.Unlock()
	if ok {
		np.cancel(ErrPromptWithdrawn)
	}
}

// gatewayPrompter routes the gateway engine's own prompts (host=gateway)
// to its operators.
type gatewayPrompter struct{ h *promptHub }

// Prompt implements host.Prompter.
func (p gatewayPrompter) Prompt(ctx context.Context, req prompt.Request) (policy.Approval, string, error) {
	req.Host = string(policy.HostGateway)
	_, a, by, err := p.h.submit(ctx, req, "gateway")
	if err != nil {
		if errors.Is(err, prompt.ErrTimeout) {
			return "", "", err
		}
		return "", "", fmt.Errorf("%w: gateway operators: %w", prompt.ErrUnreachable, err)
	}
	return a, by, nil
}

// Prompter returns a host.Prompter that sends the gateway engine's prompts
// (host=gateway) to the gateway's operators: exec.approval.requested, the
// web UI, `exechost approvals pending`. Combine it with the local socket
// prompter through approvalroute.Prompter for approvals.route.
func (g *Gateway) Prompter() host.Prompter { return gatewayPrompter{g.prompts} }

// Approvals returns the broker holding every prompt routed to this
// gateway, for UIs served in-process (the web UI).
func (g *Gateway) Approvals() *prompt.Broker { return g.prompts.broker }
