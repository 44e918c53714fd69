package kubernetes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var nodeResource = schema.GroupResource{Group: "node.k8s.io", Resource: "runtimeclasses"}

// checkQuantity reports a Kubernetes quantity ("250m", "128Mi") that does
// not parse.
func checkQuantity(q string) error {
	if _, err := resource.ParseQuantity(q); err != nil {
		return fmt.Errorf("%q is not a Kubernetes quantity (e.g. 250m, 128Mi)", q)
	}
	return nil
}

// parseTemplate decodes sandbox.kubernetes.podTemplate and refuses what
// would weaken or replace the driver's pod: containers and volumes are the
// driver's, and the host's namespaces are never shared.
func parseTemplate(raw json.RawMessage) (*corev1.Pod, error) {
	var p corev1.Pod
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("not a pod (%v)", err)
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
func (b *Backend) fromTemplate(p *corev1.Pod) error {
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
		spec.Containers, spec.InitContainers, spec.Volumes = ours.Containers, ours.InitContainers, ours.Volumes
		spec.RestartPolicy = ours.RestartPolicy
		spec.AutomountServiceAccountToken = ours.AutomountServiceAccountToken
		spec.EnableServiceLinks = ours.EnableServiceLinks
		spec.TerminationGracePeriodSeconds = ours.TerminationGracePeriodSeconds
		spec.SecurityContext = ours.SecurityContext
		spec.HostNetwork, spec.HostPID, spec.HostIPC = false, false, false
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
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{
			Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value,
			Effect: corev1.TaintEffect(t.Effect), TolerationSeconds: t.TolerationSeconds,
		})
	}
	return nil
}

// probePod is a sandbox pod for checks (dry runs, doctor's probe).
func (b *Backend) probePod() *corev1.Pod {
	p, err := b.podFor("exechost-probe-"+b.owner, "doctor", "")
	if err != nil {
		// podFor fails only on a config Validate refuses.
		return &corev1.Pod{}
	}
	return p
}
