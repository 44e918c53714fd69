package kubernetes

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/exechost/exechost/internal/sandbox"
)

// Name is the driver's name, the value of sandbox.backend that selects it.
const Name = "kubernetes"

// Config is sandbox.kubernetes, this driver's own section of
// exechost.json. Every field has a safe default except the agent image,
// which only the user can name.
type Config struct {
	// Kubeconfig is the kubeconfig file; empty means in-cluster
	// credentials when the gateway runs in a pod, else $KUBECONFIG or
	// ~/.kube/config.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Context is the kubeconfig context; empty means its current one.
	Context string `json:"context,omitempty"`
	// Namespace holds the sandbox pods (default "exechost"); it must
	// exist, and the gateway needs the Role in docs/sandbox.md there.
	Namespace string `json:"namespace,omitempty"`
	// Image is the pods' image; it must contain /bin/sh.
	Image string `json:"image,omitempty"`
	// AgentImage is an image holding the static exechost binary at
	// /exechost (`exechost sandbox image` builds one); an init container
	// copies it into the pod. Required.
	AgentImage string `json:"agentImage,omitempty"`
	// PullPolicy is the pods' imagePullPolicy (default IfNotPresent).
	PullPolicy string `json:"pullPolicy,omitempty"`
	// RunAsUser is the uid (and gid) the pod runs as (default 65534);
	// root (0) is refused.
	RunAsUser int64 `json:"runAsUser,omitempty"`
	// Memory limit ("512m").
	Memory string `json:"memory,omitempty"`
	// CPUs limit (fractional CPUs).
	CPUs float64 `json:"cpus,omitempty"`
	// Requests are the containers' resource requests, in Kubernetes
	// quantities ({"cpu": "250m", "memory": "128Mi"}); the default is
	// small (10m, 16Mi) so that a node holds many idle sandboxes.
	Requests map[string]string `json:"requests,omitempty"`
	// TmpfsSize is the size of the memory-backed /tmp and /workspace.
	TmpfsSize string `json:"tmpfsSize,omitempty"`
	// RuntimeClassName runs the pods under that RuntimeClass (gVisor,
	// Kata); it must exist in the cluster.
	RuntimeClassName string `json:"runtimeClassName,omitempty"`
	// NodeSelector places the pods on nodes with these labels.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations let the pods onto tainted nodes, in the pod spec's
	// own form ([{"key": "sandbox", "operator": "Exists", "effect":
	// "NoSchedule"}]).
	Tolerations []Toleration `json:"tolerations,omitempty"`
	// PodTemplate is an operator's pod ({"metadata": {…}, "spec": {…}})
	// the sandbox pods start from: its labels, annotations and spec fields
	// (affinity, priorityClassName, imagePullSecrets, …) are kept; the
	// containers, volumes and security settings are the driver's, and a
	// template that asks for the host's namespaces or paths is refused.
	PodTemplate json.RawMessage `json:"podTemplate,omitempty"`
	// PoolSize is how many ready pods are kept for scopes not seen yet
	// (default 0: a pod is created on a scope's first command). A scope
	// adopts a warm pod as it is: its session's env, working directory
	// and timeout travel with each command to the pod's resident agent,
	// so they never force a cold start.
	PoolSize int `json:"poolSize,omitempty"`
	// AllowEgress lets pods open network connections; by default a
	// NetworkPolicy denies all egress (and ingress).
	AllowEgress bool `json:"allowEgress,omitempty"`
}

// Toleration is a pod toleration, as in the pod spec.
type Toleration struct {
	Key               string `json:"key,omitempty"`
	Operator          string `json:"operator,omitempty"`
	Value             string `json:"value,omitempty"`
	Effect            string `json:"effect,omitempty"`
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}

// section registers Config with its defaults and validation.
var section = sandbox.NewSection("kubernetes", defaults, validate)

func defaults(k *Config) {
	if k.Namespace == "" {
		k.Namespace = "exechost"
	}
	if k.Image == "" {
		k.Image = sandbox.DefaultImage
	}
	if k.PullPolicy == "" {
		k.PullPolicy = "IfNotPresent"
	}
	if k.RunAsUser == 0 {
		k.RunAsUser = 65534
	}
	if k.Memory == "" {
		k.Memory = sandbox.DefaultMemory
	}
	if k.CPUs == 0 {
		k.CPUs = sandbox.DefaultCPUs
	}
	if k.TmpfsSize == "" {
		k.TmpfsSize = sandbox.DefaultTmpfsSize
	}
}

func validate(k Config, c sandbox.Config) []error {
	var errs []error
	bad := func(key, format string, args ...any) { errs = append(errs, sandbox.KeyError(key, format, args...)) }
	switch k.PullPolicy {
	case "", "Always", "IfNotPresent", "Never":
	default:
		bad("pullPolicy", "unknown policy %q (want Always, IfNotPresent or Never)", k.PullPolicy)
	}
	if k.RunAsUser < 0 {
		bad("runAsUser", "must be a non-root uid, not %d", k.RunAsUser)
	}
	errs = append(errs, sandbox.CheckSize("memory", k.Memory)...)
	errs = append(errs, sandbox.CheckSize("tmpfsSize", k.TmpfsSize)...)
	if k.CPUs < 0 {
		bad("cpus", "must not be negative")
	}
	if k.PoolSize < 0 || k.PoolSize > 100 {
		bad("poolSize", "%d is out of range (0 to 100)", k.PoolSize)
	}
	if c.Backend == Name && k.AgentImage == "" {
		bad("agentImage", "required with sandbox.backend \"kubernetes\" (hint: `exechost sandbox image --push REGISTRY/exechost-agent:TAG` builds and pushes one; see docs/sandbox.md)")
	}
	if k.Kubeconfig != "" && !filepath.IsAbs(k.Kubeconfig) {
		bad("kubeconfig", "%q is not an absolute path", k.Kubeconfig)
	}
	for name, q := range k.Requests {
		if name != "cpu" && name != "memory" && name != "ephemeral-storage" {
			bad("requests."+name, "unknown resource (want cpu, memory or ephemeral-storage)")
			continue
		}
		if err := checkQuantity(q); err != nil {
			bad("requests."+name, "%v", err)
		}
	}
	for i, t := range k.Tolerations {
		switch t.Operator {
		case "", "Equal", "Exists":
		default:
			bad(fmt.Sprintf("tolerations[%d].operator", i), "unknown operator %q (want Equal or Exists)", t.Operator)
		}
		switch t.Effect {
		case "", "NoSchedule", "PreferNoSchedule", "NoExecute":
		default:
			bad(fmt.Sprintf("tolerations[%d].effect", i), "unknown effect %q (want NoSchedule, PreferNoSchedule or NoExecute)", t.Effect)
		}
	}
	if len(k.PodTemplate) > 0 {
		if _, err := parseTemplate(k.PodTemplate); err != nil {
			bad("podTemplate", "%v", err)
		}
	}
	return errs
}

// ConfigOf returns cfg's sandbox.kubernetes with its defaults.
func ConfigOf(cfg sandbox.Config) Config { return sandbox.SectionOf[Config](cfg, section.Key) }

// With returns cfg with sandbox.kubernetes changed by edit.
func With(cfg sandbox.Config, edit func(*Config)) sandbox.Config {
	k := ConfigOf(cfg)
	edit(&k)
	return cfg.WithSection(section.Key, k)
}
