package asksock

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/textsafe"
)

// BrokerPrompter asks the approver's own queue, in process. It is the
// Prompter of the engine that runs forwarded commands on an exec-host
// approver: the approver is itself the UI, so a prompt goes straight into
// the queue its TUI, line mode or web UI shows, with no socket round trip.
// It satisfies host.Prompter.
type BrokerPrompter struct {
	// Broker is the approver's queue.
	Broker *prompt.Broker
}

// Prompt queues req and waits for a UI's answer until req.ExpiresAtMs
// (DefaultPromptTimeout when unset) or ctx ends. Like Client.Prompt, every
// failure wraps prompt.ErrTimeout or prompt.ErrBadReply and is never an approval.
func (bp BrokerPrompter) Prompt(ctx context.Context, req prompt.Request) (policy.Approval, string, error) {
	if bp.Broker == nil {
		return "", "", fmt.Errorf("%w: no approver queue", prompt.ErrUnreachable)
	}
	now := time.Now()
	exp := now.Add(DefaultPromptTimeout)
	if req.ExpiresAtMs > 0 {
		exp = time.UnixMilli(req.ExpiresAtMs)
		if limit := now.Add(MaxPromptTimeout); exp.After(limit) {
			exp = limit
		}
	}
	peer := execPeer(ctx)
	if peer == "" {
		peer = "in process"
	}
	p := prompt.Pending{ID: uuid.NewString(), Request: req, Peer: peer + " (exec host)", ReceivedAt: now, ExpiresAt: exp}
	ctx, cancel := context.WithDeadline(ctx, exp)
	defer cancel()
	a, by, err := bp.Broker.Submit(ctx, p)
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", prompt.ErrTimeout, err)
	}
	if !a.Valid() || !prompt.Offered(req, a) {
		return "", "", fmt.Errorf("%w: decision %q was not offered", prompt.ErrBadReply, textsafe.Bounded(string(a), 32))
	}
	return a, sanitizeBy(by), nil
}
