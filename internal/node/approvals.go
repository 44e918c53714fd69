package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/exechost/exechost/internal/approvalroute"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
)

// cancelTimeout bounds the node.approval.cancel sent when a prompt is
// abandoned; maxPromptWait bounds a prompt without an expiry (the
// gateway caps its own wait at 10 minutes).
const (
	cancelTimeout = 5 * time.Second
	maxPromptWait = 10*time.Minute + cancelTimeout
)

// GatewayPrompter returns a host.Prompter that sends this node's prompts
// to the gateway (node.approval.request), where operators answer them
// from anywhere. Every failure to get an answer wraps an approver
// sentinel, so the engine applies askFallback: not connected or the
// connection dropped → prompt.ErrUnreachable; nobody answered before
// the prompt expired → prompt.ErrTimeout; an answer that is not one of
// the offered decisions → prompt.ErrBadReply. Combine it with the local
// socket prompter through approvalroute.Prompter for --approvals-route.
func (c *Client) GatewayPrompter() host.Prompter { return gatewayPrompter{c} }

type gatewayPrompter struct{ c *Client }

// Prompt implements host.Prompter.
func (p gatewayPrompter) Prompt(ctx context.Context, req prompt.Request) (policy.Approval, string, error) {
	p.c.mu.Lock()
	c := p.c.conn
	p.c.mu.Unlock()
	if c == nil || c.Err() != nil {
		return "", "", fmt.Errorf("%w: this node is not connected to the gateway", prompt.ErrUnreachable)
	}
	ref := uuid.NewString()
	// The call runs under its own deadline, not ctx: a WebSocket write
	// interrupted by a cancelled context tears the whole connection down,
	// and ctx is cancelled whenever the local approver wins a race.
	limit := time.Now().Add(maxPromptWait)
	if req.ExpiresAtMs > 0 {
		limit = time.UnixMilli(req.ExpiresAtMs).Add(cancelTimeout)
	}
	cctx, cancel := context.WithDeadline(c.Context(), limit)
	type reply struct {
		ans approvalroute.NodeAnswer
		err error
	}
	done := make(chan reply, 1)
	go func() {
		defer cancel()
		var ans approvalroute.NodeAnswer
		err := c.Call(cctx, approvalroute.MethodNodeRequest, approvalroute.NodeRequest{Ref: ref, Request: req}, &ans)
		done <- reply{ans, err}
	}()
	var ans approvalroute.NodeAnswer
	var err error
	select {
	case r := <-done:
		ans, err = r.ans, r.err
	case <-ctx.Done():
		// Our side stopped waiting (timeout, or the local approver won a
		// race): withdraw the prompt so operators see it go.
		go func() {
			wctx, cancel := context.WithTimeout(c.Context(), cancelTimeout)
			defer cancel()
			_ = c.Call(wctx, approvalroute.MethodNodeCancel, approvalroute.NodeCancel{Ref: ref}, nil)
		}()
		return "", "", fmt.Errorf("%w: gateway prompt: %w", prompt.ErrTimeout, context.Cause(ctx))
	}
	if err != nil {
		var be *bridge.Error
		if errors.As(err, &be) && be.Code == bridge.CodeTimeout {
			return "", "", fmt.Errorf("%w: gateway: %s", prompt.ErrTimeout, be.Message)
		}
		return "", "", fmt.Errorf("%w: gateway prompt: %w", prompt.ErrUnreachable, err)
	}
	a, err := policy.ParseApproval(ans.Decision)
	if err != nil || !a.Valid() || !prompt.Offered(req, a) {
		return "", "", fmt.Errorf("%w: gateway answered %q, which this prompt did not offer", prompt.ErrBadReply, ans.Decision)
	}
	by := ans.By
	if by == "" {
		by = "gateway operator"
	}
	return a, by, nil
}

var _ host.Prompter = gatewayPrompter{}
