package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/bridge"
)

// Client is one authenticated connection to a gateway.
type Client struct {
	conn *bridge.Conn
	url  string
	res  bridge.ConnectResult
}

// Conn returns the underlying connection, for methods without a typed
// call here.
func (c *Client) Conn() *bridge.Conn { return c.conn }

// URL returns the gateway URL the client dialed.
func (c *Client) URL() string { return c.url }

// Connected returns the gateway's answer to the connect request.
func (c *Client) Connected() bridge.ConnectResult { return c.res }

// Done is closed when the connection ends; Err then says why.
func (c *Client) Done() <-chan struct{} { return c.conn.Done() }

// Err returns why the connection ended, or nil while it is open.
func (c *Client) Err() error { return c.conn.Err() }

// Close ends the connection, telling the gateway why.
func (c *Client) Close(reason string) { c.conn.Close(reason) }

// Call runs one request of any method; a refusal is a *bridge.Error.
func (c *Client) Call(ctx context.Context, method string, params, out any) error {
	return c.conn.Call(ctx, method, params, out)
}

// call runs one typed request.
func call[T any](ctx context.Context, c *Client, method string, params any) (T, error) {
	var res T
	err := c.conn.Call(ctx, method, params, &res)
	return res, err
}

// Exec runs a command (method exec). The gateway may wait on a node for
// the command's timeout plus bridge.InvokeMargin, and on an approval:
// bound ctx accordingly.
func (c *Client) Exec(ctx context.Context, p bridge.ExecParams) (bridge.ExecResult, error) {
	return call[bridge.ExecResult](ctx, c, bridge.MethodExec, p)
}

// ExecStatus reports a run started with yieldMs (method exec.status).
func (c *Client) ExecStatus(ctx context.Context, p bridge.ExecStatusParams) (bridge.ExecStatusResult, error) {
	return call[bridge.ExecStatusResult](ctx, c, bridge.MethodExecStatus, p)
}

// Events drains the session's queued system events (session.events).
func (c *Client) Events(ctx context.Context, p bridge.SessionParams) (bridge.SessionEventsResult, error) {
	return call[bridge.SessionEventsResult](ctx, c, bridge.MethodSessionEvents, p)
}

// SessionCommand runs a slash command such as /elevated in a session
// (session.command).
func (c *Client) SessionCommand(ctx context.Context, p bridge.SessionCommandParams) (bridge.SessionCommandResult, error) {
	return call[bridge.SessionCommandResult](ctx, c, bridge.MethodSessionCommand, p)
}

// Nodes lists the nodes the session may target (nodes.list).
func (c *Client) Nodes(ctx context.Context, p bridge.SessionParams) (bridge.NodesResult, error) {
	return call[bridge.NodesResult](ctx, c, bridge.MethodNodesList, p)
}

// JoinKey asks for a one-time node join key (operator).
func (c *Client) JoinKey(ctx context.Context, p bridge.JoinKeyParams) (bridge.JoinKeyResult, error) {
	return call[bridge.JoinKeyResult](ctx, c, bridge.MethodJoinKey, p)
}

// NodeApprovals reads a paired node's exec-approvals.json through the
// gateway (operator) and parses it; the result's Hash is the base for a
// write.
func (c *Client) NodeApprovals(ctx context.Context, node string) (*approvals.File, bridge.ApprovalsGetResult, error) {
	res, err := bridge.NodeApprovalsGet(ctx, c.conn, node)
	if err != nil {
		return nil, res, fmt.Errorf("get approvals of node %s: %w", node, err)
	}
	f, err := approvals.Parse(node+":"+res.Path, res.File)
	return f, res, err
}

// SetNodeApprovals writes f as a paired node's exec-approvals.json,
// provided the node's file still hashes to baseHash (empty: its hash
// read now, so only a change between that read and the write is
// detected). A stale base wraps bridge.ErrStaleApprovals.
func (c *Client) SetNodeApprovals(ctx context.Context, node string, f *approvals.File, baseHash string) (bridge.ApprovalsGetResult, error) {
	data, err := f.Marshal()
	if err != nil {
		return bridge.ApprovalsGetResult{}, fmt.Errorf("encode approvals: %w", err)
	}
	if baseHash == "" {
		cur, err := bridge.NodeApprovalsGet(ctx, c.conn, node)
		if err != nil {
			return cur, fmt.Errorf("get approvals of node %s: %w", node, err)
		}
		baseHash = cur.Hash
	}
	return bridge.NodeApprovalsSet(ctx, c.conn, node, data, baseHash)
}

// EditAttempts bounds how often EditNodeApprovals rereads and reapplies
// its edit when the node's file changed in between.
const EditAttempts = 3

// EditNodeApprovals applies edit to a paired node's exec-approvals.json:
// read, edit, write with the read's hash as base. A concurrent change
// makes the write stale; the edit is then reapplied to the fresh file, so
// nobody's change is lost. Each attempt runs under a context from
// attemptCtx (nil: ctx itself), so a caller can bound attempts alone.
func (c *Client) EditNodeApprovals(ctx context.Context, node string, attemptCtx func(context.Context) (context.Context, context.CancelFunc), edit func(*approvals.File) error) error {
	if attemptCtx == nil {
		attemptCtx = func(ctx context.Context) (context.Context, context.CancelFunc) { return ctx, func() {} }
	}
	for attempt := 1; ; attempt++ {
		err := func() error {
			actx, cancel := attemptCtx(ctx)
			defer cancel()
			f, cur, err := c.NodeApprovals(actx, node)
			if err != nil {
				return err
			}
			if err := edit(f); err != nil {
				return err
			}
			_, err = c.SetNodeApprovals(actx, node, f, cur.Hash)
			return err
		}()
		if !errors.Is(err, bridge.ErrStaleApprovals) || attempt == EditAttempts {
			return err
		}
	}
}
