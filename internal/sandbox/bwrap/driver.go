package bwrap

import (
	"context"

	"github.com/exechost/exechost/internal/sandbox"
)

func init() {
	sandbox.Register(sandbox.Driver{
		Name:         sandbox.BackendBwrap,
		Section:      "bwrap",
		Summary:      "fresh Linux namespaces via bubblewrap",
		Capabilities: sandbox.Capabilities{ResidentAgent: true, Daemonless: true},
		Auto:         20,
		Open:         sandbox.OpenAs(Open),
		Diagnose:     diagnose,
	})
}

// diagnose runs the probe sandbox Open runs, and ends it.
func diagnose(ctx context.Context, cfg sandbox.Config, stateDir string) sandbox.Status {
	s := sandbox.Status{Name: sandbox.BackendBwrap}
	b, err := Open(ctx, cfg, stateDir)
	if err != nil {
		s.Detail = err.Error()
		return s
	}
	defer b.Close(ctx)
	s.Available = true
	s.Detail = "bubblewrap " + b.BwrapPath()
	s.Isolation = b.Isolation()
	path := b.CommandPath()
	s.Commands = &path
	return s
}
