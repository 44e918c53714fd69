package docker

import (
	"context"
	"fmt"
	"strings"

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
	iso := Describe(cfg)
	// What the isolation lines say of /tmp is checked in a probe
	// container: the image, not the configuration, decides it.
	writable, err := probeTmp(ctx, cli, cfg)
	if err != nil {
		return sandbox.Found{Commands: &path}, err
	}
	if !writable {
		iso = tmpNotWritable(iso, ConfigOf(cfg))
	}
	return sandbox.Found{
		Detail:    fmt.Sprintf("daemon %s (API %s), image %s present", cli.DaemonHost(), cli.ClientVersion(), ConfigOf(cfg).Image),
		Isolation: iso,
		Commands:  &path,
	}, nil
}

// tmpNotWritable rewrites the root filesystem line of iso for an image
// whose /tmp the sandbox user cannot write, with the fix.
func tmpNotWritable(iso []string, d Config) []string {
	out := make([]string, 0, len(iso))
	for _, l := range iso {
		if strings.HasPrefix(l, "root filesystem:") {
			ro := "read-only"
			if !*d.ReadOnlyRoot {
				ro = "writable (sandbox.docker.readOnlyRoot=false)"
			}
			l = fmt.Sprintf("root filesystem: %s; writable /workspace; /tmp is NOT writable by user %s: Docker gives the tmpfs the mode of the image's /tmp (checked in a probe container); commands that write temporary files fail there (fix: make /tmp mode 1777 in %s, or set TMPDIR=/workspace)", ro, d.User, d.Image)
		}
		out = append(out, l)
	}
	return out
}
