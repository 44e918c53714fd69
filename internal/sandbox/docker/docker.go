// Package docker is the Docker sandbox backend: each scope (session, agent
// or everyone) gets one long-lived container, created on first use with safe
// defaults (no network, read-only root, no capabilities, no-new-privileges,
// resource limits, an unprivileged user) and commands run in it through the
// Engine API's exec endpoints — never through the docker CLI, which costs a
// process start per command and parses its own flags.
//
// Containers carry labels (exechost.sandbox=1, exechost.owner=<hash of the
// state directory>) so a gateway that crashed leaves nothing behind for
// long: the next Open removes every container the same state directory owns.
package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/agent"
	"github.com/exechost/exechost/internal/sandbox/agentbox"
)

// Errors a caller can test for with errors.Is. Each is wrapped with what
// failed and a hint saying what to do.
var (
	// ErrDaemonUnreachable means the Engine API did not answer.
	ErrDaemonUnreachable = errors.New("docker daemon unreachable")
	// ErrImageMissing means the configured image is not present locally.
	ErrImageMissing = errors.New("sandbox image missing")
	// ErrContainerDied means the scope's container stopped and could not
	// be recreated.
	ErrContainerDied = errors.New("sandbox container died")
	// ErrClosed is returned by Exec after Close.
	ErrClosed = errors.New("docker sandbox closed")
)

// Label keys put on every container this backend creates.
const (
	LabelSandbox = "exechost.sandbox"
	LabelOwner   = "exechost.owner"
	LabelScope   = "exechost.scope"
	LabelAgent   = "exechost.agent"
)

// Backend runs commands in per-scope Docker containers. It is safe for
// concurrent use.
type Backend struct {
	cli      *Engine
	cfg      sandbox.Config
	stateDir string
	owner    string
	idle     time.Duration

	// boxes holds one container per scope; the handle is its id.
	boxes *agentbox.Set[string]

	stopReaper context.CancelFunc
	reaperDone chan struct{}

	agent agentState
	egr   egressState

	closeOnce sync.Once
}

// box is one scope's container: its handle is the container id, and its
// connection the container's agent (nil in exec mode).
type box = agentbox.Box[string]

var _ sandbox.Backend = (*Backend)(nil)

// Open connects to the daemon named by ConfigOf(cfg).Host (or $DOCKER_HOST),
// checks that it answers and that the image exists, and removes containers
// a previous gateway with the same state directory left behind. cfg is
// completed with defaults first.
func Open(ctx context.Context, cfg sandbox.Config, stateDir string) (*Backend, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cli, err := NewClient(ConfigOf(cfg).Host)
	if err != nil {
		return nil, err
	}
	if err := Ping(ctx, cli); err != nil {
		cli.Close()
		return nil, err
	}
	if err := CheckImage(ctx, cli, ConfigOf(cfg).Image); err != nil {
		cli.Close()
		return nil, err
	}
	b := &Backend{
		cli:      cli,
		cfg:      cfg,
		stateDir: stateDir,
		owner:    OwnerID(stateDir),
		idle:     time.Duration(cfg.IdleTimeout),
	}
	b.boxes = agentbox.New(agentbox.Funcs[string]{Start: b.create, Stop: b.remove, Fail: agentFailure}, ErrClosed)
	switch {
	case cfg.Agent == sandbox.AgentOff:
		b.agent.err = errAgentOff
	default:
		b.agent.plan.bin, b.agent.plan.rt, b.agent.err = agentBinary(cfg)
	}
	if _, err := b.RemoveOrphans(ctx); err != nil {
		cli.Close()
		return nil, err
	}
	// The egress sockets of the containers just removed.
	_ = os.RemoveAll(filepath.Join(stateDir, egressDirName))
	rctx, cancel := context.WithCancel(context.Background())
	b.stopReaper, b.reaperDone = cancel, make(chan struct{})
	go b.reapLoop(rctx)
	return b, nil
}

// agentBinary returns the agent binary for cfg (sandbox.agentBinary, or
// this executable) and, when it is dynamically linked, the loader and
// libraries to carry into the container with it; or why it cannot run in
// a container. The image may have no C library at all, so a dynamic binary
// never uses the image's.
func agentBinary(cfg sandbox.Config) (string, *runtimeLibs, error) {
	bin := cfg.AgentBinary
	if bin == "" {
		self, err := os.Executable()
		if err != nil {
			return "", nil, fmt.Errorf("off: locate the exechost binary: %w", err)
		}
		bin = self
	}
	if runtime.GOOS != "linux" {
		return "", nil, fmt.Errorf("off: the agent binary must be a Linux executable; this gateway runs on %s (set sandbox.agentBinary to a Linux build)", runtime.GOOS)
	}
	if err := agent.CheckStatic(bin); err == nil {
		return bin, nil, nil
	}
	rt, err := resolveRuntime(bin)
	switch {
	case errors.Is(err, errStatic):
		return bin, nil, nil
	case err != nil:
		return "", nil, hint.Wrap(fmt.Errorf("off: %w", err), "build exechost with CGO_ENABLED=0, or set sandbox.agentBinary to such a build")
	}
	return bin, rt, nil
}

// NewClient returns an Engine API client for host (empty: $DOCKER_HOST or
// the default socket); Ping negotiates the API version with the daemon.
func NewClient(host string) (*Engine, error) {
	cli, err := newEngine(host)
	if err != nil {
		return nil, fmt.Errorf("docker client for %q: %w", host, err)
	}
	return cli, nil
}

// Ping checks that the daemon answers, wrapping ErrDaemonUnreachable with a
// hint when it does not.
func Ping(ctx context.Context, cli *Engine) error {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := cli.Ping(pctx); err != nil {
		return hint.Wrap(fmt.Errorf("%w at %s: %v", ErrDaemonUnreachable, cli.DaemonHost(), err), "start dockerd, or set sandbox.docker.host; `exechost sandbox doctor` shows what works here")
	}
	return nil
}

// CheckImage returns ErrImageMissing, with how to get the image, when image
// is not present on the daemon.
func CheckImage(ctx context.Context, cli *Engine, image string) error {
	if err := cli.ImageInspect(ctx, image); err != nil {
		return imageError(image, err)
	}
	return nil
}

// imageNeeds is what an image must hold for every path of this backend:
// shell text runs under /bin/sh; without the agent the container's main
// process sleeps, and a timed-out command's processes are found in /proc
// with tr and grep (nothing is written into the container, so /tmp may be
// read-only or not the sandbox user's).
const imageNeeds = "/bin/sh and a POSIX userland — busybox, or coreutils and grep (without the resident agent, commands need sleep, and timeouts need tr and grep to kill the command)"

func imageError(image string, err error) error {
	if isNotFound(err) {
		return hint.Wrap(fmt.Errorf("%w: %s", ErrImageMissing, image), fmt.Sprintf("`docker pull %s`, or build an image with %s and tag it %s; or set sandbox.docker.image", image, imageNeeds, image))
	}
	return fmt.Errorf("inspect sandbox image %s: %w", image, daemonError(err))
}

// OwnerID is the owner label value of containers created for stateDir: a
// short hash, so two gateways with different state directories on one
// daemon never remove each other's containers.
func OwnerID(stateDir string) string {
	sum := sha256.Sum256([]byte(stateDir))
	return hex.EncodeToString(sum[:6])
}

// Name identifies the backend.
func (b *Backend) Name() string { return Name }

// Isolation describes the boundary this backend's containers get, for
// `exechost sandbox doctor`.
func (b *Backend) Isolation() []string {
	// Agent mode may have been turned off after a failed start.
	return describe(b.cfg, b.CommandPath())
}

// CommandPath says how this backend runs commands now: through resident
// agents, or docker exec once agent mode was turned off (see agentState).
func (b *Backend) CommandPath() sandbox.CommandPath {
	plan, err := b.agent.get()
	return pathOf(plan, err)
}

// commandPath says how a backend opened with cfg would run commands.
func commandPath(cfg sandbox.Config) sandbox.CommandPath {
	cfg = cfg.WithDefaults()
	if cfg.Agent == sandbox.AgentOff {
		return pathOf(agentPlan{}, errAgentOff)
	}
	bin, rt, err := agentBinary(cfg)
	return pathOf(agentPlan{bin: bin, rt: rt}, err)
}

// errAgentOff is why there is no agent with sandbox.agent=off.
var errAgentOff = errors.New("off (sandbox.agent=off)")

func pathOf(plan agentPlan, err error) sandbox.CommandPath {
	switch {
	case err != nil:
		return sandbox.CommandPath{Mode: sandbox.PathPerCommand, Reason: "docker exec per command (~50 ms each); resident agent " + err.Error()}
	case plan.rt != nil:
		return sandbox.CommandPath{Mode: sandbox.PathAgent, Binary: sandbox.BinaryCarriedLoader, Reason: fmt.Sprintf("forked by the exechost binary as the container's main process; it is dynamically linked, so its loader and %s are mounted read-only beside it (%s)", plural(len(plan.rt.Libs), "library", "libraries"), libMount)}
	default:
		return sandbox.CommandPath{Mode: sandbox.PathAgent, Binary: sandbox.BinaryStatic, Reason: "forked by the exechost binary (statically linked, mounted read-only) as the container's main process"}
	}
}

// Describe lists, in words, the isolation containers created from cfg get.
func Describe(cfg sandbox.Config) []string {
	return describe(cfg, commandPath(cfg))
}

func describe(cfg sandbox.Config, p sandbox.CommandPath) []string {
	cfg = cfg.WithDefaults()
	d := ConfigOf(cfg)
	out := []string{
		"container per " + string(cfg.Scope) + " from image " + d.Image + ", removed after " + time.Duration(cfg.IdleTimeout).String() + " idle",
		"network: " + d.Network + "; a run whose policy lists egress names gets a container of its own with network none and the resident agent's relay to exechost's egress proxy (" + sandbox.EgressAddr + ")",
		"user: " + d.User,
		"capabilities: all dropped; no-new-privileges",
	}
	out = append(out, "commands: "+p.String())
	if p.Mode == sandbox.PathAgent {
		out = append(out, "timeouts: the agent kills the command's process tree")
	} else {
		out = append(out, "timeouts: a second docker exec kills the process groups of the command's processes, found in /proc by a marker in their environment (the image needs tr and grep; nothing is written into it)")
	}
	if *d.ReadOnlyRoot {
		out = append(out, "root filesystem: read-only; writable /workspace and tmpfs /tmp")
	} else {
		out = append(out, "root filesystem: writable (sandbox.docker.readOnlyRoot=false)")
	}
	out = append(out, fmt.Sprintf("limits: memory %s, cpus %g, pids %d", d.Memory, d.CPUs, d.PidsLimit))
	return out
}

// Close removes every container this backend created and stops the idle
// reaper. Exec fails with ErrClosed afterwards.
func (b *Backend) Close(ctx context.Context) error {
	var err error
	b.closeOnce.Do(func() {
		// Close the set first, so no Exec starts a container the reaper
		// or this Close would miss.
		errs := []error{b.boxes.Close(ctx)}
		b.stopReaper()
		<-b.reaperDone
		errs = append(errs, b.cli.Close())
		err = errors.Join(errs...)
	})
	return err
}

// Client returns the Engine API client, for tests and diagnostics.
func (b *Backend) Client() *Engine { return b.cli }

// plural is "1 library" or "n libraries".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
