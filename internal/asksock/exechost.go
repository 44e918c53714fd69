package asksock

import (
	"context"
	"sync"

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
// It runs one host.Engine per forwarding node and implements Executor.
type EngineExecutor struct {
	// NewEngine returns the engine for commands forwarded by nodeID (the
	// node's id, for prompts, events and the audit log). It is called once
	// per node id. The engine must be the approver's: its Prompter is
	// BrokerPrompter on the approver's own queue, and its state
	// directory holds the exec-approvals.json that decides.
	NewEngine func(nodeID string) *host.Engine

	mu      sync.Mutex
	engines map[string]*host.Engine
}

// NewEngineExecutor returns an EngineExecutor whose engines use
// stateDir's exec-approvals.json and ask through b, the approver's own queue. configure, when not nil,
// finishes each engine (audit log, events).
func NewEngineExecutor(stateDir string, b *prompt.Broker, configure func(*host.Engine)) *EngineExecutor {
	return &EngineExecutor{NewEngine: func(nodeID string) *host.Engine {
		e := host.NewEngine(stateDir, policy.HostNode, nodeID)
		e.Prompter = BrokerPrompter{Broker: b}
		if configure != nil {
			configure(e)
		}
		return e
	}}
}

func (x *EngineExecutor) engine(nodeID string) *host.Engine {
	if nodeID == "" {
		nodeID = "node"
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if e, ok := x.engines[nodeID]; ok {
		return e
	}
	if x.engines == nil {
		x.engines = make(map[string]*host.Engine)
	}
	if len(x.engines) >= maxEngines {
		nodeID = "node"
		if e, ok := x.engines[nodeID]; ok {
			return e
		}
	}
	e := x.NewEngine(nodeID)
	x.engines[nodeID] = e
	return e
}

// Exec runs one forwarded system.run through the engine of the forwarding
// node. The engine refuses dangerous env names (policy.DangerousEnv) and
// applies the approvals; its denials come back as typed errors
// (host.DenialError) that bridge.AsError maps.
func (x *EngineExecutor) Exec(ctx context.Context, req bridge.SystemRunParams) (bridge.SystemRunResult, error) {
	res, err := x.engine(req.NodeID).Run(ctx, host.RequestOf(req))
	if err != nil {
		return bridge.SystemRunResult{}, err
	}
	return res.Wire(), nil
}
