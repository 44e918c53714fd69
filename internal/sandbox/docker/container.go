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

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/agent"
)

// keepalive is the container's main process: a shell that sleeps forever,
// reaping (through wait's waitpid(-1)) every orphan an exec leaves behind,
// and exits promptly on SIGTERM. Only /bin/sh and sleep are needed, so any
// image with a POSIX userland works.
var keepalive = []string{"/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"}

// containerName is stable per (owner, scope), so a second gateway on the
// same state directory collides loudly instead of creating a twin.
func (b *Backend) containerName(key string) string {
	return "exechost-" + b.owner + "-" + scopeHash(key)
}

func scopeHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// create creates and starts bx's container (agentbox.Funcs.Start): in
// agent mode with the agent as its main process (falling back for good to
// the keepalive shell and runc exec when that cannot work here), else with
// keepalive.
func (b *Backend) create(ctx context.Context, bx *box) (string, *agent.Conn, error) {
	workspace := bx.Workspace
	eg := b.egr.leases.Of(bx.Key)
	plan, agentErr := b.agent.get()
	if eg != nil && agentErr != nil {
		return "", nil, b.HoldsEgress()
	}
	if agentErr == nil {
		id, conn, err := b.createContainer(ctx, bx, workspace, &plan, eg)
		// An egress container has no way out but the agent's relay: it
		// never falls back to one without it.
		if err == nil || eg != nil || errors.Is(err, ErrDaemonUnreachable) || errors.Is(err, ErrImageMissing) || ctx.Err() != nil {
			return id, conn, err
		}
		b.agent.disable(fmt.Errorf("off: a container with the agent did not start here (%v); commands use docker exec", err))
	}
	return b.createContainer(ctx, bx, workspace, nil, nil)
}

// createContainer creates and starts a container for bx; with plan set,
// the agent is its main process and its Conn is returned. With eg set
// (and plan), the container has network none and the agent relays
// sandbox.EgressAddr to the egress socket (egress.go).
func (b *Backend) createContainer(ctx context.Context, bx *box, workspace string, plan *agentPlan, eg *sandbox.Egress) (string, *agent.Conn, error) {
	d := ConfigOf(b.cfg)
	if eg != nil {
		d.Network = "none"
	}
	hc := &hostConfig{
		// A structured mount, not a "src:dst:rw" bind string: a workspace
		// path with a colon in it cannot be misparsed.
		Mounts:         []mountSpec{{Type: "bind", Source: workspace, Target: sandbox.WorkspaceDir}},
		NetworkMode:    d.Network,
		ReadonlyRootfs: *d.ReadOnlyRoot,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		Tmpfs:          map[string]string{"/tmp": tmpfsOptions(d)},
	}
	hc.RestartPolicy.Name = "no"
	if mem, _ := sandbox.ParseSize(d.Memory); mem > 0 {
		hc.Memory = mem
		hc.MemorySwap = mem // no swap beyond the limit
	}
	if d.CPUs > 0 {
		hc.NanoCPUs = int64(math.Round(d.CPUs * 1e9))
	}
	if d.PidsLimit > 0 {
		p := d.PidsLimit
		hc.PidsLimit = &p
	}
	cfg := &containerConfig{
		Image:      d.Image,
		Cmd:        keepalive,
		User:       d.User,
		WorkingDir: sandbox.WorkspaceDir,
		Hostname:   "sandbox",
		Labels: map[string]string{
			LabelSandbox: "1",
			LabelOwner:   b.owner,
			LabelScope:   scopeHash(bx.Key),
			LabelAgent:   bx.Agent,
		},
		NetworkDisabled: d.Network == "none",
		HostConfig:      hc,
	}
	var ln *net.UnixListener
	if plan != nil {
		runDir, l, err := b.listenRun(bx.Key)
		if err == nil {
			ln = l
			defer func() {
				ln.Close()
				os.RemoveAll(runDir)
			}()
		}
		agentConfig(cfg, hc, *plan, runDir)
	}
	var egLn net.Listener
	if eg != nil {
		dir, l, err := b.listenEgress(eg)
		if err != nil {
			return "", nil, err
		}
		egLn = l
		hc.Mounts = append(hc.Mounts, mountSpec{Type: "bind", Source: dir, Target: egressMount, ReadOnly: true})
	}
	kept := false
	defer func() {
		if egLn != nil && !kept {
			sandbox.RemoveEgressDir(egLn)
		}
	}()
	name := b.containerName(bx.Key)
	// A container of that name can only be a leftover of this owner (a
	// forgotten box, a crash between create and start): replace it.
	_ = b.remove(ctx, name)
	id, err := b.cli.ContainerCreate(ctx, name, cfg)
	if err != nil {
		if isNotFound(err) {
			return "", nil, imageError(d.Image, err)
		}
		return "", nil, fmt.Errorf("create sandbox container %s: %w", name, daemonError(err))
	}
	if plan != nil {
		var opts []agent.Option
		if eg != nil {
			opts = append(opts, agent.WithEgressRelay(sandbox.EgressAddr, egressMount+"/"+egressSocket))
		}
		conn, err := b.attachAgent(ctx, id, name, ln, opts...)
		if err == nil && eg != nil && conn.Ready().Egress != sandbox.EgressAddr {
			conn.Close()
			err = fmt.Errorf("sandbox agent in %s: no egress relay on %s (it reported %q): is sandbox.agentBinary this exechost's version?", name, sandbox.EgressAddr, conn.Ready().Egress)
		}
		if err != nil {
			_ = b.remove(context.WithoutCancel(ctx), id)
			return "", nil, err
		}
		if egLn != nil {
			b.keepEgress(id, egLn)
			kept = true
		}
		return id, conn, nil
	}
	if err := b.cli.ContainerStart(ctx, id); err != nil {
		_ = b.remove(context.WithoutCancel(ctx), id)
		return "", nil, hint.Wrap(fmt.Errorf("start sandbox container %s: %w", name, daemonError(err)), fmt.Sprintf("the image needs %s", imageNeeds))
	}
	return id, nil, nil
}

// remove force-removes a container; a container that is already gone is
// not an error.
func (b *Backend) remove(ctx context.Context, id string) error {
	defer b.dropEgress(id)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err := b.cli.ContainerRemove(rctx, id)
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("remove sandbox container %s: %w", id, daemonError(err))
	}
	return nil
}

// RemoveOrphans removes every container labelled as owned by this state
// directory that this Backend does not use — what a crashed gateway left
// behind — and returns how many it removed. Open calls it.
func (b *Backend) RemoveOrphans(ctx context.Context) (int, error) {
	list, err := b.cli.ContainerList(ctx, LabelSandbox+"=1", LabelOwner+"="+b.owner)
	if err != nil {
		return 0, fmt.Errorf("list sandbox containers: %w", daemonError(err))
	}
	inUse := map[string]bool{}
	for _, id := range b.boxes.Handles() {
		inUse[id] = true
	}
	var errs []error
	n := 0
	for _, c := range list {
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
	return b.boxes.ReapIdle(ctx, now, b.idle)
}

// daemonError marks connection failures with ErrDaemonUnreachable so callers
// can tell "docker is down" from "docker refused".
func daemonError(err error) error {
	if errors.Is(err, errConnectionFailed) {
		return hint.Wrap(fmt.Errorf("%w: %w", ErrDaemonUnreachable, err), "start dockerd, or check sandbox.docker.host")
	}
	return err
}
