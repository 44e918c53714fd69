package bridge

import (
	"context"
	"errors"
	"fmt"

	"github.com/exechost/exechost/internal/hint"
)

// NodeApprovalsGet fetches a paired node's exec-approvals.json (without its
// socket token) and the hash a later set must name as its base, through
// the gateway on c (an operator connection).
func NodeApprovalsGet(ctx context.Context, c *Conn, node string) (ApprovalsGetResult, error) {
	var res ApprovalsGetResult
	err := c.Call(ctx, MethodNodeApprovalGet, NodeApprovalsParams{Node: node}, &res)
	return res, err
}

// ErrStaleApprovals is returned by NodeApprovalsSet when the node's file
// changed since baseHash was read; nothing was written.
var ErrStaleApprovals = errors.New("the node's approvals changed since they were read")

// NodeApprovalsSet replaces a paired node's exec-approvals.json with data,
// provided the node's file still has baseHash. The node keeps its own
// socket path and token whatever data says. A stale base is
// ErrStaleApprovals, so a caller can reread and reapply its change.
func NodeApprovalsSet(ctx context.Context, c *Conn, node string, data []byte, baseHash string) (ApprovalsGetResult, error) {
	var res ApprovalsGetResult
	err := c.Call(ctx, MethodNodeApprovalSet, NodeApprovalsParams{Node: node, File: data, BaseHash: baseHash}, &res)
	var be *Error
	if errors.As(err, &be) && be.Code == CodeStale {
		return res, hint.Wrap(fmt.Errorf("set approvals on node %s: %w: %s", node, ErrStaleApprovals, be.Message), fmt.Sprintf("`exechost approvals get --node %s --json`, reapply your change, set again", node))
	}
	return res, err
}
