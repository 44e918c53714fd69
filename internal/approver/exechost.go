package approver

import (
	"context"
	"fmt"
	"sync"

	"github.com/exechost/exechost/internal/asksock"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
)

// maxEngines bounds the per-node engines one approver keeps; forwarding
// nodes beyond it share one engine named "node".
const maxEngines = 64

// EngineExecutor makes the approver an exec host (`exechost approver
// --exec-host`): commands a node runner forwards over the approval socket
// run through the same host.Engine every execution host uses, so the
// approver applies the same exec-approvals.json, prompts in its own UI when
// needed, and runs the command in its own session (DISPLAY,
// WAYLAND_DISPLAY, the session D-Bus, XDG_RUNTIME_DIR), which a headless
// node service lacks.
//
// It runs one host.Engine per forwarding node and implements
// asksock.Executor. It lives here, not in asksock, so the approval socket
// ranks below the execution host (internal/archtest).
type EngineExecutor struct {
	// NewEngine returns the engine for commands forwarded by nodeID (the
	// node's id, for prompts, events and the audit log). It is called once
	// per node id; an error is returned to that command and the next one
	// tries again. The engine must be the approver's: its Prompter is
	// asksock.BrokerPrompter on the approver's own queue, and its state
	// directory holds the exec-approvals.json that decides.
	NewEngine func(nodeID string) (*host.Engine, error)

	mu      sync.Mutex
	engines map[string]*host.Engine
}

// NewEngineExecutor returns an EngineExecutor whose engines host.New
// builds from base (state directory, audit log, warnings), one per
// forwarding node and named after it, asking through b, the approver's
// own queue. base's Host, NodeID, Prompter and Route are set here; the
// shared audit log stays open when an engine closes.
func NewEngineExecutor(base host.Options, b *prompt.Broker) *EngineExecutor {
	base.Host, base.Prompter, base.Route, base.CloseAudit = policy.HostNode, asksock.BrokerPrompter{Broker: b}, nil, false
	return &EngineExecutor{NewEngine: func(nodeID string) (*host.Engine, error) {
		o := base
		o.NodeID = nodeID
		return host.New(o)
	}}
}

func (x *EngineExecutor) engine(nodeID string) (*host.Engine, error) {
	if nodeID == "" {
		nodeID = "node"
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if e, ok := x.engines[nodeID]; ok {
		return e, nil
	}
	if x.engines == nil {
		x.engines = make(map[string]*host.Engine)
	}
	if len(x.engines) >= maxEngines {
		nodeID = "node"
		if e, ok := x.engines[nodeID]; ok {
			return e, nil
		}
	}
	e, err := x.NewEngine(nodeID)
	if err != nil {
		return nil, fmt.Errorf("exec host engine for node %q: %w", nodeID, err)
	}
	x.engines[nodeID] = e
	return e, nil
}

// Exec runs one forwarded system.run through the engine of the forwarding
// node. The engine refuses dangerous env names (policy.DangerousEnv) and
// applies the approvals; its denials come back as typed errors
// (host.DenialError) that bridge.AsError maps.
func (x *EngineExecutor) Exec(ctx context.Context, req bridge.SystemRunParams) (bridge.SystemRunResult, error) {
	e, err := x.engine(req.NodeID)
	if err != nil {
		return bridge.SystemRunResult{}, err
	}
	res, err := e.Run(ctx, host.RequestOf(req))
	if err != nil {
		return bridge.SystemRunResult{}, err
	}
	return res.Wire(), nil
}

var _ asksock.Executor = (*EngineExecutor)(nil)
