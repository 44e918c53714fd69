package docker

import (
	"context"
	"fmt"

	"github.com/exechost/exechost/internal/sandbox"
)

func init() {
	sandbox.Register(sandbox.Driver{
		Name:         sandbox.BackendDocker,
		Section:      "docker",
		Summary:      "a Docker container per scope",
		Capabilities: sandbox.Capabilities{ResidentAgent: true},
		Auto:         10,
		Open:         sandbox.OpenAs(Open),
		Diagnose:     diagnose,
	})
}

// diagnose only pings the daemon and asks for the image: Open would also
// remove orphan containers, which may be a running gateway's.
func diagnose(ctx context.Context, cfg sandbox.Config, _ string) sandbox.Status {
	path := commandPath(cfg)
	s := sandbox.Status{Name: sandbox.BackendDocker, Commands: &path}
	cli, err := NewClient(cfg.Docker.Host)
	if err != nil {
		s.Detail = err.Error()
		return s
	}
	defer cli.Close()
	if err := Ping(ctx, cli); err != nil {
		s.Detail = err.Error()
		return s
	}
	if err := CheckImage(ctx, cli, cfg.Docker.Image); err != nil {
		s.Detail = err.Error()
		return s
	}
	s.Available = true
	s.Detail = fmt.Sprintf("daemon %s (API %s), image %s present", cli.DaemonHost(), cli.ClientVersion(), cfg.Docker.Image)
	s.Isolation = Describe(cfg)
	return s
}
