package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/kubernetes/kubeapi"
)

// ErrNoNamespace means the sandbox namespace does not exist.
var ErrNoNamespace = errors.New("kubernetes sandbox namespace missing")

// ErrNoRuntimeClass means sandbox.kubernetes.runtimeClassName names a
// RuntimeClass the cluster does not have.
var ErrNoRuntimeClass = errors.New("kubernetes RuntimeClass missing")

// checkNamespace fails with ErrNoNamespace when the namespace does not
// exist. Reading a namespace is a cluster permission the minimal Role does
// not grant; without it, a dry-run pod answers the same question.
func (b *Backend) checkNamespace(ctx context.Context) error {
	err := b.api.getNamespace(ctx, b.k.Namespace)
	if kubeapi.IsForbidden(err) {
		_, err = b.api.createPod(ctx, b.k.Namespace, b.probePod(), true)
		if err == nil || !kubeapi.IsNotFound(err) {
			return nil // it exists; other answers are checkAccess's to explain
		}
	}
	switch {
	case err == nil:
		return nil
	case kubeapi.IsNotFound(err):
		return hint.Wrap(fmt.Errorf("%w: namespace %q does not exist", ErrNoNamespace, b.k.Namespace),
			fmt.Sprintf("`kubectl create namespace %s` and bind the Role in docs/sandbox.md there, or set sandbox.kubernetes.namespace", b.k.Namespace))
	default:
		return apiError("get namespace "+b.k.Namespace, err)
	}
}

// checkRuntimeClass fails with ErrNoRuntimeClass when the configured
// RuntimeClass does not exist. Reading RuntimeClasses is a cluster
// permission; without it, the dry-run pod's admission answers.
func (b *Backend) checkRuntimeClass(ctx context.Context) error {
	name := b.k.RuntimeClassName
	if name == "" {
		return nil
	}
	_, err := b.api.getRuntimeClass(ctx, name)
	if kubeapi.IsForbidden(err) {
		_, err = b.api.createPod(ctx, b.k.Namespace, b.probePod(), true)
		if err != nil && strings.Contains(err.Error(), "RuntimeClass") {
			err = kubeapi.NotFound("runtimeclasses.node.k8s.io", name)
		}
	}
	switch {
	case err == nil:
		return nil
	case kubeapi.IsNotFound(err):
		return hint.Wrap(fmt.Errorf("%w: runtimeClassName %q: no such RuntimeClass in the cluster", ErrNoRuntimeClass, name),
			"install the runtime (gVisor's runsc, Kata) and its RuntimeClass on the nodes, or unset sandbox.kubernetes.runtimeClassName; `kubectl get runtimeclass` lists them")
	default:
		return apiError("get RuntimeClass "+name, err)
	}
}

// runtimeWalls says, for the RuntimeClass handler the pods run under,
// which walls a sandbox has: gVisor's kernel has no Landlock, so exechost's
// inner confinement is absent there and the runtime's own isolation is
// the wall.
func runtimeWalls(handler string) string {
	switch {
	case handler == "":
		return "runtime: the node's default (runc): containers share the node's kernel; the pod's hardening above is the wall"
	case strings.Contains(handler, "runsc") || strings.Contains(handler, "gvisor"):
		return "runtime: gVisor (" + handler + "): a user-space kernel without Landlock, so exechost's inner Landlock confinement is absent; gVisor's own isolation is the wall"
	case strings.Contains(handler, "kata"):
		return "runtime: Kata (" + handler + "): a lightweight VM per pod; its guest kernel is the wall"
	default:
		return "runtime: " + handler + ": what it isolates is the runtime's to say (`kubectl get runtimeclass`)"
	}
}

// diagnose checks, in order, the kubeconfig, that the namespace exists,
// the permissions, the RuntimeClass, that the API server admits the pod
// (a dry run: validation, admission, quotas), and that the node can pull
// both images and run the agent (a probe pod, deleted at once). It touches
// no pod of a running gateway.
func diagnose(ctx context.Context, cfg sandbox.Config, stateDir string) (sandbox.Found, error) {
	cfg = cfg.WithDefaults()
	k := ConfigOf(cfg)
	if cfg.Backend != Name && k.Kubeconfig == "" && k.AgentImage == "" {
		return sandbox.Found{}, hint.Wrap(errors.New("not configured"), "set sandbox.backend to \"kubernetes\" and sandbox.kubernetes.agentImage; see docs/sandbox.md")
	}
	if k.AgentImage == "" {
		return sandbox.Found{}, hint.Wrap(errors.New("sandbox.kubernetes.agentImage: not set"), "`exechost sandbox image --push REGISTRY/exechost-agent:TAG` builds and pushes one")
	}
	rc, err := restConfig(k)
	if err != nil {
		return sandbox.Found{}, err
	}
	api, err := newClient(rc)
	if err != nil {
		return sandbox.Found{}, err
	}
	b := &Backend{cfg: cfg, k: k, rest: rc, api: api, owner: OwnerID(stateDir) + "d"}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := b.checkNamespace(cctx); err != nil {
		return sandbox.Found{}, err
	}
	if err := b.checkAccess(cctx); err != nil {
		return sandbox.Found{}, err
	}
	if err := b.checkRuntimeClass(cctx); err != nil {
		return sandbox.Found{}, err
	}
	handler := ""
	if k.RuntimeClassName != "" {
		if rcl, err := api.getRuntimeClass(cctx, k.RuntimeClassName); err == nil {
			handler = rcl.Handler
		} else {
			handler = k.RuntimeClassName
		}
	}
	if _, err := api.createPod(cctx, k.Namespace, b.probePod(), true); err != nil {
		return sandbox.Found{}, hint.Wrap(apiError("dry-run sandbox pod", err), "the API server refuses the pod: check sandbox.kubernetes (runtimeClassName, requests, podTemplate) and the namespace's policies")
	}
	// The probe pod pulls both images and starts the agent, as a
	// session's first command would.
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer pcancel()
	start := time.Now()
	name, conn, err := b.startPod(pctx, "doctor", "")
	if err != nil {
		return sandbox.Found{}, err
	}
	took := time.Since(start)
	conn.Close()
	_ = b.deletePod(context.WithoutCancel(ctx), name)
	path := sandbox.CommandPath{Mode: sandbox.PathAgent, Binary: sandbox.BinaryStatic, Reason: "the agent image's static binary, copied in by the init container, forks each command; commands travel over one attach stream per pod"}
	iso := append(Describe(cfg), runtimeWalls(handler))
	return sandbox.Found{
		Detail: fmt.Sprintf("cluster %s, namespace %s, images %s and %s pulled and the agent answered in a probe pod (%s, deleted)",
			rc.Host, k.Namespace, k.Image, k.AgentImage, took.Round(time.Millisecond)),
		Isolation: iso,
		Commands:  &path,
	}, nil
}
