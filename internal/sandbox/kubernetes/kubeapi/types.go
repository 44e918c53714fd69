package kubeapi

import (
	"encoding/json"
	"reflect"
	"strings"
)

// The API objects the driver uses, with the fields it sets or reads, in
// the API server's JSON form (core/v1, networking/v1, node/v1,
// authorization/v1). Fields not listed here are dropped on decode; the
// driver never reads an object back to write it whole, except the
// NetworkPolicy, all of whose spec it owns.

// ObjectMeta is metadata of an object.
type ObjectMeta struct {
	Name              string            `json:"name,omitempty"`
	Namespace         string            `json:"namespace,omitempty"`
	UID               string            `json:"uid,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	DeletionTimestamp *string           `json:"deletionTimestamp,omitempty"`
}

// ListMeta is metadata of a list.
type ListMeta struct {
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// Pod is a core/v1 Pod.
type Pod struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	ObjectMeta `json:"metadata"`
	Spec       PodSpec   `json:"spec"`
	Status     PodStatus `json:"status,omitzero"`
}

// PodList is a list of pods.
type PodList struct {
	ListMeta `json:"metadata"`
	Items    []Pod `json:"items"`
}

// PodSpec is a pod's spec. Extra holds fields of an operator's template
// this type does not model (affinity, priorityClassName,
// imagePullSecrets, …); they are written as they came, under the typed
// fields.
type PodSpec struct {
	RestartPolicy                 string              `json:"restartPolicy,omitempty"`
	AutomountServiceAccountToken  *bool               `json:"automountServiceAccountToken,omitempty"`
	EnableServiceLinks            *bool               `json:"enableServiceLinks,omitempty"`
	TerminationGracePeriodSeconds *int64              `json:"terminationGracePeriodSeconds,omitempty"`
	SecurityContext               *PodSecurityContext `json:"securityContext,omitempty"`
	Volumes                       []Volume            `json:"volumes,omitempty"`
	InitContainers                []Container         `json:"initContainers,omitempty"`
	Containers                    []Container         `json:"containers"`
	EphemeralContainers           []json.RawMessage   `json:"ephemeralContainers,omitempty"`
	RuntimeClassName              *string             `json:"runtimeClassName,omitempty"`
	NodeSelector                  map[string]string   `json:"nodeSelector,omitempty"`
	Tolerations                   []Toleration        `json:"tolerations,omitempty"`
	NodeName                      string              `json:"nodeName,omitempty"`
	HostNetwork                   bool                `json:"hostNetwork,omitempty"`
	HostPID                       bool                `json:"hostPID,omitempty"`
	HostIPC                       bool                `json:"hostIPC,omitempty"`

	Extra map[string]json.RawMessage `json:"-"`
}

type podSpecFields PodSpec

// MarshalJSON writes the typed fields, then those of Extra no typed field
// has.
func (s PodSpec) MarshalJSON() ([]byte, error) {
	typed, err := json.Marshal(podSpecFields(s))
	if err != nil || len(s.Extra) == 0 {
		return typed, err
	}
	m := map[string]json.RawMessage{}
	if err := json.Unmarshal(typed, &m); err != nil {
		return nil, err
	}
	known := PodSpecFields()
	for k, v := range s.Extra {
		if _, ok := m[k]; !ok && !known[k] {
			m[k] = v
		}
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads the typed fields and keeps the rest in Extra.
func (s *PodSpec) UnmarshalJSON(b []byte) error {
	var f podSpecFields
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	known := PodSpecFields()
	for k := range m {
		if known[k] {
			delete(m, k)
		}
	}
	f.Extra = nil
	if len(m) > 0 {
		f.Extra = m
	}
	*s = PodSpec(f)
	return nil
}

// PodSpecFields returns the JSON names of PodSpec's typed fields.
func PodSpecFields() map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeFor[podSpecFields]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}

// PodSecurityContext is a pod's security context.
type PodSecurityContext struct {
	RunAsUser      *int64          `json:"runAsUser,omitempty"`
	RunAsGroup     *int64          `json:"runAsGroup,omitempty"`
	RunAsNonRoot   *bool           `json:"runAsNonRoot,omitempty"`
	SeccompProfile *SeccompProfile `json:"seccompProfile,omitempty"`
}

// SecurityContext is a container's security context.
type SecurityContext struct {
	RunAsUser                *int64          `json:"runAsUser,omitempty"`
	RunAsGroup               *int64          `json:"runAsGroup,omitempty"`
	RunAsNonRoot             *bool           `json:"runAsNonRoot,omitempty"`
	AllowPrivilegeEscalation *bool           `json:"allowPrivilegeEscalation,omitempty"`
	Privileged               *bool           `json:"privileged,omitempty"`
	ReadOnlyRootFilesystem   *bool           `json:"readOnlyRootFilesystem,omitempty"`
	Capabilities             *Capabilities   `json:"capabilities,omitempty"`
	SeccompProfile           *SeccompProfile `json:"seccompProfile,omitempty"`
}

// Capabilities are added and dropped Linux capabilities.
type Capabilities struct {
	Add  []string `json:"add,omitempty"`
	Drop []string `json:"drop,omitempty"`
}

// SeccompProfile names a seccomp profile ("RuntimeDefault").
type SeccompProfile struct {
	Type string `json:"type"`
}

// Volume is a pod volume; only emptyDir is modelled.
type Volume struct {
	Name     string          `json:"name"`
	EmptyDir *EmptyDirVolume `json:"emptyDir,omitempty"`
}

// EmptyDirVolume is an emptyDir volume source.
type EmptyDirVolume struct {
	Medium    string `json:"medium,omitempty"`
	SizeLimit string `json:"sizeLimit,omitempty"`
}

// Container is a pod's container.
type Container struct {
	Name            string               `json:"name"`
	Image           string               `json:"image,omitempty"`
	ImagePullPolicy string               `json:"imagePullPolicy,omitempty"`
	Command         []string             `json:"command,omitempty"`
	WorkingDir      string               `json:"workingDir,omitempty"`
	Stdin           bool                 `json:"stdin,omitempty"`
	StdinOnce       bool                 `json:"stdinOnce,omitempty"`
	SecurityContext *SecurityContext     `json:"securityContext,omitempty"`
	Resources       ResourceRequirements `json:"resources,omitzero"`
	VolumeMounts    []VolumeMount        `json:"volumeMounts,omitempty"`
}

// ResourceRequirements are a container's limits and requests, as
// Kubernetes quantities by resource name ("cpu": "500m").
type ResourceRequirements struct {
	Limits   map[string]string `json:"limits,omitempty"`
	Requests map[string]string `json:"requests,omitempty"`
}

// VolumeMount mounts a volume into a container.
type VolumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
}

// Toleration is a pod toleration.
type Toleration struct {
	Key               string `json:"key,omitempty"`
	Operator          string `json:"operator,omitempty"`
	Value             string `json:"value,omitempty"`
	Effect            string `json:"effect,omitempty"`
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}

// PodStatus is a pod's status.
type PodStatus struct {
	Phase                 string            `json:"phase,omitempty"`
	Reason                string            `json:"reason,omitempty"`
	Message               string            `json:"message,omitempty"`
	Conditions            []PodCondition    `json:"conditions,omitempty"`
	InitContainerStatuses []ContainerStatus `json:"initContainerStatuses,omitempty"`
	ContainerStatuses     []ContainerStatus `json:"containerStatuses,omitempty"`
}

// Pod phases.
const (
	PodPending   = "Pending"
	PodRunning   = "Running"
	PodSucceeded = "Succeeded"
	PodFailed    = "Failed"
)

// PodCondition is one of a pod's conditions.
type PodCondition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// ContainerStatus is a container's state.
type ContainerStatus struct {
	Name  string         `json:"name"`
	State ContainerState `json:"state,omitzero"`
}

// ContainerState holds at most one of its states.
type ContainerState struct {
	Waiting    *ContainerWaiting    `json:"waiting,omitempty"`
	Running    *ContainerRunning    `json:"running,omitempty"`
	Terminated *ContainerTerminated `json:"terminated,omitempty"`
}

// ContainerWaiting is a container not yet running.
type ContainerWaiting struct {
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// ContainerRunning is a running container.
type ContainerRunning struct {
	StartedAt string `json:"startedAt,omitempty"`
}

// ContainerTerminated is a container that ended.
type ContainerTerminated struct {
	ExitCode int32  `json:"exitCode"`
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message,omitempty"`
}

// Namespace is a core/v1 Namespace.
type Namespace struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	ObjectMeta `json:"metadata"`
}

// NetworkPolicy is a networking/v1 NetworkPolicy.
type NetworkPolicy struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	ObjectMeta `json:"metadata"`
	Spec       NetworkPolicySpec `json:"spec"`
}

// NetworkPolicySpec selects pods and lists the traffic allowed them;
// the rules are kept as JSON ({} allows everything).
type NetworkPolicySpec struct {
	PodSelector LabelSelector     `json:"podSelector"`
	PolicyTypes []string          `json:"policyTypes,omitempty"`
	Ingress     []json.RawMessage `json:"ingress,omitempty"`
	Egress      []json.RawMessage `json:"egress,omitempty"`
}

// LabelSelector selects by labels.
type LabelSelector struct {
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// RuntimeClass is a node/v1 RuntimeClass.
type RuntimeClass struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	ObjectMeta `json:"metadata"`
	Handler    string `json:"handler"`
}

// SelfSubjectAccessReview asks whether the caller may do something.
type SelfSubjectAccessReview struct {
	APIVersion string                      `json:"apiVersion"`
	Kind       string                      `json:"kind"`
	Spec       SelfSubjectAccessReviewSpec `json:"spec"`
	Status     SubjectAccessReviewStatus   `json:"status,omitzero"`
}

// SelfSubjectAccessReviewSpec is the question.
type SelfSubjectAccessReviewSpec struct {
	ResourceAttributes *ResourceAttributes `json:"resourceAttributes,omitempty"`
}

// ResourceAttributes name an action on a resource.
type ResourceAttributes struct {
	Namespace   string `json:"namespace,omitempty"`
	Verb        string `json:"verb,omitempty"`
	Group       string `json:"group,omitempty"`
	Resource    string `json:"resource,omitempty"`
	Subresource string `json:"subresource,omitempty"`
	Name        string `json:"name,omitempty"`
}

// SubjectAccessReviewStatus is the answer.
type SubjectAccessReviewStatus struct {
	Allowed bool   `json:"allowed"`
	Denied  bool   `json:"denied,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// Status is the API server's answer to a failed request (and the
// outcome of an exec or attach stream).
type Status struct {
	Kind    string         `json:"kind,omitempty"`
	Status  string         `json:"status,omitempty"`
	Message string         `json:"message,omitempty"`
	Reason  string         `json:"reason,omitempty"`
	Code    int            `json:"code,omitempty"`
	Details *StatusDetails `json:"details,omitempty"`
}

// StatusDetails names the object a Status is about.
type StatusDetails struct {
	Name  string `json:"name,omitempty"`
	Group string `json:"group,omitempty"`
	Kind  string `json:"kind,omitempty"`
}
