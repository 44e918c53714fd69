package approverui

import (
	"context"
	"errors"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
)

// AutoDecide answers every prompt in b with a, as "by", until ctx is done:
// for scripted environments and tests (`exechost approver --auto-decide`).
// A prompt that does not offer a is denied, never approved more broadly.
func AutoDecide(ctx context.Context, b *prompt.Broker, a policy.Approval, by string) {
	list, ch, stop := b.Watch()
	defer stop()
	decide := func(p prompt.Pending) {
		err := b.Resolve(p.ID, a, by)
		if errors.Is(err, prompt.ErrNotOffered) {
			b.Resolve(p.ID, policy.Reject, by)
		}
	}
	for _, p := range list { // queued before we subscribed
		decide(p)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case c, ok := <-ch:
			if !ok {
				return
			}
			if c.Kind == prompt.ChangeAdded {
				decide(c.Pending)
			}
		}
	}
}
