package kubernetes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/exechost/exechost/internal/sandbox/kubernetes/kubeapi"
)

// checkQuantity reports a Kubernetes quantity ("250m", "128Mi") that does
// not parse: a decimal number, then a binary (Ki…Ei), decimal (n, u, m,
// k, M…E) or exponent suffix. (Written out rather than a package-level
// regexp, whose compilation every exechost process would pay at start.)
func checkQuantity(q string) error {
	bad := fmt.Errorf("%q is not a Kubernetes quantity (e.g. 250m, 128Mi)", q)
	s := strings.TrimLeft(q, "+-")
	if len(q)-len(s) > 1 {
		return bad
	}
	digits := func(s string) (int, string) {
		n := 0
		for n < len(s) && s[n] >= '0' && s[n] <= '9' {
			n++
		}
		return n, s[n:]
	}
	n, s := digits(s)
	if strings.HasPrefix(s, ".") {
		var m int
		m, s = digits(s[1:])
		n += m
	}
	if n == 0 {
		return bad
	}
	switch {
	case s == "", len(s) == 1 && strings.Contains("numkMGTPE", s), len(s) == 2 && s[1] == 'i' && strings.Contains("KMGTPE", s[:1]):
		return nil
	case s[0] == 'e' || s[0] == 'E':
		e := strings.TrimLeft(s[1:], "+-")
		if len(s[1:])-len(e) <= 1 {
			if m, rest := digits(e); m > 0 && rest == "" {
				return nil
			}
		}
	}
	return bad
}

// The field names of a pod, its metadata and its spec (core/v1 as of
// Kubernetes 1.34), so that a misspelt field of a template is refused at
// config load rather than dropped. The API server checks the fields'
// contents (pods are created with fieldValidation=Strict).
var (
	podFields  = []string{"apiVersion", "kind", "metadata", "spec", "status"}
	metaFields = []string{"name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
		"creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
		"ownerReferences", "finalizers", "managedFields"}
	specFields = []string{"volumes", "initContainers", "containers", "ephemeralContainers", "restartPolicy",
		"terminationGracePeriodSeconds", "activeDeadlineSeconds", "dnsPolicy", "nodeSelector", "serviceAccountName",
		"serviceAccount", "automountServiceAccountToken", "nodeName", "hostNetwork", "hostPID", "hostIPC",
		"shareProcessNamespace", "securityContext", "imagePullSecrets", "hostname", "subdomain", "affinity",
		"schedulerName", "tolerations", "hostAliases", "priorityClassName", "priority", "dnsConfig", "readinessGates",
		"runtimeClassName", "enableServiceLinks", "preemptionPolicy", "overhead", "topologySpreadConstraints",
		"setHostnameAsFQDN", "os", "hostUsers", "schedulingGates", "resourceClaims", "resources", "hostnameOverride"}
)

// unknownKeys returns the keys of the JSON object raw not in known.
func unknownKeys(raw json.RawMessage, known []string) ([]string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	var out []string
	for k := range m {
		if !slices.Contains(known, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, nil
}

// parseTemplate decodes sandbox.kubernetes.podTemplate and refuses what
// would weaken or replace the driver's pod: containers and volumes are the
// driver's, and the host's namespaces are never shared.
func parseTemplate(raw json.RawMessage) (*kubeapi.Pod, error) {
	var top struct {
		Metadata json.RawMessage `json:"metadata"`
		Spec     json.RawMessage `json:"spec"`
	}
	notPod := func(err error) error { return fmt.Errorf("not a pod (%v)", err) }
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, notPod(err)
	}
	for _, c := range []struct {
		what  string
		raw   json.RawMessage
		known []string
	}{{"", raw, podFields}, {"metadata.", top.Metadata, metaFields}, {"spec.", top.Spec, specFields}} {
		if len(c.raw) == 0 || bytes.Equal(c.raw, []byte("null")) {
			continue
		}
		bad, err := unknownKeys(c.raw, c.known)
		if err != nil {
			return nil, notPod(err)
		}
		if len(bad) > 0 {
			return nil, notPod(fmt.Errorf("unknown field %q", c.what+strings.Join(bad, ", "+c.what)))
		}
	}
	var p kubeapi.Pod
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, notPod(err)
	}
	s := p.Spec
	var errs []error
	refuse := func(field, why string) { errs = append(errs, fmt.Errorf("spec.%s: %s", field, why)) }
	if len(s.Containers)+len(s.InitContainers)+len(s.EphemeralContainers) > 0 {
		refuse("containers", "the driver makes the containers (set image, agentImage, requests, memory and cpus in sandbox.kubernetes)")
	}
	if len(s.Volumes) > 0 {
		refuse("volumes", "the driver makes the volumes")
	}
	if s.HostNetwork || s.HostPID || s.HostIPC {
		refuse("hostNetwork/hostPID/hostIPC", "a sandbox never shares the node's namespaces")
	}
	if s.NodeName != "" {
		refuse("nodeName", "use nodeSelector or affinity")
	}
	return &p, errors.Join(errs...)
}

// fromTemplate applies the operator's template under the driver's pod:
// the template's labels, annotations and scheduling fields stay, the
// driver's containers, volumes and security settings win, and the
// config's runtimeClassName, nodeSelector and tolerations are added.
func (b *Backend) fromTemplate(p *kubeapi.Pod) error {
	k := b.k
	if len(k.PodTemplate) > 0 {
		t, err := parseTemplate(k.PodTemplate)
		if err != nil {
			return fmt.Errorf("sandbox.kubernetes.podTemplate: %w", err)
		}
		labels := maps.Clone(t.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, p.Labels)
		p.Labels = labels
		p.Annotations = t.Annotations
		ours := p.Spec
		spec := t.Spec
		spec.Containers, spec.InitContainers, spec.Volumes, spec.EphemeralContainers = ours.Containers, ours.InitContainers, ours.Volumes, nil
		spec.RestartPolicy = ours.RestartPolicy
		spec.AutomountServiceAccountToken = ours.AutomountServiceAccountToken
		spec.EnableServiceLinks = ours.EnableServiceLinks
		spec.TerminationGracePeriodSeconds = ours.TerminationGracePeriodSeconds
		spec.SecurityContext = ours.SecurityContext
		spec.HostNetwork, spec.HostPID, spec.HostIPC, spec.NodeName = false, false, false, ""
		p.Spec = spec
	}
	if k.RuntimeClassName != "" {
		rc := k.RuntimeClassName
		p.Spec.RuntimeClassName = &rc
	}
	if len(k.NodeSelector) > 0 {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		maps.Copy(p.Spec.NodeSelector, k.NodeSelector)
	}
	for _, t := range k.Tolerations {
		p.Spec.Tolerations = append(p.Spec.Tolerations, kubeapi.Toleration{
			Key: t.Key, Operator: t.Operator, Value: t.Value, Effect: t.Effect, TolerationSeconds: t.TolerationSeconds,
		})
	}
	return nil
}

// probePod is a sandbox pod for checks (dry runs, doctor's probe).
func (b *Backend) probePod() *kubeapi.Pod {
	p, err := b.podFor("exechost-probe-"+b.owner, "doctor", "")
	if err != nil {
		// podFor fails only on a config Validate refuses.
		return &kubeapi.Pod{}
	}
	return p
}
