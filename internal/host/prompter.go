package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/approver"
	"github.com/exechost/exechost/internal/policy"
)

// SocketPrompter asks the approver listening on this host's approval
// socket. It reads the socket path and token from exec-approvals.json at
// every prompt rather than once at start-up: a long-running gateway or node
// must keep working when the file is rewritten with a new token (an
// `approvals set` of a file without one, a restored backup), instead of
// failing every prompt with an HMAC mismatch until it is restarted.
type SocketPrompter struct {
	// Store is this host's approvals store.
	Store *approvals.Store
	// Timeout bounds one prompt (approver.DefaultClientTimeout when 0).
	Timeout time.Duration
}

// Prompt implements Prompter.
func (p *SocketPrompter) Prompt(ctx context.Context, req approver.PromptRequest) (policy.Approval, string, error) {
	f, err := p.Store.Load()
	if err != nil {
		return "", "", fmt.Errorf("read approval socket credentials: %w", err)
	}
	if f.Socket.Token == "" {
		return "", "", fmt.Errorf("%w: %s has no socket token yet (hint: start `exechost approver`, which creates it)", approver.ErrUnreachable, p.Store.Path)
	}
	c := &approver.Client{SocketPath: p.Store.SocketPath(f), Token: []byte(f.Socket.Token), Timeout: p.Timeout}
	return c.Prompt(ctx, req)
}

var _ Prompter = (*SocketPrompter)(nil)

// errNoPrompter is what NoAnswer reports when no approver is configured.
var errNoPrompter = errors.New("no approver configured")
