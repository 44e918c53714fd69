package approvals

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
)

// RemoteWideningFlag is the node setting that lets a gateway widen this
// host's policy without asking anyone here (off by default). The refusal
// names it, so it is spelled once.
const RemoteWideningFlag = "--allow-remote-widening"

// ReasonPolicyWidening is the prompt reason of a local confirmation of a
// remote widening, so the approver UIs can tell it from a command.
const ReasonPolicyWidening = "policy-widening"

// ConfirmTimeout bounds the wait for the local approver's answer to a
// remote widening: under the 30 s both gateways give the invoke.
const ConfirmTimeout = 25 * time.Second

// ErrNotOptedIn is the consent error when the host neither allows remote
// widening nor has an approver to confirm it.
var ErrNotOptedIn = errors.New("this host does not accept a remote widening of its policy")

// Asker asks this host's local approver (host.Prompter's Prompt method).
type Asker func(ctx context.Context, req prompt.Request) (policy.Approval, string, error)

// RemoteConsent returns the consent function ReplaceRemote takes on a host
// whose policy a gateway edits: nil when the host opted in (allow), else
// the answer of the local approver (ask; nil when there is none), shown a
// prompt that names every widening and who sent it (from). An approver
// that cannot be reached, does not answer within ConfirmTimeout or denies
// refuses the change; the error says how to apply it anyway.
func RemoteConsent(ctx context.Context, allow bool, ask Asker, from, nodeID string) func([]Widening) error {
	return func(ws []Widening) error {
		if allow {
			return nil
		}
		how := fmt.Sprintf("apply it on this host itself with `exechost approvals set --file F`, confirm it in `exechost approver` running on this host, or start this node with %s to let its gateway widen its policy", RemoteWideningFlag)
		if ask == nil {
			return hint.Wrap(ErrNotOptedIn, how)
		}
		cctx, cancel := context.WithTimeout(ctx, ConfirmTimeout)
		defer cancel()
		req := prompt.Request{
			Command: fmt.Sprintf("exec-approvals.json change from %s: %s", from, WideningsText(ws)),
			Host:    string(policy.HostNode), NodeID: nodeID,
			Reason:      ReasonPolicyWidening,
			Choices:     []string{string(policy.AllowOnce), string(policy.Reject)},
			ExpiresAtMs: time.Now().Add(ConfirmTimeout).UnixMilli(),
			Fallback:    string(policy.FallbackDeny),
		}
		a, by, err := ask(cctx, req)
		if err != nil {
			return hint.Wrap(fmt.Errorf("%w: the local approver could not confirm it: %w", ErrNotOptedIn, err), how)
		}
		if a != policy.AllowOnce && a != policy.AllowAlways {
			return fmt.Errorf("%w: the local approver (%s) denied it", ErrNotOptedIn, by)
		}
		return nil
	}
}
