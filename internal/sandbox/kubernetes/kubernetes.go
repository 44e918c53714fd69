// Package kubernetes is the Kubernetes sandbox backend: each scope
// (session, agent or everyone) gets one pod, whose first process is the
// resident agent (package sandbox/agent) — the static exechost binary, which
// an init container copies out of the image sandbox.kubernetes.agentImage
// into a volume — and commands travel to it over one long-lived attach
// stream per pod (WebSocket, v5.channel.k8s.io or v4), not one exec API call
// per command.
//
// Pods are hardened by default: a non-root user, read-only root filesystem,
// every capability dropped, no privilege escalation, RuntimeDefault seccomp,
// no service-account token, CPU and memory limits; a NetworkPolicy denies
// their ingress and egress unless sandbox.kubernetes.allowEgress. They carry
// labels (exechost.sandbox=1, exechost.owner=<hash of host and state
// directory>, exechost.scope, exechost.agent) by which a restarted gateway
// finds and deletes what its predecessor left: a pod cannot be adopted,
// because its agent exits when the attach stream that carried its hello
// ends. A warm pool keeps sandbox.kubernetes.poolSize pods started and
// attached for scopes not seen yet; a scope adopts one as it is, and its
// session's env travels with each command to the agent, so per-session
// configuration never needs a new pod.
//
// The driver owns sandbox.kubernetes (Config: runtimeClassName, node
// selector, tolerations, requests and an operator's pod template among
// the rest), is linked into every exechost binary, and talks to the API
// server through package kubeapi: plain HTTP and JSON for the five kinds
// it uses, attach over WebSocket, its own kubeconfig reader (client.go),
// so that no k8s.io package is linked and no exechost process pays for
// one at start. Open and doctor check
// the namespace, the permissions and the RuntimeClass before any pod is
// made; doctor also dry-runs the pod and starts a probe pod
// (diagnose.go). BuildAgentImage and Push make sandbox.kubernetes.agentImage
// FROM scratch (image.go, `exechost sandbox image`).
package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/agent"
	"github.com/exechost/exechost/internal/sandbox/agentbox"
	"github.com/exechost/exechost/internal/sandbox/kubernetes/kubeapi"
)

// Errors a caller can test for with errors.Is. Each is wrapped with what
// failed and a hint.
var (
	// ErrUnreachable means the cluster's API server did not answer.
	ErrUnreachable = errors.New("kubernetes cluster unreachable")
	// ErrForbidden means the gateway's credentials lack a permission
	// the backend needs (see the Role in docs/sandbox.md).
	ErrForbidden = errors.New("kubernetes access forbidden")
	// ErrPodStart means a sandbox pod did not start (image, scheduling,
	// limits).
	ErrPodStart = errors.New("sandbox pod did not start")
	// ErrPodLost means the pod died, or was deleted, while a command ran.
	ErrPodLost = errors.New("sandbox pod lost")
	// ErrClosed is returned by Exec after Close.
	ErrClosed = errors.New("kubernetes sandbox closed")
)

// Label and annotation keys put on every pod and policy this backend
// creates.
const (
	LabelSandbox = "exechost.sandbox"
	LabelOwner   = "exechost.owner"
	LabelScope   = "exechost.scope"
	LabelAgent   = "exechost.agent"
	// poolScope is the scope label of a warm pod no scope has claimed.
	poolScope = "pool"
)

// startTimeout bounds how long a pod may take from creation to a ready
// agent.
const startTimeout = 3 * time.Minute

func init() {
	sandbox.Register(sandbox.Driver{
		Name:         Name,
		Config:       section,
		Summary:      "a pod per scope on a Kubernetes cluster",
		Capabilities: sandbox.Capabilities{ResidentAgent: true, Remote: true, WarmPool: true},
		Open:         sandbox.OpenAs(Open),
		Diagnose:     diagnose,
	})
}

// Backend runs commands in per-scope pods. It is safe for concurrent use.
type Backend struct {
	cfg   sandbox.Config
	k     Config
	rest  *kubeapi.Config
	api   *client
	owner string
	idle  time.Duration

	boxes *agentbox.Set[string]
	pool  *pool

	stop      context.CancelFunc
	done      sync.WaitGroup
	closeOnce sync.Once
}

var _ sandbox.Backend = (*Backend)(nil)

// Open connects to the cluster cfg.Kubernetes names, checks that the
// gateway may do what the backend needs in the namespace, deletes the pods
// a previous gateway with the same owner left, puts the NetworkPolicy in
// place and starts the warm pool and the idle reaper.
func Open(ctx context.Context, cfg sandbox.Config, stateDir string) (*Backend, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	k := ConfigOf(cfg)
	if k.AgentImage == "" {
		return nil, hint.Wrap(errors.New("sandbox.kubernetes.agentImage: not set"), "`exechost sandbox image --push REGISTRY/exechost-agent:TAG` builds and pushes one; see docs/sandbox.md")
	}
	if cfg.Agent == sandbox.AgentOff {
		return nil, hint.Wrap(errors.New("sandbox.agent: \"off\" is not supported by the kubernetes backend"), "its commands always go through the resident agent")
	}
	rc, err := restConfig(k)
	if err != nil {
		return nil, err
	}
	api, err := newClient(rc)
	if err != nil {
		return nil, err
	}
	b := &Backend{
		cfg:   cfg,
		k:     k,
		rest:  rc,
		api:   api,
		owner: OwnerID(stateDir),
		idle:  time.Duration(cfg.IdleTimeout),
	}
	// A server that accepts connections but never answers must not hang
	// the gateway's start.
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := b.checkNamespace(cctx); err != nil {
		return nil, err
	}
	if err := b.checkAccess(cctx); err != nil {
		return nil, err
	}
	if err := b.checkRuntimeClass(cctx); err != nil {
		return nil, err
	}
	if _, err := b.RemoveOrphans(cctx); err != nil {
		return nil, err
	}
	if err := b.ensurePolicy(cctx); err != nil {
		return nil, err
	}
	b.boxes = agentbox.New(agentbox.Funcs[string]{Start: b.startBox, Stop: b.deletePod, Fail: agentFailure}, ErrClosed)
	bg, stop := context.WithCancel(context.Background())
	b.stop = stop
	b.pool = newPool(b, k.PoolSize)
	b.done.Add(2)
	go func() { defer b.done.Done(); b.pool.fill(bg) }()
	go func() {
		defer b.done.Done()
		sandbox.IdleSweep(bg, b.idle, func(now time.Time) { b.reapIdle(bg, now) })
	}()
	return b, nil
}

// restConfig loads the client configuration: the kubeconfig named in the
// config; else in-cluster credentials inside a pod; else $KUBECONFIG or
// ~/.kube/config.
func restConfig(k Config) (*kubeapi.Config, error) {
	if k.Kubeconfig == "" && k.Context == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		rc, err := kubeapi.InCluster(os.Getenv, kubeapi.ServiceAccountDir)
		if err != nil {
			return nil, hint.Wrap(fmt.Errorf("%w: in-cluster credentials: %v", ErrUnreachable, err), "set sandbox.kubernetes.kubeconfig")
		}
		rc.UserAgent = "exechost-sandbox"
		return rc, nil
	}
	rc, err := kubeapi.Load(k.Kubeconfig, k.Context)
	if err != nil {
		return nil, hint.Wrap(fmt.Errorf("%w: load kubeconfig: %v", ErrUnreachable, err), "set sandbox.kubernetes.kubeconfig, or $KUBECONFIG")
	}
	rc.UserAgent = "exechost-sandbox"
	return rc, nil
}

// OwnerID is the owner label value of pods created for stateDir on this
// host: a short hash of both, so gateways on different machines (with the
// same state directory path) never delete each other's pods.
func OwnerID(stateDir string) string {
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte(host + "\x00" + stateDir))
	return hex.EncodeToString(sum[:6])
}

func scopeHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// Name identifies the backend.
func (b *Backend) Name() string { return Name }

// Isolation describes the boundary this backend's pods get, for `exechost
// sandbox doctor`.
func (b *Backend) Isolation() []string { return Describe(b.cfg) }

// Describe lists, in words, the isolation pods created from cfg get.
func Describe(cfg sandbox.Config) []string {
	cfg = cfg.WithDefaults()
	k := ConfigOf(cfg)
	net := "no ingress or egress (NetworkPolicy; needs a CNI that enforces it)"
	if k.AllowEgress {
		net = "egress allowed (sandbox.kubernetes.allowEgress), no ingress (NetworkPolicy)"
	}
	return []string{
		fmt.Sprintf("pod per %s in namespace %s from image %s, deleted after %s idle; warm pool of %d", cfg.Scope, k.Namespace, k.Image, time.Duration(cfg.IdleTimeout), k.PoolSize),
		"network: " + net,
		fmt.Sprintf("user: %d (non-root), no privilege escalation, RuntimeDefault seccomp, no service-account token", k.RunAsUser),
		"capabilities: all dropped",
		"commands: forked by a resident agent (the exechost binary from " + k.AgentImage + ") as the pod's first process, over one attach stream",
		"root filesystem: read-only; emptyDir /workspace and memory-backed /tmp (not the host workspace)",
		fmt.Sprintf("limits: memory %s, cpus %g", k.Memory, k.CPUs),
	}
}

// Exec runs req in its scope's pod.
func (b *Backend) Exec(ctx context.Context, req sandbox.Request) (runner.Result, error) {
	if len(req.Argv) == 0 && req.Command == "" {
		return runner.Result{}, errors.New("kubernetes sandbox exec: empty command")
	}
	// No egress relay in pods yet: a list is refused here too, not only by
	// the gateway, so a caller that skips that check cannot widen it.
	if err := sandbox.CheckEgress(b, req); err != nil {
		return runner.Result{}, err
	}
	if b.cfg.Scope != sandbox.ScopeShared {
		if _, err := sandbox.WorkspaceName(b.cfg.Scope, req.AgentID); err != nil {
			return runner.Result{}, fmt.Errorf("kubernetes sandbox exec: %w", err)
		}
	}
	env, err := sandbox.EnvList(req.Env)
	if err != nil {
		return runner.Result{}, fmt.Errorf("kubernetes sandbox exec: %w", err)
	}
	argv := req.Argv
	if len(argv) == 0 {
		argv = []string{"/bin/sh", "-c", req.Command}
	}
	key := sandbox.ScopeKey(b.cfg.Scope, req)
	bx, err := b.boxes.Acquire(key, req.AgentID, "")
	if err != nil {
		return runner.Result{}, err
	}
	defer b.boxes.Release(bx)
	return b.boxes.Exec(ctx, bx, agent.Request{Argv: argv, Env: env, Cwd: sandbox.ContainerCwd(req.Cwd), Timeout: req.Timeout})
}

// agentFailure words an agent failure (agentbox.Funcs.Fail).
func agentFailure(kind agentbox.Failure, err error) error {
	switch kind {
	case agentbox.FailStart:
		return fmt.Errorf("kubernetes sandbox exec: %w", err)
	case agentbox.FailGone:
		return hint.Wrap(fmt.Errorf("%w: %w", ErrPodLost, err), "`kubectl describe pod` shows why; check sandbox.kubernetes.memory")
	case agentbox.FailDied:
		return hint.Wrap(fmt.Errorf("%w while the command ran: %w", ErrPodLost, err), "the pod was deleted, evicted or hit its memory limit; the next command gets a new one")
	default:
		return fmt.Errorf("kubernetes sandbox exec: %w", err)
	}
}

// reapIdle deletes the pods of scopes idle longer than the idle timeout
// and returns how many.
func (b *Backend) reapIdle(ctx context.Context, now time.Time) int {
	return b.boxes.ReapIdle(ctx, now, b.idle)
}

// Close deletes every pod this backend created, the warm pool's too, and
// its NetworkPolicy. Exec fails with ErrClosed afterwards.
func (b *Backend) Close(ctx context.Context) error {
	var err error
	b.closeOnce.Do(func() {
		errs := []error{b.boxes.Close(ctx)}
		b.stop()
		b.done.Wait()
		errs = append(errs, b.pool.close(ctx))
		errs = append(errs, b.deletePolicy(ctx))
		err = errors.Join(errs...)
	})
	return err
}

// RestConfig returns (a copy of) the client configuration the backend
// uses, for tests and the benchmark, which make their own clients from it
// (kubeapi.New).
func (b *Backend) RestConfig() *kubeapi.Config { c := *b.rest; return &c }

// Namespace returns the namespace the pods live in.
func (b *Backend) Namespace() string { return b.k.Namespace }

// Owner returns the owner label value of this backend's pods.
func (b *Backend) Owner() string { return b.owner }

// apiError marks an API error for the user: unreachable, forbidden, or as
// it is.
func apiError(what string, err error) error {
	switch {
	case kubeapi.IsForbidden(err), kubeapi.IsUnauthorized(err):
		return hint.Wrap(fmt.Errorf("%w: %s: %v", ErrForbidden, what, err), "the gateway's credentials need the Role in docs/sandbox.md in the sandbox namespace")
	case isUnreachable(err):
		return hint.Wrap(fmt.Errorf("%w: %s: %v", ErrUnreachable, what, err), "check sandbox.kubernetes.kubeconfig and that the API server answers; `exechost sandbox doctor`")
	default:
		return fmt.Errorf("%s: %w", what, err)
	}
}

// isUnreachable tells a transport failure from an answer of the server.
func isUnreachable(err error) bool {
	return !kubeapi.IsStatus(err) && !errors.Is(err, context.Canceled)
}

// CommandPath says how this backend runs commands, for the notice of a
// session's first sandbox command (sandbox.PathReporter).
func (b *Backend) CommandPath() sandbox.CommandPath {
	rt := "the node's default runtime"
	if b.k.RuntimeClassName != "" {
		rt = "RuntimeClass " + b.k.RuntimeClassName
	}
	return sandbox.CommandPath{Mode: sandbox.PathAgent, Binary: sandbox.BinaryStatic,
		Reason: fmt.Sprintf("a pod per scope in namespace %s under %s (warm pool %d); the agent image's static binary forks each command over one attach stream, the session's env travelling with each command", b.k.Namespace, rt, b.k.PoolSize)}
}

// Pods returns the names of the pods scopes use now (not the warm pool's).
func (b *Backend) Pods() []string { return b.boxes.Handles() }
