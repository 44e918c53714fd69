package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/agent"
	"github.com/exechost/exechost/internal/sandbox/kubernetes/kubeapi"
)

// Paths inside the pod.
const (
	// agentDir is the volume the init container copies the agent into,
	// mounted read-only in the sandbox container.
	agentDir = "/.exechost"
	// agentPath is the agent binary in it.
	agentPath = agentDir + "/exechost"
	// imageAgentPath is where the agent image holds the binary.
	imageAgentPath = "/exechost"
	// containerName is the sandbox container, whose first process is
	// the agent.
	containerName = "sandbox"
)

// access lists what the backend does in its namespace: the minimal Role
// (docs/sandbox.md) grants exactly these.
var access = []kubeapi.ResourceAttributes{
	{Verb: "create", Resource: "pods"},
	{Verb: "get", Resource: "pods"},
	{Verb: "list", Resource: "pods"},
	{Verb: "watch", Resource: "pods"},
	{Verb: "delete", Resource: "pods"},
	{Verb: "patch", Resource: "pods"},
	{Verb: "create", Resource: "pods", Subresource: "attach"},
	{Verb: "get", Resource: "pods", Subresource: "attach"},
	{Verb: "create", Group: "networking.k8s.io", Resource: "networkpolicies"},
	{Verb: "get", Group: "networking.k8s.io", Resource: "networkpolicies"},
	{Verb: "update", Group: "networking.k8s.io", Resource: "networkpolicies"},
	{Verb: "delete", Group: "networking.k8s.io", Resource: "networkpolicies"},
}

// checkAccess asks the API server (SelfSubjectAccessReview, which every
// authenticated user may) whether the gateway may do what the backend
// needs, so a missing permission is one clear error at start instead of a
// failure at some later command.
func (b *Backend) checkAccess(ctx context.Context) error {
	var missing []string
	for _, a := range access {
		a.Namespace = b.k.Namespace
		allowed, err := b.api.review(ctx, a)
		if err != nil {
			return apiError("check permissions in namespace "+b.k.Namespace, err)
		}
		if !allowed {
			res := a.Resource
			if a.Subresource != "" {
				res += "/" + a.Subresource
			}
			missing = append(missing, a.Verb+" "+res)
		}
	}
	if len(missing) > 0 {
		return hint.Wrap(fmt.Errorf("%w: may not %s in namespace %s", ErrForbidden, strings.Join(missing, ", "), b.k.Namespace), "bind the Role in docs/sandbox.md to the gateway's user or service account")
	}
	return nil
}

// ownerSelector selects every object of this backend.
func (b *Backend) ownerSelector() string {
	return LabelOwner + "=" + b.owner + "," + LabelSandbox + "=1"
}

// RemoveOrphans deletes every pod labelled as this owner's that this
// Backend does not use — what a previous gateway left — and returns how
// many. Open calls it.
func (b *Backend) RemoveOrphans(ctx context.Context) (int, error) {
	list, err := b.api.listPods(ctx, b.k.Namespace, b.ownerSelector())
	if err != nil {
		return 0, apiError("list sandbox pods", err)
	}
	inUse := map[string]bool{}
	if b.boxes != nil {
		for _, name := range b.boxes.Handles() {
			inUse[name] = true
		}
	}
	if b.pool != nil {
		for _, name := range b.pool.names() {
			inUse[name] = true
		}
	}
	var errs []error
	n := 0
	for _, p := range list.Items {
		if inUse[p.Name] {
			continue
		}
		if err := b.deletePod(ctx, p.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

func (b *Backend) policyName() string { return "exechost-" + b.owner }

// policy denies the pods' ingress, and their egress unless allowEgress.
func (b *Backend) policy() *kubeapi.NetworkPolicy {
	p := &kubeapi.NetworkPolicy{
		ObjectMeta: kubeapi.ObjectMeta{
			Name:   b.policyName(),
			Labels: map[string]string{LabelSandbox: "1", LabelOwner: b.owner},
		},
		Spec: kubeapi.NetworkPolicySpec{
			PodSelector: kubeapi.LabelSelector{MatchLabels: map[string]string{LabelSandbox: "1", LabelOwner: b.owner}},
			PolicyTypes: []string{"Ingress", "Egress"},
		},
	}
	if b.k.AllowEgress {
		p.Spec.Egress = []json.RawMessage{json.RawMessage("{}")}
	}
	return p
}

// ensurePolicy creates or updates the NetworkPolicy.
func (b *Backend) ensurePolicy(ctx context.Context) error {
	ns := b.k.Namespace
	want := b.policy()
	cur, err := b.api.getPolicy(ctx, ns, want.Name)
	switch {
	case kubeapi.IsNotFound(err):
		if err := b.api.createPolicy(ctx, ns, want); err != nil {
			return apiError("create the sandbox NetworkPolicy", nsHint(err, b.k.Namespace))
		}
		return nil
	case err != nil:
		return apiError("get the sandbox NetworkPolicy", err)
	}
	cur.Spec, cur.Labels = want.Spec, want.Labels
	if err := b.api.updatePolicy(ctx, ns, cur); err != nil {
		return apiError("update the sandbox NetworkPolicy", err)
	}
	return nil
}

func (b *Backend) deletePolicy(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err := b.api.deletePolicy(dctx, b.k.Namespace, b.policyName())
	if err != nil && !kubeapi.IsNotFound(err) {
		return apiError("delete the sandbox NetworkPolicy", err)
	}
	return nil
}

// nsHint adds a hint to a NotFound of the namespace itself.
func nsHint(err error, ns string) error {
	if kubeapi.IsNotFound(err) {
		return hint.Wrap(err, fmt.Sprintf("create namespace %s, or set sandbox.kubernetes.namespace", ns))
	}
	return err
}

// labelValue returns v when it is a valid label value (at most 63
// characters: alphanumerics, and '-', '_' or '.' inside), else "".
func labelValue(v string) string {
	if len(v) > 63 {
		return ""
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !alnum(c) && (i == 0 || i == len(v)-1 || (c != '-' && c != '_' && c != '.')) {
			return ""
		}
	}
	return v
}

// podFor returns the pod of a scope (scope, agentID) or of the warm pool
// (scope poolScope).
func (b *Backend) podFor(name, scope, agentID string) (*kubeapi.Pod, error) {
	k := b.k
	mem, err := sandbox.ParseSize(k.Memory)
	if err != nil {
		return nil, err
	}
	tmp, err := sandbox.ParseSize(k.TmpfsSize)
	if err != nil {
		return nil, err
	}
	limits := map[string]string{}
	if mem > 0 {
		limits["memory"] = strconv.FormatInt(mem, 10)
	}
	if k.CPUs > 0 {
		limits["cpu"] = strconv.FormatInt(int64(math.Round(k.CPUs*1000)), 10) + "m"
	}
	// Requests are small so that a node holds many idle sandboxes; the
	// limits bound what one can take.
	requests := map[string]string{"cpu": "10m", "memory": "16Mi"}
	for name, v := range k.Requests {
		if err := checkQuantity(v); err != nil {
			return nil, fmt.Errorf("sandbox.kubernetes.requests.%s: %w", name, err)
		}
		requests[name] = v
	}
	uid := k.RunAsUser
	yes, no := true, false
	grace := int64(1)
	sec := &kubeapi.SecurityContext{
		RunAsUser:                &uid,
		RunAsGroup:               &uid,
		RunAsNonRoot:             &yes,
		AllowPrivilegeEscalation: &no,
		Privileged:               &no,
		ReadOnlyRootFilesystem:   &yes,
		Capabilities:             &kubeapi.Capabilities{Drop: []string{"ALL"}},
		SeccompProfile:           &kubeapi.SeccompProfile{Type: "RuntimeDefault"},
	}
	lbl := map[string]string{LabelSandbox: "1", LabelOwner: b.owner, LabelScope: scope}
	if v := labelValue(agentID); v != "" {
		lbl[LabelAgent] = v
	}
	res := kubeapi.ResourceRequirements{Limits: limits, Requests: requests}
	p := &kubeapi.Pod{
		ObjectMeta: kubeapi.ObjectMeta{Name: name, Labels: lbl},
		Spec: kubeapi.PodSpec{
			RestartPolicy:                 "Never",
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			SecurityContext: &kubeapi.PodSecurityContext{
				RunAsUser:      &uid,
				RunAsGroup:     &uid,
				RunAsNonRoot:   &yes,
				SeccompProfile: &kubeapi.SeccompProfile{Type: "RuntimeDefault"},
			},
			Volumes: []kubeapi.Volume{
				{Name: "agent", EmptyDir: &kubeapi.EmptyDirVolume{}},
				{Name: "tmp", EmptyDir: &kubeapi.EmptyDirVolume{Medium: "Memory", SizeLimit: strconv.FormatInt(tmp, 10)}},
				{Name: "workspace", EmptyDir: &kubeapi.EmptyDirVolume{}},
			},
			// The init container is the exechost binary of the agent
			// image copying itself (agent.InstallFlag): the image needs
			// nothing else, not even a shell.
			InitContainers: []kubeapi.Container{{
				Name:            "agent",
				Image:           k.AgentImage,
				ImagePullPolicy: k.PullPolicy,
				Command:         []string{imageAgentPath, agent.InstallFlag, agentPath},
				SecurityContext: sec,
				Resources:       res,
				VolumeMounts:    []kubeapi.VolumeMount{{Name: "agent", MountPath: agentDir}},
			}},
			Containers: []kubeapi.Container{{
				Name:            containerName,
				Image:           k.Image,
				ImagePullPolicy: k.PullPolicy,
				Command:         []string{agentPath, agent.Flag},
				WorkingDir:      sandbox.WorkspaceDir,
				// The agent's channel is this stdin (the hello, then
				// requests) and stdout, over the attach stream; with
				// StdinOnce its stdin closes when that stream ends, and
				// the agent then kills its commands and exits.
				Stdin:           true,
				StdinOnce:       true,
				SecurityContext: sec,
				Resources:       res,
				VolumeMounts: []kubeapi.VolumeMount{
					{Name: "agent", MountPath: agentDir, ReadOnly: true},
					{Name: "tmp", MountPath: "/tmp"},
					{Name: "workspace", MountPath: sandbox.WorkspaceDir},
				},
			}},
		},
	}
	if err := b.fromTemplate(p); err != nil {
		return nil, err
	}
	return p, nil
}

// newPodName returns a fresh pod name of this owner.
func (b *Backend) newPodName() string {
	var r [5]byte
	_, _ = rand.Read(r[:])
	return "exechost-" + b.owner + "-" + hex.EncodeToString(r[:])
}

// startPod creates a pod, waits for its sandbox container to run and
// attaches to its agent. On failure the pod is deleted.
func (b *Backend) startPod(ctx context.Context, scope, agentID string) (string, *agent.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	name := b.newPodName()
	pod, err := b.podFor(name, scope, agentID)
	if err != nil {
		return "", nil, err
	}
	created, err := b.api.createPod(ctx, b.k.Namespace, pod, false)
	if err != nil {
		return "", nil, apiError("create sandbox pod", nsHint(err, b.k.Namespace))
	}
	if err := b.waitRunning(ctx, created); err != nil {
		_ = b.deletePod(ctx, name)
		return "", nil, err
	}
	conn, err := b.attach(ctx, name)
	if err != nil {
		_ = b.deletePod(ctx, name)
		return "", nil, err
	}
	return name, conn, nil
}

// waitRunning watches pod until its sandbox container runs, and fails
// early, with the reason, on what will not get better by waiting.
func (b *Backend) waitRunning(ctx context.Context, pod *kubeapi.Pod) error {
	if err := podState(pod); err != nil || running(pod) {
		return err
	}
	timedOut := func(last *kubeapi.Pod) error {
		return hint.Wrap(fmt.Errorf("%w: pod %s not running (%v, at most %s): %s", ErrPodStart, pod.Name, ctx.Err(), startTimeout, describe(last)), fmt.Sprintf("`kubectl describe pod -n %s %s`", b.k.Namespace, pod.Name))
	}
	w, err := b.api.watchPod(ctx, b.k.Namespace, pod.Name, pod.ResourceVersion)
	if err != nil {
		if ctx.Err() != nil {
			return timedOut(pod)
		}
		return apiError("watch sandbox pod", err)
	}
	// The watch's body is read under ctx: its end ends Next.
	defer w.Close()
	last := pod
	for {
		ev, err := w.Next()
		switch {
		case ctx.Err() != nil:
			return timedOut(last)
		case errors.Is(err, io.EOF), kubeapi.IsStatus(err) && statusCode(err) == http.StatusGone:
			// The server ended the watch, or its start is too old: look
			// again and rewatch.
			cur, err := b.api.getPod(ctx, b.k.Namespace, pod.Name)
			if err != nil {
				return apiError("get sandbox pod", err)
			}
			return b.waitRunning(ctx, cur)
		case kubeapi.IsStatus(err):
			return fmt.Errorf("%w: watching pod %s: %v", ErrPodStart, pod.Name, err)
		case err != nil:
			return apiError("watch sandbox pod", err)
		}
		switch ev.Type {
		case "DELETED":
			return fmt.Errorf("%w: pod %s was deleted while starting", ErrPodStart, pod.Name)
		case "ADDED", "MODIFIED":
		default:
			continue
		}
		p := &kubeapi.Pod{}
		if err := json.Unmarshal(ev.Object, p); err != nil {
			return fmt.Errorf("%w: watching pod %s: %v", ErrPodStart, pod.Name, err)
		}
		last = p
		if err := podState(p); err != nil {
			return err
		}
		if running(p) {
			return nil
		}
	}
}

// statusCode is the HTTP status of an API error.
func statusCode(err error) int {
	var se *kubeapi.StatusError
	if errors.As(err, &se) {
		return se.Status.Code
	}
	return 0
}

// running reports whether the sandbox container runs.
func running(p *kubeapi.Pod) bool {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == containerName && s.State.Running != nil {
			return true
		}
	}
	return false
}

// waitingFatal are container waiting reasons that waiting does not cure.
var waitingFatal = map[string]bool{
	"ErrImageNeverPull": true, "InvalidImageName": true, "ImagePullBackOff": true, "ErrImagePull": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
	"CrashLoopBackOff": true,
}

// podState returns an ErrPodStart error when p cannot become running.
func podState(p *kubeapi.Pod) error {
	if p.Status.Phase == kubeapi.PodFailed || p.Status.Phase == kubeapi.PodSucceeded {
		return fmt.Errorf("%w: pod %s ended (%s): %s", ErrPodStart, p.Name, p.Status.Phase, describe(p))
	}
	for _, s := range append(append([]kubeapi.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := s.State.Waiting; w != nil && waitingFatal[w.Reason] {
			return hint.Wrap(fmt.Errorf("%w: pod %s container %s: %s: %s", ErrPodStart, p.Name, s.Name, w.Reason, w.Message), "check sandbox.kubernetes.image and agentImage, and pullPolicy")
		}
		if t := s.State.Terminated; t != nil && (t.ExitCode != 0 || s.Name == containerName) {
			return hint.Wrap(fmt.Errorf("%w: pod %s container %s ended: %s (exit %d) %s", ErrPodStart, p.Name, s.Name, t.Reason, t.ExitCode, t.Message), "agentImage must hold the static exechost binary at /exechost")
		}
	}
	return nil
}

// describe says in one line where a pod is stuck.
func describe(p *kubeapi.Pod) string {
	parts := []string{"phase " + p.Status.Phase}
	for _, c := range p.Status.Conditions {
		if c.Status != "True" && c.Message != "" {
			parts = append(parts, c.Type+": "+c.Message)
		}
	}
	for _, s := range append(append([]kubeapi.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := s.State.Waiting; w != nil {
			parts = append(parts, s.Name+": "+w.Reason+" "+w.Message)
		}
	}
	return strings.Join(parts, "; ")
}

// deletePod deletes a pod at once; one already gone is not an error.
func (b *Backend) deletePod(ctx context.Context, name string) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err := b.api.deletePod(dctx, b.k.Namespace, name, 0)
	if err != nil && !kubeapi.IsNotFound(err) {
		return apiError("delete sandbox pod "+name, err)
	}
	return nil
}

// startBox gives a scope its pod (agentbox.Funcs.Start): a warm one from
// the pool when there is one, else a new one.
func (b *Backend) startBox(ctx context.Context, bx *box) (string, *agent.Conn, error) {
	scope := scopeHash(bx.Key)
	if name, conn := b.pool.take(); conn != nil {
		// Off the command's path: the labels are not needed to run it.
		go b.claim(name, scope, bx.Agent)
		return name, conn, nil
	}
	return b.startPod(ctx, scope, bx.Agent)
}

// claim relabels a warm pod for the scope that took it. The labels are
// for people and tools; a failure only leaves it labelled "pool".
func (b *Backend) claim(name, scope, agentID string) {
	lbl := map[string]any{LabelScope: scope}
	if v := labelValue(agentID); v != "" {
		lbl[LabelAgent] = v
	}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":%s}}`, mustJSON(lbl))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = b.api.patchPod(ctx, b.k.Namespace, name, patch)
}
