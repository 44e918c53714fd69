package gateway

import (
	"context"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/config"
)

// nodeTarget is host=node: the command goes to the selected node as
// node.invoke system.run (invoke.go). The node's engine records the run
// and sends its events as node.event frames ahead of the result
// (Gateway.nodeEvent); a denial arrives with the node's structured
// bridge.Denial, which names the level of its policy that decided, so the
// gateway never asks the node anything afterwards.
type nodeTarget struct{ g *Gateway }

func newNodeTarget(g *Gateway) target { return nodeTarget{g} }

func (t nodeTarget) place(cfg *config.Config, x *execution) error {
	nc, err := t.g.pickNode(cfg, x.key.Agent, x.eff.Node)
	if err != nil {
		return err
	}
	x.nc, x.label, x.run.nodeID = nc, nc.id, nc.id
	return nil
}

func (t nodeTarget) run(ctx context.Context, x *execution) (bridge.SystemRunResult, error) {
	idem := x.p.IdempotencyKey
	if idem == "" {
		idem = x.run.id
	}
	return t.g.invokeRun(ctx, x.nc, x.request(), x.timeout, idem)
}

func (nodeTarget) annotate(*audit.Record) {}
