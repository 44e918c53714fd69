package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/agent"
)

// keepalive is the container's main process: a shell that sleeps forever,
// reaping (through wait's waitpid(-1)) every orphan an exec leaves behind,
// and exits promptly on SIGTERM. Only /bin/sh and sleep are needed, so any
// image with a POSIX userland works.
var keepalive = []string{"/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"}

// acquire returns key's box, counting one more command in flight so the
// idle reaper leaves it alone.
func (b *Backend) acquire(key, agent string) (*box, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	bx := b.boxes[key]
	if bx == nil {
		bx = &box{key: key, agent: agent}
		b.boxes[key] = bx
	}
	bx.inflight++
	return bx, nil
}

func (b *Backend) release(bx *box) {
	b.mu.Lock()
	defer b.mu.Unlock()
	bx.inflight--
	bx.lastUsed = time.Now()
}

// ensure returns bx's running container and, in agent mode, its agent,
// creating and starting the container first when there is none or its
// agent died.
func (b *Backend) ensure(ctx context.Context, bx *box, workspace string) (string, *agent.Conn, error) {
	bx.mu.Lock()
	defer bx.mu.Unlock()
	if bx.id != "" && (bx.conn == nil || bx.conn.Err() == nil) {
		return bx.id, bx.conn, nil
	}
	if bx.id != "" {
		// The agent died: its container goes with it.
		_ = b.remove(ctx, bx.id)
		bx.id, bx.conn = "", nil
	}
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		// Close already removed every container; one created now would
		// be nobody's to remove.
		return "", nil, ErrClosed
	}
	id, conn, err := b.create(ctx, bx, workspace)
	if err != nil {
		return "", nil, err
	}
	bx.id, bx.conn = id, conn
	return id, conn, nil
}

// forget drops bx's container (if it is still id) and removes it, so the
// next ensure creates a fresh one.
func (b *Backend) forget(ctx context.Context, bx *box, id string) {
	bx.mu.Lock()
	var conn *agent.Conn
	if bx.id == id {
		bx.id, conn, bx.conn = "", bx.conn, nil
	}
	bx.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
	_ = b.remove(ctx, id)
}

// containerName is stable per (owner, scope), so a second gateway on the
// same state directory collides loudly instead of creating a twin.
func (b *Backend) containerName(key string) string {
	return "exechost-" + b.owner + "-" + scopeHash(key)
}

func scopeHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// create creates and starts bx's container: in agent mode with the agent
// as its main process (falling back for good to the keepalive shell and
// runc exec when that cannot work here), else with keepalive.
func (b *Backend) create(ctx context.Context, bx *box, workspace string) (string, *agent.Conn, error) {
	bin, agentErr := b.agent.get()
	if agentErr == nil {
		id, conn, err := b.createContainer(ctx, bx, workspace, bin)
		if err == nil || errors.Is(err, ErrDaemonUnreachable) || errors.Is(err, ErrImageMissing) || ctx.Err() != nil {
			return id, conn, err
		}
		b.agent.disable(fmt.Errorf("off: a container with the agent did not start here (%v); commands use docker exec", err))
	}
	return b.createContainer(ctx, bx, workspace, "")
}

// createContainer creates and starts a container for bx; with agentBin
// set, the agent is its main process and its Conn is returned.
func (b *Backend) createContainer(ctx context.Context, bx *box, workspace, agentBin string) (string, *agent.Conn, error) {
	d := b.cfg.Docker
	hc := &container.HostConfig{
		// A structured mount, not a "src:dst:rw" bind string: a workspace
		// path with a colon in it cannot be misparsed.
		Mounts:         []mount.Mount{{Type: mount.TypeBind, Source: workspace, Target: sandbox.WorkspaceDir}},
		NetworkMode:    container.NetworkMode(d.Network),
		ReadonlyRootfs: *d.ReadOnlyRoot,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		Tmpfs:          map[string]string{"/tmp": "rw,nosuid,nodev,mode=1777,size=" + d.TmpfsSize},
		RestartPolicy:  container.RestartPolicy{Name: container.RestartPolicyDisabled},
	}
	if mem, _ := sandbox.ParseSize(d.Memory); mem > 0 {
		hc.Resources.Memory = mem
		hc.Resources.MemorySwap = mem // no swap beyond the limit
	}
	if d.CPUs > 0 {
		hc.Resources.NanoCPUs = int64(math.Round(d.CPUs * 1e9))
	}
	if d.PidsLimit > 0 {
		p := d.PidsLimit
		hc.Resources.PidsLimit = &p
	}
	cfg := &container.Config{
		Image:      d.Image,
		Cmd:        keepalive,
		User:       d.User,
		WorkingDir: sandbox.WorkspaceDir,
		Hostname:   "sandbox",
		Labels: map[string]string{
			LabelSandbox: "1",
			LabelOwner:   b.owner,
			LabelScope:   scopeHash(bx.key),
			LabelAgent:   bx.agent,
		},
		NetworkDisabled: d.Network == "none",
	}
	var ln *net.UnixListener
	if agentBin != "" {
		runDir, l, err := b.listenRun(bx.key)
		if err == nil {
			ln = l
			defer func() {
				ln.Close()
				os.RemoveAll(runDir)
			}()
		}
		agentConfig(cfg, hc, agentBin, runDir)
	}
	name := b.containerName(bx.key)
	// A container of that name can only be a leftover of this owner (a
	// forgotten box, a crash between create and start): replace it.
	_ = b.remove(ctx, name)
	res, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: cfg, HostConfig: hc, Name: name})
	if err != nil {
		if isNotFound(err) {
			return "", nil, imageError(d.Image, err)
		}
		return "", nil, fmt.Errorf("create sandbox container %s: %w", name, daemonError(err))
	}
	if agentBin != "" {
		conn, err := b.attachAgent(ctx, res.ID, name, ln)
		if err != nil {
			_ = b.remove(context.WithoutCancel(ctx), res.ID)
			return "", nil, err
		}
		return res.ID, conn, nil
	}
	if _, err := b.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		_ = b.remove(context.WithoutCancel(ctx), res.ID)
		return "", nil, fmt.Errorf("start sandbox container %s: %w (hint: the image needs /bin/sh and sleep)", name, daemonError(err))
	}
	return res.ID, nil, nil
}

// remove force-removes a container; a container that is already gone is
// not an error.
func (b *Backend) remove(ctx context.Context, id string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_, err := b.cli.ContainerRemove(rctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("remove sandbox container %s: %w", id, daemonError(err))
	}
	return nil
}

// RemoveOrphans removes every container labelled as owned by this state
// directory that this Backend does not use — what a crashed gateway left
// behind — and returns how many it removed. Open calls it.
func (b *Backend) RemoveOrphans(ctx context.Context) (int, error) {
	f := client.Filters{}.Add("label", LabelSandbox+"=1", LabelOwner+"="+b.owner)
	list, err := b.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return 0, fmt.Errorf("list sandbox containers: %w", daemonError(err))
	}
	inUse := map[string]bool{}
	b.mu.Lock()
	for _, bx := range b.boxes {
		bx.mu.Lock()
		inUse[bx.id] = true
		bx.mu.Unlock()
	}
	b.mu.Unlock()
	var errs []error
	n := 0
	for _, c := range list.Items {
		if inUse[c.ID] {
			continue
		}
		if err := b.remove(ctx, c.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// reapLoop removes idle containers until ctx ends.
func (b *Backend) reapLoop(ctx context.Context) {
	defer close(b.reaperDone)
	sandbox.IdleSweep(ctx, b.idle, func(now time.Time) { b.reapIdle(ctx, now) })
}

// reapIdle removes the containers of boxes with nothing in flight that were
// last used more than the idle timeout before now, and returns how many.
func (b *Backend) reapIdle(ctx context.Context, now time.Time) int {
	var victims []*box
	b.mu.Lock()
	for key, bx := range b.boxes {
		if bx.inflight == 0 && now.Sub(bx.lastUsed) > b.idle {
			delete(b.boxes, key)
			victims = append(victims, bx)
		}
	}
	b.mu.Unlock()
	n := 0
	for _, bx := range victims {
		bx.mu.Lock()
		id, conn := bx.id, bx.conn
		bx.id, bx.conn = "", nil
		bx.mu.Unlock()
		if conn != nil {
			conn.Close()
		}
		if id != "" && b.remove(ctx, id) == nil {
			n++
		}
	}
	return n
}

func isNotFound(err error) bool { return cerrdefs.IsNotFound(err) }

// daemonError marks connection failures with ErrDaemonUnreachable so callers
// can tell "docker is down" from "docker refused".
func daemonError(err error) error {
	if client.IsErrConnectionFailed(err) {
		return fmt.Errorf("%w: %w (hint: start dockerd, or check sandbox.docker.host)", ErrDaemonUnreachable, err)
	}
	return err
}
