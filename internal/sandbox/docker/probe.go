package docker

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/exechost/exechost/internal/sandbox"
)

// probeTimeout bounds doctor's probe container, from create to removal.
const probeTimeout = time.Minute

// tmpfsOptions is how the backend mounts /tmp in its containers.
func tmpfsOptions(d Config) string { return "rw,nosuid,nodev,mode=1777,size=" + d.TmpfsSize }

// probeTmp asks a container made as the backend makes them (image, user,
// read-only root, the /tmp tmpfs, no capabilities, no network) whether the
// sandbox user can write /tmp. The tmpfs's mode=1777 does not decide it:
// Docker gives the mount the mode of the image's own /tmp, so an image
// whose /tmp is root's 0755 leaves it unwritable to a non-root user. The
// container carries no owner label (no gateway's orphan sweep is
// involved) and is removed before probeTmp returns.
func probeTmp(ctx context.Context, cli *Engine, cfg sandbox.Config) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	d := ConfigOf(cfg)
	cc := &containerConfig{
		Image: d.Image, User: d.User, Cmd: []string{"/bin/sh", "-c", "test -w /tmp"},
		Labels:          map[string]string{LabelSandbox: "1", LabelScope: "doctor"},
		NetworkDisabled: true,
		HostConfig: &hostConfig{
			NetworkMode: "none", ReadonlyRootfs: *d.ReadOnlyRoot, CapDrop: []string{"ALL"},
			SecurityOpt: []string{"no-new-privileges"}, Tmpfs: map[string]string{"/tmp": tmpfsOptions(d)},
		},
	}
	cc.HostConfig.RestartPolicy.Name = "no"
	id, err := cli.ContainerCreate(ctx, "", cc)
	if err != nil {
		return false, fmt.Errorf("create a probe container: %w", daemonError(err))
	}
	defer func() { _ = cli.ContainerRemove(context.WithoutCancel(ctx), id) }()
	if err := cli.ContainerStart(ctx, id); err != nil {
		return false, fmt.Errorf("start a probe container (the image needs %s): %w", imageNeeds, daemonError(err))
	}
	var res struct{ StatusCode int }
	if err := cli.do(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/wait", nil, nil, &res); err != nil {
		return false, fmt.Errorf("wait for the probe container: %w", daemonError(err))
	}
	return res.StatusCode == 0, nil
}
