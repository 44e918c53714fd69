package docker

import (
	"context"
	"fmt"

	"github.com/exechost/exechost/internal/sandbox"
)

func init() {
	sandbox.Register(sandbox.Driver{
		Name:         Name,
		Config:       section,
		Summary:      "a Docker container per scope",
		Capabilities: sandbox.Capabilities{ResidentAgent: true},
		Auto:         10,
		Open:         sandbox.OpenAs(Open),
		Diagnose:     diagnose,
	})
}

// diagnose only pings the daemon and asks for the image: Open would also
// remove orphan containers, which may be a running gateway's.
func diagnose(ctx context.Context, cfg sandbox.Config, _ string) (sandbox.Found, error) {
	path := commandPath(cfg)
	cli, err := NewClient(ConfigOf(cfg).Host)
	if err != nil {
		return sandbox.Found{Commands: &path}, err
	}
	defer cli.Close()
	if err := Ping(ctx, cli); err != nil {
		return sandbox.Found{Commands: &path}, err
	}
	if err := CheckImage(ctx, cli, ConfigOf(cfg).Image); err != nil {
		return sandbox.Found{Commands: &path}, err
	}
	return sandbox.Found{
		Detail:    fmt.Sprintf("daemon %s (API %s), image %s present", cli.DaemonHost(), cli.ClientVersion(), ConfigOf(cfg).Image),
		Isolation: Describe(cfg),
		Commands:  &path,
	}, nil
}
