package bwrap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/agent"
	"github.com/exechost/exechost/internal/sandbox/agentbox"
)

// systemDirs are the host directories every sandbox sees read-only.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// basePath is the sandbox's PATH unless the request sets one.
const basePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// sandboxUID is the user id inside every sandbox.
const sandboxUID = 65534

// helperPath is where the helper binary appears inside the sandbox.
const helperPath = "/.exechost/helper"

// fdStatus is the status pipe's descriptor in bwrap and the helper
// (os/exec maps ExtraFiles[0] to 3).
const fdStatus = 3

// waitDelay bounds how long Exec waits for output pipes after the sandbox
// died (everything in it dies with its pid namespace, so this is slack).
const waitDelay = 2 * time.Second

// Backend runs each command in a fresh bubblewrap sandbox. It is safe for
// concurrent use and holds no per-command state, so Close has nothing to
// clean up beyond refusing further commands.
type Backend struct {
	cfg      sandbox.Config
	stateDir string
	bwrap    string
	helper   string
	report   Report
	// nested is set when the gateway is root and an unprivileged second
	// bwrap can add a user namespace (see nest in helper_linux.go).
	nested bool
	// agentBin is the host path of the agent binary; agentErr says why
	// commands do not go through resident agents (nil: they do).
	agentBin string
	agentErr error

	mu     sync.Mutex
	closed bool
	// boxes holds one resident sandbox per scope; the handle is its
	// agent's connection, which ends the sandbox when closed.
	boxes *agentbox.Set[*agent.Conn]
	// egr is the latest egress lease of each box key (egress_linux.go).
	egr egressState

	stopReaper context.CancelFunc
	reaperDone chan struct{}

	// beforeReap, when set, is called with a bwrap process's pid just
	// before it is reaped, after the last kill of its group (tests; set
	// while sandboxes Open started may be ending).
	beforeReap atomic.Pointer[func(pid int)]
}

var _ sandbox.Backend = (*Backend)(nil)

// Open finds bwrap and this binary (the helper), and runs a probe sandbox to
// check that namespaces work here and to learn what isolation the kernel
// allows. It fails with ErrUnavailable when the sandbox cannot come up, and
// when sandbox.bwrap.landlock=require but the kernel has no Landlock.
func Open(ctx context.Context, cfg sandbox.Config, stateDir string) (*Backend, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	bw := ConfigOf(cfg).Path
	if bw == "" {
		bw = "bwrap"
	}
	bwPath, err := exec.LookPath(bw)
	if err != nil {
		return nil, hint.Wrap(fmt.Errorf("%w: bwrap not found: %v", ErrUnavailable, err), "apt-get install bubblewrap, or set sandbox.bwrap.path")
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("%w: locate the exechost binary for the sandbox helper: %v", ErrUnavailable, err)
	}
	b := &Backend{cfg: cfg, stateDir: stateDir, bwrap: bwPath, helper: self, agentBin: self}
	b.boxes = agentbox.New(agentbox.Funcs[*agent.Conn]{Start: b.startBox, Fail: agentFailure}, ErrClosed)
	if cfg.AgentBinary != "" {
		b.agentBin = cfg.AgentBinary
	}
	if err := b.probeAll(ctx); err != nil {
		return nil, err
	}
	if cfg.Agent == sandbox.AgentOff {
		b.agentErr = errors.New("off (sandbox.agent=off): a fresh sandbox per command")
	} else {
		b.agentErr = b.probeAgent(ctx)
	}
	rctx, cancel := context.WithCancel(context.Background())
	b.stopReaper, b.reaperDone = cancel, make(chan struct{})
	go b.reapLoop(rctx, time.Duration(cfg.IdleTimeout))
	return b, nil
}

// probeAll runs the probe sandbox, for a root gateway first with the
// nested user namespace.
func (b *Backend) probeAll(ctx context.Context) error {
	if os.Geteuid() == 0 {
		b.nested = true
		if rep, err := b.probe(ctx); err == nil {
			b.report = rep
			return nil
		}
		// No unprivileged user namespaces here: one stage, dropping to
		// sandboxUID without a user namespace.
		b.nested = false
	}
	rep, err := b.probe(ctx)
	if err != nil {
		return err
	}
	b.report = rep
	return nil
}

// probeAgent starts a resident sandbox over a scratch workspace, runs
// `true` through its agent and ends it. Its error says why commands will
// each get a fresh sandbox instead.
func (b *Backend) probeAgent(ctx context.Context) error {
	ws, err := os.MkdirTemp("", "exechost-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	if err := os.Chmod(ws, 0o777); err != nil {
		return err
	}
	conn, err := b.startAgent(ctx, ws, nil)
	if err != nil {
		return err
	}
	defer conn.Close()
	res, err := conn.Exec(ctx, agent.Request{Argv: []string{"/bin/sh", "-c", "exit 0"}, Cwd: sandbox.WorkspaceDir, Timeout: 30 * time.Second})
	if err == nil && !res.Success {
		err = fmt.Errorf("probe command failed: exit %d: %s", res.ExitCode, res.Stderr)
	}
	return err
}

// CommandPath says how this backend runs commands: through a resident
// agent (the host's own exechost binary, which sees the host's libraries
// read-only, so static or dynamic alike), or a fresh sandbox each.
func (b *Backend) CommandPath() sandbox.CommandPath {
	if b.agentErr == nil {
		return sandbox.CommandPath{Mode: sandbox.PathAgent, Reason: "forked by the exechost binary (same restrictions) in one sandbox per " + string(b.cfg.Scope) + ", removed after " + time.Duration(b.cfg.IdleTimeout).String() + " idle"}
	}
	return sandbox.CommandPath{Mode: sandbox.PathPerCommand, Reason: "a fresh sandbox each; resident agent: " + b.agentErr.Error()}
}

// AgentErr says why commands do not run through resident agents here, or
// nil when they do.
func (b *Backend) AgentErr() error { return b.agentErr }

// Name identifies the backend.
func (b *Backend) Name() string { return Name }

// BwrapPath returns the bwrap binary the backend runs.
func (b *Backend) BwrapPath() string { return b.bwrap }

// Report returns what the probe sandbox measured at Open.
func (b *Backend) Report() Report { return b.report }

// Isolation describes, in words for `exechost sandbox doctor`, the
// isolation this kernel gave the probe sandbox.
func (b *Backend) Isolation() []string {
	r := b.report
	root := os.Geteuid() == 0
	fresh := "fresh per command"
	if b.agentErr == nil {
		fresh = "fresh per sandbox"
	}
	ns := "namespaces: user, mount, pid, network (loopback only), ipc, uts, cgroup; " + fresh + "; no nested user namespaces"
	if root && !b.nested {
		ns = "namespaces: mount, pid, network (loopback only), ipc, uts, cgroup; " + fresh + " (no user namespace: unprivileged user namespaces are not allowed here)"
	}
	out := []string{
		ns,
		"filesystem: read-only " + strings.Join(b.visibleDirs(), ", ") + "; writable /workspace and tmpfs /tmp; nothing else of the host",
		fmt.Sprintf("user: uid %d inside; capabilities: none", r.UID),
	}
	if root {
		out = append(out, fmt.Sprintf("host user: %d (the gateway runs as root: bwrap sets up the namespaces, the helper drops to this user before anything runs)", sandboxUID))
	}
	if r.NoNewPrivs {
		out = append(out, "no_new_privs: set")
	}
	out = append(out, "commands: "+b.CommandPath().String())
	out = append(out, "landlock: "+r.Landlock)
	switch {
	case r.NProc == 0:
		out = append(out, "pids: no limit (sandbox.bwrap.pidsLimit < 0)")
	case root && !b.nested:
		out = append(out, fmt.Sprintf("pids: at most %d processes (RLIMIT_NPROC of host user %d, shared by every process of that user)", r.NProc, sandboxUID))
	default:
		out = append(out, fmt.Sprintf("pids: at most %d processes (RLIMIT_NPROC, counted in the sandbox's own user namespace)", r.NProc))
	}
	if r.AddressSpace > 0 {
		out = append(out, fmt.Sprintf("memory: %d bytes of address space per process (RLIMIT_AS)", r.AddressSpace))
	} else {
		out = append(out, "memory, cpu: no limit (no delegated cgroup; set sandbox.bwrap.memory for RLIMIT_AS)")
	}
	return out
}

// Close ends every resident sandbox (and the commands in them) and makes
// later Execs fail with ErrClosed. Fresh per-command sandboxes still
// running die with their commands' timeouts or contexts.
func (b *Backend) Close(ctx context.Context) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	b.stopReaper()
	<-b.reaperDone
	_ = b.boxes.Close(ctx)
	return nil
}

func (b *Backend) visibleDirs() []string {
	var out []string
	for _, d := range append(append([]string{}, systemDirs...), ConfigOf(b.cfg).ROBind...) {
		if _, err := os.Lstat(d); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// Exec runs req in a fresh sandbox. A non-nil error means the sandbox did
// not come up (the command did not run anywhere); the command's own failure
// is a Result with its exit code.
func (b *Backend) Exec(ctx context.Context, req sandbox.Request) (runner.Result, error) {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return runner.Result{}, ErrClosed
	}
	if len(req.Argv) == 0 && req.Command == "" {
		return runner.Result{}, errors.New("bwrap sandbox exec: empty command")
	}
	// A run whose policy lists names needs the agent's relay: without
	// it, it is refused, not run with the sandbox's empty network.
	if err := sandbox.CheckEgress(b, req); err != nil {
		return runner.Result{}, err
	}
	ws, err := sandbox.EnsureWorkspace(b.cfg, b.stateDir, req, sandbox.WorkspaceOwner{})
	if err != nil {
		return runner.Result{}, fmt.Errorf("bwrap sandbox exec: %w", err)
	}
	argv := req.Argv
	if len(argv) == 0 {
		argv = []string{"/bin/sh", "-c", req.Command}
	}
	if b.agentErr == nil {
		return b.execAgent(ctx, req, ws, argv)
	}
	env, err := sandboxEnv(req.Env)
	if err != nil {
		return runner.Result{}, fmt.Errorf("bwrap sandbox exec: %w", err)
	}
	capture := runner.NewCapture(runner.MaxOutput, runner.TailSize)
	start := time.Now()
	code, timedOut, err := b.run(ctx, ws, sandbox.ContainerCwd(req.Cwd), env, helperSpec{Argv: argv}, capture.Stdout(), capture.Stderr(), req.Timeout, nil)
	if err != nil {
		return runner.Result{}, err
	}
	return capture.Finish(runner.Outcome{ExitCode: code, TimedOut: timedOut, Duration: time.Since(start)}), nil
}

// probe runs the helper in probe mode in a sandbox over a scratch
// workspace and returns its report.
func (b *Backend) probe(ctx context.Context) (Report, error) {
	ws, err := os.MkdirTemp("", "exechost-probe-")
	if err != nil {
		return Report{}, fmt.Errorf("%w: probe workspace: %v", ErrUnavailable, err)
	}
	defer os.RemoveAll(ws)
	// Like a real workspace (EnsureWorkspace): the sandbox user writes it.
	if err := os.Chmod(ws, 0o777); err != nil {
		return Report{}, fmt.Errorf("%w: probe workspace: %v", ErrUnavailable, err)
	}
	var status []byte
	env, _ := sandboxEnv(nil)
	_, _, err = b.run(ctx, ws, sandbox.WorkspaceDir, env, helperSpec{Probe: true}, io.Discard, io.Discard, 30*time.Second, &status)
	if err != nil {
		return Report{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	var rep Report
	if err := json.Unmarshal(status, &rep); err != nil {
		return Report{}, fmt.Errorf("%w: probe report %q: %v", ErrUnavailable, status, err)
	}
	return rep, nil
}

// run starts one sandbox and waits for it. statusOut, when set, receives
// everything the helper wrote to the status pipe (probe mode).
func (b *Backend) run(ctx context.Context, ws, cwd string, env []string, spec helperSpec, stdout, stderr io.Writer, timeout time.Duration, statusOut *[]byte) (code int, timedOut bool, err error) {
	diag := &sandbox.HeadWriter{N: 4096}
	cmd, statusR, err := b.start(ws, cwd, env, spec, nil, stdout, io.MultiWriter(stderr, diag))
	if err != nil {
		return 0, false, err
	}
	defer statusR.Close()
	statusCh := make(chan []byte, 1)
	go func() {
		data, _ := io.ReadAll(io.LimitReader(statusR, 64<<10))
		statusCh <- data
	}()
	// bwrap is reaped only after the last kill of its group (AwaitExit):
	// until then the group's id cannot be reused.
	waitCh := make(chan error, 1)
	reaped := false
	go func() {
		var err error
		reaped, err = runner.AwaitExit(cmd)
		waitCh <- err
	}()

	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	var waitErr, ctxErr error
	select {
	case waitErr = <-waitCh:
	case <-timer:
		timedOut = true
	case <-ctx.Done():
		ctxErr = ctx.Err()
	}
	if timedOut || ctxErr != nil {
		// bwrap and its init die; --die-with-parent and the end of the pid
		// namespace take every process of the sandbox with them.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		waitErr = <-waitCh
	}
	if !reaped {
		b.reaping(cmd.Process.Pid)
		waitErr = cmd.Wait()
	}
	status := <-statusCh
	if ctxErr != nil {
		return 0, false, fmt.Errorf("bwrap sandbox exec: %w", ctxErr)
	}
	if statusOut != nil {
		*statusOut = status
	}
	if len(status) == 0 && !timedOut {
		// The helper never reported: bwrap or the helper failed, and the
		// command did not run. stderr (when it is ours) says why.
		msg := strings.TrimSpace(diag.String())
		return 0, false, hint.Wrap(fmt.Errorf("%w: %v: %s", ErrSetup, waitErr, msg), "`exechost sandbox doctor` checks bwrap and user namespaces")
	}
	code = cmd.ProcessState.ExitCode()
	if code < 0 {
		code = 128 + int(syscall.SIGKILL)
	}
	return code, timedOut, nil
}

// reaping calls the beforeReap hook, if any, for bwrap process pid.
func (b *Backend) reaping(pid int) {
	if f := b.beforeReap.Load(); f != nil {
		(*f)(pid)
	}
}

// start starts bwrap with the helper, which applies spec (completed here
// with the configured limits and, for a root gateway, the drop to
// sandboxUID) and then execs spec.Argv. The caller reads the status pipe
// and waits for the command.
func (b *Backend) start(ws, cwd string, env []string, spec helperSpec, stdin io.Reader, stdout, stderr io.Writer) (*exec.Cmd, *os.File, error) {
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: status pipe: %v", ErrSetup, err)
	}
	spec.Landlock = ConfigOf(b.cfg).Landlock
	spec.Pids = max(ConfigOf(b.cfg).PidsLimit, 0)
	if ConfigOf(b.cfg).Memory != "" {
		spec.Memory, _ = sandbox.ParseSize(ConfigOf(b.cfg).Memory)
	}
	spec.StatusFD = fdStatus
	if os.Geteuid() == 0 {
		spec.DropTo = sandboxUID
		if b.nested {
			inner := spec
			inner.DropTo = 0
			spec = helperSpec{StatusFD: fdStatus, DropTo: sandboxUID, Bwrap: b.bwrap, Nest: &inner}
		}
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		statusR.Close()
		statusW.Close()
		return nil, nil, fmt.Errorf("%w: encode helper spec: %v", ErrSetup, err)
	}

	args := b.args(ws, cwd, env, string(specJSON))
	if spec.egressDir != "" || (spec.Nest != nil && spec.Nest.egressDir != "") {
		dir := spec.egressDir
		if dir == "" {
			dir = spec.Nest.egressDir
		}
		// Before the root is remounted read-only, as every other mount.
		i := slices.Index(args, "--remount-ro")
		args = slices.Insert(args, i, "--ro-bind", dir, sandbox.EgressMount)
	}
	cmd := exec.Command(b.bwrap, args...)
	cmd.Env = []string{} // bwrap --clearenv + --setenv carry the sandbox's environment
	cmd.Dir = "/"
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.ExtraFiles = []*os.File{statusW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = waitDelay
	if err := cmd.Start(); err != nil {
		statusR.Close()
		statusW.Close()
		return nil, nil, fmt.Errorf("%w: start bwrap: %v", ErrSetup, err)
	}
	statusW.Close()
	return cmd, statusR, nil
}

// args builds the bwrap command line. Order matters: bwrap applies the
// operations in sequence on a fresh tmpfs root, which is remounted
// read-only last.
func (b *Backend) args(ws, cwd string, env []string, spec string) []string {
	a := []string{"--die-with-parent", "--new-session", "--hostname", "sandbox"}
	if os.Geteuid() == 0 {
		// As root, bwrap creates the namespaces with real privileges and
		// no user namespace; the helper keeps only what it needs to drop
		// to sandboxUID (see rootMode in helper_linux.go).
		a = append(a, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
			"--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP")
	} else {
		a = append(a, "--unshare-all", "--unshare-user", "--disable-userns",
			"--uid", strconv.Itoa(sandboxUID), "--gid", strconv.Itoa(sandboxUID))
	}
	for _, d := range b.visibleDirs() {
		if t, err := os.Readlink(d); err == nil {
			a = append(a, "--symlink", t, d)
			continue
		}
		a = append(a, "--ro-bind", d, d)
	}
	tmpfsSize, _ := sandbox.ParseSize(ConfigOf(b.cfg).TmpfsSize)
	a = append(a,
		"--dev", "/dev",
		"--proc", "/proc",
		"--perms", "1777", "--size", strconv.FormatInt(tmpfsSize, 10), "--tmpfs", "/tmp",
		"--bind", ws, sandbox.WorkspaceDir,
		"--perms", "0755", "--dir", filepath.Dir(helperPath),
		"--ro-bind", b.helper, helperPath,
	)
	if b.agentBin != "" && b.agentBin != b.helper {
		a = append(a, "--ro-bind", b.agentBin, agentPath)
	}
	a = append(a,
		"--remount-ro", "/",
		"--chdir", cwd,
		"--clearenv",
	)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		a = append(a, "--setenv", k, v)
	}
	return append(a, "--", helperPath, helperFlag, spec)
}

// sandboxEnv is the sandbox's environment: a fixed base (PATH, HOME, TMPDIR)
// and the request's overlay.
func sandboxEnv(overlay map[string]string) ([]string, error) {
	m := map[string]string{"PATH": basePath, "HOME": sandbox.WorkspaceDir, "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
	for k, v := range overlay {
		m[k] = v
	}
	return sandbox.EnvList(m)
}
