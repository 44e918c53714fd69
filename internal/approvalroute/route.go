package approvalroute

import (
	"context"
	"errors"
	"fmt"

	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
)

// Route says where an execution host sends a prompt for a human.
type Route string

// Routes. Local is the default: the approval socket on this machine.
const (
	Local   Route = "local"
	Gateway Route = "gateway"
	Both    Route = "both"
)

// ParseRoute parses an approvals.route value; "" is Local.
func ParseRoute(s string) (Route, error) {
	switch r := Route(s); r {
	case "":
		return Local, nil
	case Local, Gateway, Both:
		return r, nil
	}
	return "", fmt.Errorf("%w: approvals route %q (accepted: local, gateway, both)", policy.ErrInvalidValue, s)
}

// Prompter returns the prompter for route: local, remote (the gateway), or
// a race of both where the first answer wins. A nil side is left out of a
// race; route gateway with a nil remote is an error, since every prompt
// would silently fall back.
func Prompter(route Route, local, remote host.Prompter) (host.Prompter, error) {
	switch route {
	case Local, "":
		return local, nil
	case Gateway:
		if remote == nil {
			return nil, errors.New("approvals route gateway: no gateway connection to route prompts to")
		}
		return remote, nil
	case Both:
		if remote == nil {
			return nil, errors.New("approvals route both: no gateway connection to route prompts to")
		}
		if local == nil {
			return remote, nil
		}
		return Race{local, remote}, nil
	}
	return nil, fmt.Errorf("%w: approvals route %q (accepted: local, gateway, both)", policy.ErrInvalidValue, route)
}

// Race asks every prompter at once; the first answer wins and the others
// are cancelled (their UIs see the prompt go away). It fails only when
// every prompter failed, with all their errors, so askFallback's reason
// says why each side had no answer.
type Race []host.Prompter

// Prompt implements host.Prompter.
func (r Race) Prompt(ctx context.Context, req prompt.Request) (policy.Approval, string, error) {
	if len(r) == 0 {
		return "", "", fmt.Errorf("%w: no prompter configured", prompt.ErrUnreachable)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		a   policy.Approval
		by  string
		err error
	}
	ch := make(chan result, len(r))
	for _, p := range r {
		go func() {
			a, by, err := p.Prompt(ctx, req)
			ch <- result{a, by, err}
		}()
	}
	var errs []error
	for range r {
		res := <-ch
		if res.err == nil {
			return res.a, res.by, nil
		}
		errs = append(errs, res.err)
	}
	return "", "", errors.Join(errs...)
}

var _ host.Prompter = Race(nil)
