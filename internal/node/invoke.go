package node

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
)

// invokeMargin is added to a command's timeout for the node's own bound on
// handling an invoke (prompting included).
const invokeMargin = 5 * time.Second

// idemCache remembers system.run outcomes by idempotency key so a repeated
// request (a resend after a reconnect) gets the first run's result instead
// of running the command a second time.
type idemCache struct {
	mu    sync.Mutex
	max   int
	m     map[string]*idemEntry
	order []string
	// bytes is the payload size of the finished entries still holding
	// theirs, bounded by maxIdemBytes.
	bytes int
	// holding lists finished entries in the order they finished, oldest
	// first, so shedding payloads never walks the whole cache. Entries
	// that lost their payload meanwhile (evicted) are skipped when
	// reached, and dropped in a compaction once they are most of it.
	holding []*idemEntry
}

// maxIdemBytes bounds the result payloads the cache holds: 1,024 results
// of 200 KB of output each would otherwise keep 200 MB alive. Past it the
// oldest finished entries keep their key but lose their payload, so a late
// repeat is answered with an error rather than a second run.
const maxIdemBytes = 4 << 20

type idemEntry struct {
	key  string
	done chan struct{}
	res  bridge.InvokeResult
	// held says res (its Held bytes) still counts against maxIdemBytes.
	held bool
}

func newIdemCache(max int) *idemCache { return &idemCache{max: max, m: make(map[string]*idemEntry)} }

// begin returns the entry for key and whether the caller is the first (and
// must run the command and call finish).
func (c *idemCache) begin(key string) (*idemEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		return e, false
	}
	e := &idemEntry{key: key, done: make(chan struct{})}
	c.m[key] = e
	c.order = append(c.order, key)
	// Forget the oldest finished runs beyond max; never one in flight.
	for len(c.order) > c.max {
		evicted := false
		for i, k := range c.order {
			if old := c.m[k]; old == nil || isDone(old) {
				if old != nil && old.held {
					c.bytes -= old.res.Held()
					old.held = false // skipped when c.holding reaches it
				}
				delete(c.m, k)
				c.order = append(c.order[:i], c.order[i+1:]...)
				evicted = true
				break
			}
		}
		if !evicted {
			break
		}
	}
	return e, true
}

func isDone(e *idemEntry) bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

func (c *idemCache) finish(e *idemEntry, res bridge.InvokeResult) {
	c.mu.Lock()
	e.res, e.held = res, true
	c.bytes += res.Held()
	c.holding = append(c.holding, e)
	// Shed the oldest payloads (this one last) beyond the budget.
	for len(c.holding) > 0 && c.bytes > maxIdemBytes {
		old := c.holding[0]
		c.holding[0] = nil
		c.holding = c.holding[1:]
		if old.held {
			c.bytes -= old.res.Held()
			old.held = false
			old.res = fail(bridge.Errorf(bridge.CodeInternal, "system.run with idempotency key %q already ran; its result is no longer kept on this node (not running it again)", old.key))
		}
	}
	if len(c.holding) > 2*c.max+16 { // mostly evicted entries: compact
		kept := make([]*idemEntry, 0, len(c.holding)/2)
		for _, h := range c.holding {
			if h.held {
				kept = append(kept, h)
			}
		}
		c.holding = kept
	}
	c.mu.Unlock()
	close(e.done)
}

func (c *Client) handleInvoke(ctx context.Context, req bridge.InvokeRequest) {
	ctx, done := c.cancels.start(ctx, req.ID)
	defer done()
	nid := c.NodeID()
	timeout := time.Duration(req.TimeoutMs)*time.Millisecond + invokeMargin
	if req.TimeoutMs <= 0 {
		timeout = 30 * time.Minute
	}
	var res bridge.InvokeResult
	release := func() {} // a system.run's admission slot (admission.go)
	defer func() { release() }()
	switch {
	case req.NodeID != "" && req.NodeID != nid:
		res = fail(bridge.Errorf(bridge.CodeInvalidRequest, "invoke addressed to node %s, this is %s", req.NodeID, nid))
	case req.Command == bridge.CmdSystemRun:
		var busy *bridge.Error
		if release, busy = c.admitRun(); busy != nil {
			c.auditBusy(req.Params, busy)
			res = fail(busy)
			break
		}
		key := req.IdempotencyKey
		if key == "" {
			key = req.ID
		}
		e, first := c.idem.begin(key)
		if first {
			rctx, cancel := context.WithTimeout(ctx, timeout)
			res = c.systemRun(rctx, req.Params, req.TimeoutMs)
			cancel()
			c.idem.finish(e, res)
		} else {
			c.log.Info("repeated system.run answered from the first run", "idempotencyKey", key)
			t := time.NewTimer(timeout)
			select {
			case <-e.done:
				c.idem.mu.Lock()
				res = e.res
				c.idem.mu.Unlock()
			case <-t.C:
				res = fail(bridge.Errorf(bridge.CodeTimeout, "the first run with idempotency key %q is still going", key))
			case <-ctx.Done():
				t.Stop()
				return
			}
			t.Stop()
		}
	case req.Command == bridge.CmdSystemWhich:
		res = c.which(req.Params)
	case req.Command == bridge.CmdExecApprovalsGet:
		res = c.approvalsGet()
	case req.Command == bridge.CmdExecApprovalsSet:
		res = c.approvalsSet(ctx, req.Params)
	default:
		res = fail(bridge.Errorf(bridge.CodeNotFound, "unknown node command %q (this node offers %v)", req.Command, bridge.NodeCommands))
	}
	release() // free before the reply: whoever hears the run ended may start the next
	res.ID, res.NodeID = req.ID, nid
	c.reply(res)
}

func fail(e *bridge.Error) bridge.InvokeResult { return bridge.InvokeResult{OK: false, Error: e} }

func ok(v any) bridge.InvokeResult {
	res, err := bridge.InvokeOK(v) // a system.run result is written once, into the reply's frame
	if err != nil {
		return fail(bridge.Errorf(bridge.CodeInternal, "encode result: %v", err))
	}
	return res
}

// systemRun runs one command through the local engine, which enforces
// this node's exec-approvals.json. Denials answer with the design's
// SYSTEM_RUN_* message.
func (c *Client) systemRun(ctx context.Context, params json.RawMessage, timeoutMs int64) bridge.InvokeResult {
	var p bridge.SystemRunParams
	if err := bridge.Unmarshal(params, &p); err != nil {
		return fail(bridge.Errorf(bridge.CodeInvalidRequest, "bad system.run params: %v", err))
	}
	req := host.RequestOf(p)
	if req.TimeoutMs <= 0 {
		req.TimeoutMs = timeoutMs
	}
	if c.opts.Executor == nil {
		return fail(&bridge.Error{Code: bridge.CodeDenied, Message: policy.ErrDisabled.Error() + " (no execution engine on this node)",
			Denial: &bridge.Denial{Reason: bridge.DenialReason(policy.ErrDisabled)}})
	}
	hr, err := c.opts.Executor.Run(ctx, req)
	if err != nil {
		return fail(bridge.AsError(err)) // the same mapping every host uses
	}
	return ok(hr.Wire())
}

func (c *Client) which(params json.RawMessage) bridge.InvokeResult {
	var p bridge.WhichParams
	if err := bridge.Unmarshal(params, &p); err != nil {
		return fail(bridge.Errorf(bridge.CodeInvalidRequest, "bad system.which params: %v", err))
	}
	out := bridge.WhichResult{Bins: map[string]string{}}
	for _, b := range p.Bins {
		if path, err := exec.LookPath(b); err == nil {
			out.Bins[b] = path
		}
	}
	return ok(out)
}

func (c *Client) approvalsGet() bridge.InvokeResult {
	st := approvals.NewStore(c.opts.StateDir)
	f, err := st.Load()
	if err != nil {
		return fail(bridge.Errorf(bridge.CodeInternal, "%w", err))
	}
	data, err := f.Redacted().Marshal()
	if err != nil {
		return fail(bridge.Errorf(bridge.CodeInternal, "encode approvals: %v", err))
	}
	_, statErr := os.Stat(st.Path)
	return ok(bridge.ApprovalsGetResult{Path: st.Path, Exists: statErr == nil, Hash: f.Hash(), File: data})
}

// approvalsSet replaces the node's approvals file with the one sent, if
// the file is still what the editor saw (baseHash). The socket section
// (path and token) always stays the node's own: a remote editor must not
// be able to redirect prompts to another socket or learn the key. The
// gateway may only tighten: a file that allows more than the node's is
// written only with the node's consent (Options.AllowRemoteWidening, or
// this machine's approver confirming it), else refused FORBIDDEN naming
// each widening and how to apply it.
func (c *Client) approvalsSet(ctx context.Context, params json.RawMessage) bridge.InvokeResult {
	var p bridge.ApprovalsSetParams
	if err := bridge.Unmarshal(params, &p); err != nil {
		return fail(bridge.Errorf(bridge.CodeInvalidRequest, "bad system.execApprovals.set params: %v", err))
	}
	if p.BaseHash == "" {
		return fail(bridge.Errorf(bridge.CodeInvalidRequest, "baseHash is required"))
	}
	st := approvals.NewStore(c.opts.StateDir)
	next, err := approvals.Parse("(sent file)", p.File)
	if err != nil {
		return fail(bridge.Errorf(bridge.CodeInvalidRequest, "%w", err))
	}
	consent := approvals.RemoteConsent(ctx, c.opts.AllowRemoteWidening, c.opts.ConfirmWidening, "the gateway", c.NodeID())
	f, err := st.ReplaceRemote(p.BaseHash, next, consent)
	switch {
	case errors.Is(err, approvals.ErrStale):
		return fail(bridge.Errorf(bridge.CodeStale, "%w", err))
	case errors.Is(err, approvals.ErrWidening):
		c.log.Warn("refused a remote approvals change that widens this node's policy", "err", err)
		return fail(bridge.Errorf(bridge.CodeForbidden, "%w", err))
	case err != nil:
		return fail(bridge.Errorf(bridge.CodeInternal, "%w", err))
	}
	data, err := f.Redacted().Marshal()
	if err != nil {
		return fail(bridge.Errorf(bridge.CodeInternal, "encode approvals: %v", err))
	}
	return ok(bridge.ApprovalsGetResult{Path: st.Path, Exists: true, Hash: f.Hash(), File: data})
}
