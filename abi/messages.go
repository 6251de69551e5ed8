package abi

import "encoding/json"

// Messages are JSON in ABI v1. Kubernetes objects travel as their usual JSON
// (v1.Pod, v1.Node, v1.Container) in json.RawMessage fields, so this package
// needs no Kubernetes dependency and each side decodes them with whatever it
// likes (the host with k8s.io/api, the SDK with its own reflection-free
// decoder).

// AdmitRequest is the input of the admission export.
type AdmitRequest struct {
	// Pod is the v1.Pod asking to be admitted.
	Pod json.RawMessage `json:"pod"`
	// Node is the v1.Node the agent runs as (may be absent in standalone mode
	// before registration).
	Node json.RawMessage `json:"node,omitempty"`
	// PodsOnNode are the v1.Pods already admitted on this node.
	PodsOnNode []json.RawMessage `json:"podsOnNode,omitempty"`
}

// AdmitResponse is the result of the admission export, shaped like the
// kubelet's PodAdmitResult.
type AdmitResponse struct {
	// Allowed is true when the pod may run.
	Allowed bool `json:"allowed"`
	// Reason is a short CamelCase reason for a denial, e.g. "Privileged".
	Reason string `json:"reason,omitempty"`
	// Message is a human-readable explanation of a denial.
	Message string `json:"message,omitempty"`
	// Error, when set, means the plugin failed to decide; the host applies
	// the manifest's failure policy.
	Error string `json:"error,omitempty"`
}

// Op is a pod update operation, the kubelet's op model.
type Op string

// The operations a source may return.
const (
	// OpSet replaces the source's whole set of pods.
	OpSet Op = "SET"
	// OpAdd adds pods.
	OpAdd Op = "ADD"
	// OpUpdate changes pods.
	OpUpdate Op = "UPDATE"
	// OpRemove removes pods (they are killed).
	OpRemove Op = "REMOVE"
	// OpDelete marks pods for graceful deletion.
	OpDelete Op = "DELETE"
)

// SourceRequest is the input of the source export, sent at every poll.
type SourceRequest struct {
	// Seq counts polls of this plugin since it was loaded, from 1.
	Seq uint64 `json:"seq"`
}

// SourceResponse is the result of the source export.
type SourceResponse struct {
	// Updates are applied in order. An empty list means "no change".
	Updates []PodUpdate `json:"updates,omitempty"`
	// NextPollMillis asks for the next poll after this many milliseconds;
	// 0 keeps the host's interval.
	NextPollMillis int64 `json:"nextPollMillis,omitempty"`
	// Error, when set, means the poll failed; the host logs it and keeps the
	// source's last good state.
	Error string `json:"error,omitempty"`
}

// PodUpdate is one operation on a set of pods (v1.Pod JSON each).
type PodUpdate struct {
	// Op is the operation.
	Op Op `json:"op"`
	// Pods are the pods it applies to.
	Pods []json.RawMessage `json:"pods"`
}

// HookPoint is a lifecycle point at which hooks are called.
type HookPoint string

// The lifecycle points of ABI v1.
const (
	// HookPreSandbox is called before a pod sandbox is created; adjustments
	// apply to the sandbox config.
	HookPreSandbox HookPoint = "PreSandbox"
	// HookPreCreate is called before a container is created; adjustments
	// apply to that container.
	HookPreCreate HookPoint = "PreCreate"
	// HookValidate is called once every plugin's PreCreate adjustments are
	// merged into the container's CRI config (HookRequest.Config); the
	// plugin may refuse the container (HookResponse.Refuse). An addition,
	// called only for plugins whose manifest lists it in points.
	HookValidate HookPoint = "Validate"
	// HookPostStart is called after a container started.
	HookPostStart HookPoint = "PostStart"
	// HookPreUpdate is called before a running container's resources are
	// changed (HookRequest.Resources are the new ones). An addition, called
	// only for plugins whose manifest lists it in points.
	HookPreUpdate HookPoint = "PreUpdate"
	// HookPreStop is called before a container is stopped.
	HookPreStop HookPoint = "PreStop"
	// HookPostStop is called once a container has stopped
	// (HookRequest.ExitCode, HookRequest.Reason). An addition, called only
	// for plugins whose manifest lists it in points.
	HookPostStop HookPoint = "PostStop"
	// HookPodTerminated is called once a pod's containers and sandbox are gone.
	HookPodTerminated HookPoint = "PodTerminated"
)

// HookPoints lists every lifecycle point in lifecycle order.
var HookPoints = []HookPoint{HookPreSandbox, HookPreCreate, HookValidate, HookPostStart, HookPreUpdate, HookPreStop, HookPostStop, HookPodTerminated}

// DefaultHookPoints are the points a hook plugin whose manifest lists no
// points is called at: the points of the initial ABI v1.
var DefaultHookPoints = []HookPoint{HookPreSandbox, HookPreCreate, HookPostStart, HookPreStop, HookPodTerminated}

// HookRequest is the input of the hook export.
type HookRequest struct {
	// Point is the lifecycle point.
	Point HookPoint `json:"point"`
	// Pod is the v1.Pod.
	Pod json.RawMessage `json:"pod"`
	// Container is the v1.Container concerned, for container points.
	Container json.RawMessage `json:"container,omitempty"`
	// Config is the container's final CRI config after every plugin's
	// adjustments, at Validate only. An addition.
	Config *ContainerConfig `json:"config,omitempty"`
	// Resources are the resources the container is being changed to, at
	// PreUpdate only. An addition.
	Resources *Resources `json:"resources,omitempty"`
	// ExitCode is the stopped container's exit code, at PostStop only
	// (absent when the runtime reports none). An addition.
	ExitCode *int32 `json:"exitCode,omitempty"`
	// Reason is the runtime's reason for the stop ("Completed", "Error",
	// "OOMKilled"), at PostStop only. An addition.
	Reason string `json:"reason,omitempty"`
}

// HookResponse is the result of the hook export.
type HookResponse struct {
	// Adjustment is honoured at PreSandbox and PreCreate (each field only
	// where SPEC.md §3.3 says, and only as the manifest's
	// permissions.adjust allow); ignored at other points.
	Adjustment *Adjustment `json:"adjustment,omitempty"`
	// Refuse, at Validate, refuses the container with this message: it is
	// not created and waits with reason CreateContainerConfigError. Ignored
	// at other points. An addition.
	Refuse string `json:"refuse,omitempty"`
	// Error, when set, fails the lifecycle step under failure policy Fail.
	Error string `json:"error,omitempty"`
}

// Adjustment is a change a hook asks for, in the style of containerd NRI,
// within what the CRI can express. Every field but Env, Labels and
// Annotations is an addition; each field needs its AdjustField in the
// manifest's permissions.adjust.
type Adjustment struct {
	// Env variables are added to the container, replacing same-named ones.
	Env []EnvVar `json:"env,omitempty"`
	// Labels are added to the CRI sandbox or container config.
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are added to the CRI sandbox or container config.
	Annotations map[string]string `json:"annotations,omitempty"`
	// Mounts are added to the container; one at the same container path
	// replaces the pod's. Host paths must lie under the manifest's
	// permissions.hostPaths.
	Mounts []Mount `json:"mounts,omitempty"`
	// Devices are added to the container. Host paths must lie under the
	// manifest's permissions.hostPaths.
	Devices []Device `json:"devices,omitempty"`
	// CDIDevices are fully qualified CDI device names
	// ("vendor.com/class=name") added to the container.
	CDIDevices []string `json:"cdiDevices,omitempty"`
	// Resources set fields of the container's Linux resources.
	Resources *Resources `json:"resources,omitempty"`
	// OOMScoreAdj sets the container's OOM score adjustment.
	OOMScoreAdj *int64 `json:"oomScoreAdj,omitempty"`
	// Sysctls are set on the pod sandbox (PreSandbox only).
	Sysctls map[string]string `json:"sysctls,omitempty"`
	// Remove takes away env variables, mounts and annotations the pod spec
	// put there (never what another plugin added).
	Remove *Removal `json:"remove,omitempty"`
}

// EnvVar is one environment variable.
type EnvVar struct {
	// Name of the variable.
	Name string `json:"name"`
	// Value of the variable.
	Value string `json:"value"`
}

// MountPropagation is a mount's propagation, named as in the Kubernetes
// API.
type MountPropagation string

// The mount propagations of the CRI.
const (
	// PropagationNone is a private mount, the default.
	PropagationNone MountPropagation = "None"
	// PropagationHostToContainer is a recursive slave mount (CRI
	// PROPAGATION_HOST_TO_CONTAINER).
	PropagationHostToContainer MountPropagation = "HostToContainer"
	// PropagationBidirectional is a recursive shared mount (CRI
	// PROPAGATION_BIDIRECTIONAL).
	PropagationBidirectional MountPropagation = "Bidirectional"
)

// Mount is a bind mount of a host path into a container.
type Mount struct {
	// HostPath is the absolute path on the node.
	HostPath string `json:"hostPath"`
	// ContainerPath is the absolute path in the container.
	ContainerPath string `json:"containerPath"`
	// ReadOnly mounts it read-only.
	ReadOnly bool `json:"readOnly,omitempty"`
	// Propagation is None (the default), HostToContainer or Bidirectional.
	Propagation MountPropagation `json:"propagation,omitempty"`
}

// Device is a host device node made available in a container.
type Device struct {
	// HostPath is the device node on the node, e.g. "/dev/fuse".
	HostPath string `json:"hostPath"`
	// ContainerPath is where it appears in the container; default HostPath.
	ContainerPath string `json:"containerPath,omitempty"`
	// Permissions are the cgroup device permissions, letters of "rwm";
	// default "rwm".
	Permissions string `json:"permissions,omitempty"`
}

// Resources are a container's Linux resources as the CRI has them
// (LinuxContainerResources). An unset field is left as it is.
type Resources struct {
	// CPUShares is the relative CPU weight (cgroup v1 shares).
	CPUShares *int64 `json:"cpuShares,omitempty"`
	// CPUQuota is the CFS quota in microseconds per CPUPeriod.
	CPUQuota *int64 `json:"cpuQuota,omitempty"`
	// CPUPeriod is the CFS period in microseconds.
	CPUPeriod *int64 `json:"cpuPeriod,omitempty"`
	// CpusetCPUs are the CPUs the container may use, e.g. "0-1".
	CpusetCPUs string `json:"cpusetCpus,omitempty"`
	// CpusetMems are the memory nodes the container may use.
	CpusetMems string `json:"cpusetMems,omitempty"`
	// MemoryLimitBytes is the memory limit in bytes.
	MemoryLimitBytes *int64 `json:"memoryLimitBytes,omitempty"`
	// HugepageLimits limit huge pages by page size.
	HugepageLimits []HugepageLimit `json:"hugepageLimits,omitempty"`
}

// HugepageLimit limits one huge page size.
type HugepageLimit struct {
	// PageSize is the page size as the kernel's hugetlb controller names it,
	// e.g. "2MB", "1GB".
	PageSize string `json:"pageSize"`
	// Limit is the limit in bytes.
	Limit uint64 `json:"limit"`
}

// Removal names what an adjustment takes away from the pod spec's
// container config.
type Removal struct {
	// Env are environment variable names.
	Env []string `json:"env,omitempty"`
	// Mounts are container paths.
	Mounts []string `json:"mounts,omitempty"`
	// Annotations are annotation keys.
	Annotations []string `json:"annotations,omitempty"`
}

// ContainerConfig is the typed view of a container's final CRI config a
// validator sees at Validate: the fields hooks can adjust, after every
// plugin's adjustments.
type ContainerConfig struct {
	// Image is the image reference the container is created from.
	Image string `json:"image,omitempty"`
	// Env is the container's environment.
	Env []EnvVar `json:"env,omitempty"`
	// Labels of the CRI container config.
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations of the CRI container config.
	Annotations map[string]string `json:"annotations,omitempty"`
	// Mounts are every mount of the container: the pod's volumes and the
	// plugins'.
	Mounts []Mount `json:"mounts,omitempty"`
	// Devices of the container.
	Devices []Device `json:"devices,omitempty"`
	// CDIDevices of the container.
	CDIDevices []string `json:"cdiDevices,omitempty"`
	// Resources of the container.
	Resources *Resources `json:"resources,omitempty"`
	// OOMScoreAdj of the container.
	OOMScoreAdj *int64 `json:"oomScoreAdj,omitempty"`
	// Owners names the plugin that set each adjusted field, by its conflict
	// key (AdjustField, then ":" and the name or path where the field has
	// several entries, e.g. "mounts:/data", "resources:memoryLimitBytes").
	Owners map[string]string `json:"owners,omitempty"`
}

// HTTPRequest is the input of the http_request import.
type HTTPRequest struct {
	// Method, e.g. "GET".
	Method string `json:"method"`
	// URL; its host[:port] must be in the manifest's allowedHosts.
	URL string `json:"url"`
	// Headers to send.
	Headers map[string]string `json:"headers,omitempty"`
	// Body to send (base64 in JSON).
	Body []byte `json:"body,omitempty"`
	// TimeoutMillis bounds the request; 0 means the host's default.
	TimeoutMillis int64 `json:"timeoutMillis,omitempty"`
}

// HTTPResponse is the result of the http_request import.
type HTTPResponse struct {
	// Status is the HTTP status code; 0 when Error is set.
	Status int `json:"status"`
	// Headers received (first value of each).
	Headers map[string]string `json:"headers,omitempty"`
	// Body received (base64 in JSON), capped by the host.
	Body []byte `json:"body,omitempty"`
	// Error describes a transport failure or a denial.
	Error string `json:"error,omitempty"`
}

// NodeInfo is the result of the node_info import.
type NodeInfo struct {
	// Name of the node.
	Name string `json:"name"`
	// Labels of the node.
	Labels map[string]string `json:"labels,omitempty"`
	// Capacity of the node, as Kubernetes quantities ("cpu": "2").
	Capacity map[string]string `json:"capacity,omitempty"`
	// Allocatable resources of the node.
	Allocatable map[string]string `json:"allocatable,omitempty"`
}

// AppendJSON appends the request's JSON encoding to dst without re-scanning
// the embedded objects, which encoding/json does for every json.RawMessage
// (a 4 KB pod costs tens of microseconds that way). Pod, Node and PodsOnNode
// must each hold one valid JSON value, as json.Marshal of a Kubernetes object
// produces; an empty one is written as null.
func (r *AdmitRequest) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"pod":`...)
	dst = appendRaw(dst, r.Pod)
	if len(r.Node) > 0 {
		dst = append(dst, `,"node":`...)
		dst = append(dst, r.Node...)
	}
	if len(r.PodsOnNode) > 0 {
		dst = append(dst, `,"podsOnNode":[`...)
		for i, p := range r.PodsOnNode {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendRaw(dst, p)
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

func appendRaw(dst []byte, v json.RawMessage) []byte {
	if len(v) == 0 {
		return append(dst, "null"...)
	}
	return append(dst, v...)
}
