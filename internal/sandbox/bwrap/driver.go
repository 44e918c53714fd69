package bwrap

import (
	"context"

	"github.com/exechost/exechost/internal/sandbox"
)

func init() {
	sandbox.Register(sandbox.Driver{
		Name:         Name,
		Config:       section,
		Summary:      "fresh Linux namespaces via bubblewrap",
		Capabilities: sandbox.Capabilities{ResidentAgent: true, Daemonless: true},
		Auto:         20,
		Open:         sandbox.OpenAs(Open),
		Diagnose:     diagnose,
	})
}

// diagnose runs the probe sandbox Open runs, and ends it.
func diagnose(ctx context.Context, cfg sandbox.Config, stateDir string) (sandbox.Found, error) {
	b, err := Open(ctx, cfg, stateDir)
	if err != nil {
		return sandbox.Found{}, err
	}
	defer b.Close(ctx)
	path := b.CommandPath()
	return sandbox.Found{Detail: "bubblewrap " + b.BwrapPath(), Isolation: b.Isolation(), Commands: &path}, nil
}
