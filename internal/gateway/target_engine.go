package gateway

import (
	"context"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/config"
)

// engineTarget is host=gateway: the gateway's own host engine
// (Options.Executor) runs the command under the gateway machine's
// exec-approvals.json. The engine records its runs in the audit log and
// reports their events through its OnEvent (Gateway.HostEvent).
type engineTarget struct{ g *Gateway }

func newEngineTarget(g *Gateway) target { return engineTarget{g} }

func (t engineTarget) place(_ *config.Config, x *execution) error {
	x.label = "gateway"
	return nil
}

func (t engineTarget) run(ctx context.Context, x *execution) (bridge.SystemRunResult, error) {
	if t.g.opts.Executor == nil {
		return bridge.SystemRunResult{}, unavailable("host=gateway is not available on this gateway")
	}
	hr, err := t.g.opts.Executor.Run(ctx, x.request())
	if err != nil {
		return bridge.SystemRunResult{}, bridge.AsError(err) // the same mapping every host uses
	}
	return hr.Wire(), nil
}

func (engineTarget) annotate(*audit.Record) {}
