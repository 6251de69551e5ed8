package sdk

// The types below are the subset of Kubernetes' v1.Pod and v1.Node that node
// policies look at, with the same field names and JSON names as k8s.io/api so
// a policy reads like one written against client-go. Fields Kubernetes makes
// optional pointers stay pointers (nil means "not set"); the nil-safe helper
// methods answer the usual questions without nil checks.
//
// The decode functions for these types (pod_decode.go) are generated from
// them by internal/gendecode: the json tags name the members, and a parts
// tag names the part of a pod (Parts, Reads) a field belongs to, decoded
// only when the plugin reads it. Run go generate after changing a type.

// Pod is a v1.Pod, reduced to what node policies need.
type Pod struct {
	// ObjectMeta is the pod's metadata.
	ObjectMeta `json:"metadata"`
	// Spec is the pod's desired state.
	Spec PodSpec `json:"spec"`
	// Status is the pod's observed state (phase only).
	Status PodStatus `json:"status"`
}

// ObjectMeta is a v1.ObjectMeta, reduced.
type ObjectMeta struct {
	// Name of the object.
	Name string `json:"name"`
	// GenerateName is the prefix the name was generated from.
	GenerateName string `json:"generateName"`
	// Namespace of the object.
	Namespace string `json:"namespace"`
	// UID of the object.
	UID string `json:"uid"`
	// Labels of the object.
	Labels map[string]string `json:"labels" parts:"Labels"`
	// Annotations of the object.
	Annotations map[string]string `json:"annotations" parts:"Labels"`
	// OwnerReferences name the objects that own this one.
	OwnerReferences []OwnerReference `json:"ownerReferences" parts:"Labels"`
}

// OwnerReference is a v1.OwnerReference, reduced.
type OwnerReference struct {
	// APIVersion of the owner.
	APIVersion string `json:"apiVersion"`
	// Kind of the owner, e.g. "ReplicaSet".
	Kind string `json:"kind"`
	// Name of the owner.
	Name string `json:"name"`
	// UID of the owner.
	UID string `json:"uid"`
	// Controller is true for the managing controller.
	Controller *bool `json:"controller"`
}

// PodSpec is a v1.PodSpec, reduced.
type PodSpec struct {
	// Volumes of the pod.
	Volumes []Volume `json:"volumes" parts:"Volumes"`
	// InitContainers run in order before the app containers.
	InitContainers []Container `json:"initContainers"`
	// Containers are the app containers.
	Containers []Container `json:"containers"`
	// EphemeralContainers are debugging containers added to a running pod.
	EphemeralContainers []Container `json:"ephemeralContainers"`
	// RestartPolicy is Always, OnFailure or Never.
	RestartPolicy string `json:"restartPolicy"`
	// NodeSelector must match the node's labels.
	NodeSelector map[string]string `json:"nodeSelector" parts:"Scheduling"`
	// ServiceAccountName is the pod's service account.
	ServiceAccountName string `json:"serviceAccountName"`
	// NodeName is the node the pod is bound to.
	NodeName string `json:"nodeName"`
	// HostNetwork uses the node's network namespace.
	HostNetwork bool `json:"hostNetwork"`
	// HostPID uses the node's PID namespace.
	HostPID bool `json:"hostPID"`
	// HostIPC uses the node's IPC namespace.
	HostIPC bool `json:"hostIPC"`
	// SecurityContext holds pod-level security settings.
	SecurityContext *PodSecurityContext `json:"securityContext"`
	// Tolerations of the pod.
	Tolerations []Toleration `json:"tolerations" parts:"Scheduling"`
	// PriorityClassName names the pod's priority class.
	PriorityClassName string `json:"priorityClassName"`
	// Priority is the resolved priority value.
	Priority *int32 `json:"priority"`
	// RuntimeClassName names the pod's runtime class.
	RuntimeClassName *string `json:"runtimeClassName"`
}

// Container is a v1.Container (or the common part of a v1.EphemeralContainer),
// reduced.
type Container struct {
	// Name of the container.
	Name string `json:"name"`
	// Image reference.
	Image string `json:"image"`
	// Command overrides the image's entrypoint.
	Command []string `json:"command" parts:"Commands"`
	// Args override the image's cmd.
	Args []string `json:"args" parts:"Commands"`
	// WorkingDir of the process.
	WorkingDir string `json:"workingDir" parts:"Commands"`
	// Ports the container exposes.
	Ports []ContainerPort `json:"ports" parts:"Ports"`
	// Env variables set directly (valueFrom sources are not decoded).
	Env []EnvVar `json:"env" parts:"Env"`
	// Resources requested and limited.
	Resources ResourceRequirements `json:"resources" parts:"Resources"`
	// VolumeMounts of the container.
	VolumeMounts []VolumeMount `json:"volumeMounts" parts:"VolumeMounts"`
	// ImagePullPolicy is Always, IfNotPresent or Never.
	ImagePullPolicy string `json:"imagePullPolicy"`
	// SecurityContext holds container-level security settings.
	SecurityContext *SecurityContext `json:"securityContext"`
}

// ContainerPort is a v1.ContainerPort.
type ContainerPort struct {
	// Name of the port.
	Name string `json:"name"`
	// HostPort exposes the port on the node.
	HostPort int32 `json:"hostPort"`
	// ContainerPort is the port in the container.
	ContainerPort int32 `json:"containerPort"`
	// Protocol is TCP, UDP or SCTP.
	Protocol string `json:"protocol"`
	// HostIP binds the host port.
	HostIP string `json:"hostIP"`
}

// ResourceList maps a resource name ("cpu", "memory") to a quantity as
// written ("250m", "1Gi"; a JSON number keeps its literal text).
type ResourceList map[string]string

// ResourceRequirements is a v1.ResourceRequirements.
type ResourceRequirements struct {
	// Limits are the maximum amounts.
	Limits ResourceList `json:"limits"`
	// Requests are the guaranteed amounts.
	Requests ResourceList `json:"requests"`
}

// VolumeMount is a v1.VolumeMount, reduced.
type VolumeMount struct {
	// Name of the volume.
	Name string `json:"name"`
	// ReadOnly mounts the volume read-only.
	ReadOnly bool `json:"readOnly"`
	// MountPath in the container.
	MountPath string `json:"mountPath"`
	// SubPath within the volume.
	SubPath string `json:"subPath"`
}

// SecurityContext is a v1.SecurityContext, reduced.
type SecurityContext struct {
	// Capabilities added and dropped.
	Capabilities *Capabilities `json:"capabilities"`
	// Privileged runs the container privileged.
	Privileged *bool `json:"privileged"`
	// RunAsUser is the UID of the process.
	RunAsUser *int64 `json:"runAsUser"`
	// RunAsGroup is the GID of the process.
	RunAsGroup *int64 `json:"runAsGroup"`
	// RunAsNonRoot requires a non-zero UID.
	RunAsNonRoot *bool `json:"runAsNonRoot"`
	// ReadOnlyRootFilesystem mounts the root filesystem read-only.
	ReadOnlyRootFilesystem *bool `json:"readOnlyRootFilesystem"`
	// AllowPrivilegeEscalation controls no_new_privs.
	AllowPrivilegeEscalation *bool `json:"allowPrivilegeEscalation"`
	// SeccompProfile of the container.
	SeccompProfile *SeccompProfile `json:"seccompProfile"`
}

// Capabilities is a v1.Capabilities.
type Capabilities struct {
	// Add lists capabilities to add.
	Add []string `json:"add"`
	// Drop lists capabilities to drop.
	Drop []string `json:"drop"`
}

// SeccompProfile is a v1.SeccompProfile.
type SeccompProfile struct {
	// Type is RuntimeDefault, Unconfined or Localhost.
	Type string `json:"type"`
	// LocalhostProfile is the profile's path for type Localhost.
	LocalhostProfile *string `json:"localhostProfile"`
}

// PodSecurityContext is a v1.PodSecurityContext, reduced.
type PodSecurityContext struct {
	// RunAsUser is the default UID of the pod's processes.
	RunAsUser *int64 `json:"runAsUser"`
	// RunAsGroup is the default GID.
	RunAsGroup *int64 `json:"runAsGroup"`
	// RunAsNonRoot requires non-zero UIDs.
	RunAsNonRoot *bool `json:"runAsNonRoot"`
	// SupplementalGroups are added to every process.
	SupplementalGroups []int64 `json:"supplementalGroups"`
	// FSGroup owns the pod's volumes.
	FSGroup *int64 `json:"fsGroup"`
	// Sysctls set in the pod's namespaces.
	Sysctls []Sysctl `json:"sysctls"`
	// SeccompProfile is the pod's default profile.
	SeccompProfile *SeccompProfile `json:"seccompProfile"`
}

// Sysctl is a v1.Sysctl.
type Sysctl struct {
	// Name of the sysctl.
	Name string `json:"name"`
	// Value of the sysctl.
	Value string `json:"value"`
}

// Toleration is a v1.Toleration.
type Toleration struct {
	// Key is the taint key.
	Key string `json:"key"`
	// Operator is Exists or Equal.
	Operator string `json:"operator"`
	// Value is the taint value.
	Value string `json:"value"`
	// Effect is the taint effect.
	Effect string `json:"effect"`
	// TolerationSeconds bounds a NoExecute toleration.
	TolerationSeconds *int64 `json:"tolerationSeconds"`
}

// Volume is a v1.Volume with only its hostPath source decoded.
type Volume struct {
	// Name of the volume.
	Name string `json:"name"`
	// HostPath is set for a hostPath volume.
	HostPath *HostPathVolumeSource `json:"hostPath"`
}

// HostPathVolumeSource is a v1.HostPathVolumeSource.
type HostPathVolumeSource struct {
	// Path on the node.
	Path string `json:"path"`
	// Type of the path check.
	Type *string `json:"type"`
}

// PodStatus is a v1.PodStatus, reduced to the phase.
type PodStatus struct {
	// Phase is Pending, Running, Succeeded, Failed or Unknown.
	Phase string `json:"phase"`
}

// Node is a v1.Node, reduced.
type Node struct {
	// ObjectMeta is the node's metadata.
	ObjectMeta `json:"metadata"`
	// Spec is the node's spec.
	Spec NodeSpec `json:"spec"`
	// Status is the node's status (capacity and allocatable).
	Status NodeStatus `json:"status"`
}

// NodeSpec is a v1.NodeSpec, reduced.
type NodeSpec struct {
	// Unschedulable marks a cordoned node.
	Unschedulable bool `json:"unschedulable"`
	// Taints of the node.
	Taints []Taint `json:"taints"`
}

// Taint is a v1.Taint, reduced.
type Taint struct {
	// Key of the taint.
	Key string `json:"key"`
	// Value of the taint.
	Value string `json:"value"`
	// Effect is NoSchedule, PreferNoSchedule or NoExecute.
	Effect string `json:"effect"`
}

// NodeStatus is a v1.NodeStatus, reduced.
type NodeStatus struct {
	// Capacity of the node.
	Capacity ResourceList `json:"capacity"`
	// Allocatable resources of the node.
	Allocatable ResourceList `json:"allocatable"`
}

// IsPrivileged reports whether the security context asks for a privileged
// container. It is nil-safe.
func (s *SecurityContext) IsPrivileged() bool {
	return s != nil && s.Privileged != nil && *s.Privileged
}

// AllContainers returns the init, app and ephemeral containers, in that order.
func (s *PodSpec) AllContainers() []*Container {
	all := make([]*Container, 0, len(s.InitContainers)+len(s.Containers)+len(s.EphemeralContainers))
	for _, list := range [][]Container{s.InitContainers, s.Containers, s.EphemeralContainers} {
		for i := range list {
			all = append(all, &list[i])
		}
	}
	return all
}

// DecodePod decodes a v1.Pod's JSON without reflection. Unknown fields are
// skipped; malformed JSON or a field of the wrong type is an error.
func DecodePod(data []byte) (Pod, error) {
	var p Pod
	d := newDecoder(clone(data))
	decodePod(d, &p)
	return p, d.end()
}

// DecodeNode decodes a v1.Node's JSON without reflection.
func DecodeNode(data []byte) (Node, error) {
	var n Node
	d := newDecoder(clone(data))
	decodeNode(d, &n)
	return n, d.end()
}

// clone copies a caller's buffer once so decoded strings can alias it.
func clone(b []byte) []byte { return append([]byte(nil), b...) }

//go:generate go run ./internal/gendecode
