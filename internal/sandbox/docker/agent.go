package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/moby/moby/api/pkg/stdcopy"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/agent"
	"github.com/exechost/exechost/internal/sandbox/agentbox"
)

// With sandbox.agent=auto, a scope's container does not run a sleeping
// shell: its main process is the agent — the exechost binary, bind-mounted
// read-only at agentMount, started as the container's user with every
// restriction of the container (no network, read-only root, no
// capabilities, no-new-privileges, limits) — and commands are sent to it
// over one connection instead of one runc exec each: a unix socket the
// container's stdio only introduces, or that stdio itself when no socket
// can be made (below).
//
// The channel: the backend attaches to the container's stdin, stdout and
// stderr before starting it, and the container is created with StdinOnce,
// so its stdin closes when that attachment ends (the agent then kills its
// commands and exits, and the container stops). The hello goes over that
// stdin and names a unix socket in a private run directory the gateway
// listens on, mounted read-only; the agent dials it, proves the key, and
// commands travel there, off dockerd's stdio relay (which costs several
// milliseconds a round trip on a busy daemon). The gateway accepts that one
// connection and removes the socket. When the socket cannot be made (a
// state directory path too long for a socket name), stdio carries the
// commands too. Anyone else who can attach
// holds the Docker API, which is root on the host already; even so, what
// they write fails the agent's per-frame authentication and only ends the
// sandbox (see package sandbox/agent). The container's log driver is
// "none": command output never lands in docker's log files.

// agentMount is where the agent binary appears inside the container.
const agentMount = "/.exechost/exechost"

// runMount is where the scope's private run directory appears inside the
// container (read-only), and runSocket the socket in it the agent dials.
const (
	runMount  = "/.exechost/run"
	runSocket = "a.sock"
)

// agentPlan is how the agent starts in a container: the binary, and for a
// dynamically linked one the loader and libraries carried with it.
type agentPlan struct {
	bin string
	rt  *runtimeLibs
}

// agentState guards the backend's agent mode: err is nil while commands go
// through agents, and says why not once they do not.
type agentState struct {
	mu   sync.Mutex
	plan agentPlan
	err  error
}

func (a *agentState) get() (agentPlan, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.plan, a.err
}

// disable turns agent mode off for the rest of the backend's life: a
// container with the agent could not be started here (a remote daemon
// that cannot see the binary, say), so every scope uses runc exec.
func (a *agentState) disable(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err == nil {
		a.err = err
	}
}

// AgentErr says why commands do not go through resident agents here, or
// nil when they do.
func (b *Backend) AgentErr() error {
	_, err := b.agent.get()
	return err
}

// listenRun makes the scope's private run directory under the state
// directory and listens on the socket in it that the agent will dial. The
// state directory is 0700, so no other host user can reach the socket;
// the directory and socket are opened to the container's user (0711,
// 0666), whose only way in is the read-only mount; the first connection
// must prove the agent's key, and the socket is removed once it is made.
func (b *Backend) listenRun(key string) (string, *net.UnixListener, error) {
	dir := filepath.Join(b.stateDir, "sandbox-run", scopeHash(key))
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return "", nil, err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, runSocket), Net: "unix"})
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(filepath.Join(dir, runSocket), 0o666); err != nil {
		ln.Close()
		os.RemoveAll(dir)
		return "", nil, err
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		ln.Close()
		os.RemoveAll(dir)
		return "", nil, err
	}
	return dir, ln, nil
}

// agentConfig turns a keepalive container's configuration into an agent
// container's; runDir, when set, is mounted for the agent's socket. A
// dynamically linked agent gets its loader and libraries mounted read-only
// in libMount, and starts through that loader.
func agentConfig(cfg *containerConfig, hc *hostConfig, plan agentPlan, runDir string) {
	if runDir != "" {
		hc.Mounts = append(hc.Mounts, mountSpec{Type: "bind", Source: runDir, Target: runMount, ReadOnly: true})
	}
	cfg.Entrypoint = []string{agentMount}
	if plan.rt != nil {
		cfg.Entrypoint = plan.rt.entrypoint()
		files := plan.rt.files()
		for _, name := range slices.Sorted(maps.Keys(files)) {
			hc.Mounts = append(hc.Mounts, mountSpec{Type: "bind", Source: files[name], Target: libMount + "/" + name, ReadOnly: true})
		}
	}
	cfg.Cmd = []string{agent.Flag}
	cfg.OpenStdin, cfg.StdinOnce = true, true
	cfg.AttachStdin, cfg.AttachStdout, cfg.AttachStderr = true, true, true
	hc.Mounts = append(hc.Mounts, mountSpec{Type: "bind", Source: plan.bin, Target: agentMount, ReadOnly: true})
	hc.LogConfig.Type = "none"
}

// attachAgent attaches to created (not yet started) container id, starts
// it, and connects to its agent: through ln (the run directory's socket)
// when set, else over the attached stdio alone.
func (b *Backend) attachAgent(ctx context.Context, id, name string, ln *net.UnixListener, opts ...agent.Option) (*agent.Conn, error) {
	att, err := b.cli.ContainerAttach(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("attach sandbox container %s: %w", name, daemonError(err))
	}
	if err := b.cli.ContainerStart(ctx, id); err != nil {
		att.Close()
		return nil, fmt.Errorf("start sandbox container %s: %w", name, daemonError(err))
	}
	// The attach stream multiplexes the agent's stdout (the channel) and
	// stderr (its diagnostics).
	pr, pw := io.Pipe()
	diag := &sandbox.HeadWriter{N: 4096}
	go func() {
		_, err := stdcopy.StdCopy(pw, diag, att.Reader)
		pw.CloseWithError(err)
	}()
	closeFn := func() { att.Close(); pr.Close() }
	var conn *agent.Conn
	if ln != nil {
		// The agent writes nothing to its stdout once the channel is the
		// socket; drain it anyway so the demultiplexer never stalls.
		go func() { _, _ = io.Copy(io.Discard, pr) }()
		conn, err = agent.StartDial(ctx, att.Conn, ln, runMount+"/"+runSocket, closeFn, opts...)
	} else {
		conn, err = agent.Start(ctx, pr, att.Conn, closeFn, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(diag.String()))
	}
	return conn, nil
}

// agentFailure words an agent failure (agentbox.Funcs.Fail): a container
// whose agent died is ErrContainerDied, with where to look.
func agentFailure(kind agentbox.Failure, err error) error {
	switch kind {
	case agentbox.FailGone:
		return hint.Wrap(fmt.Errorf("%w: %w", ErrContainerDied, err), "check the memory and pids limits in sandbox.docker; sandbox.agent=off uses docker exec instead")
	case agentbox.FailDied:
		return hint.Wrap(fmt.Errorf("%w while the command ran: %w", ErrContainerDied, err), "check the memory and pids limits in sandbox.docker")
	default:
		return fmt.Errorf("docker sandbox exec: %w", err)
	}
}

// execAgent runs req through the scope's agent (see agentbox.Set.Exec); a
// box that has no agent, because agent mode was turned off while this
// scope had none, uses docker exec.
func (b *Backend) execAgent(ctx context.Context, bx *box, req sandbox.Request, env []string) (runner.Result, error) {
	argv := req.Argv
	if len(argv) == 0 {
		argv = []string{"/bin/sh", "-c", req.Command}
	}
	areq := agent.Request{Argv: argv, Env: env, Cwd: sandbox.ContainerCwd(req.Cwd), Timeout: req.Timeout}
	res, err := b.boxes.Exec(ctx, bx, areq)
	if errors.Is(err, agentbox.ErrNoAgent) {
		return b.execRetry(ctx, bx, req, env)
	}
	return res, err
}
