package asksock

import (
	"context"
	"fmt"
	"time"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
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
	// Timeout bounds one prompt (DefaultClientTimeout when 0).
	Timeout time.Duration
}

// Prompt implements host.Prompter (asksock does not import host: the
// interface is satisfied structurally, checked in engine_test.go).
func (p *SocketPrompter) Prompt(ctx context.Context, req prompt.Request) (policy.Approval, string, error) {
	f, err := p.Store.Load()
	if err != nil {
		return "", "", fmt.Errorf("read approval socket credentials: %w", err)
	}
	if f.Socket.Token == "" {
		return "", "", hint.Wrap(fmt.Errorf("%w: %s has no socket token yet", prompt.ErrUnreachable, p.Store.Path), "start `exechost approver`, which creates it")
	}
	c := &Client{SocketPath: p.Store.SocketPath(f), Token: []byte(f.Socket.Token), Timeout: p.Timeout}
	return c.Prompt(ctx, req)
}

// LocalPrompter is the prompter of the approver on this machine: the
// socket and token named by stateDir's exec-approvals.json. Every process
// that builds an engine passes it as host.Options.Prompter (or wraps it
// with a route); an engine built without one asks nobody and applies
// askFallback.
func LocalPrompter(stateDir string) *SocketPrompter {
	return &SocketPrompter{Store: approvals.NewStore(stateDir)}
}
