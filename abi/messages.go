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
	// HookPreSandbox is called before a pod sandbox is created.
	HookPreSandbox HookPoint = "PreSandbox"
	// HookPreCreate is called before a container is created; adjustments
	// apply to that container.
	HookPreCreate HookPoint = "PreCreate"
	// HookPostStart is called after a container started.
	HookPostStart HookPoint = "PostStart"
	// HookPreStop is called before a container is stopped.
	HookPreStop HookPoint = "PreStop"
	// HookPodTerminated is called once a pod's containers and sandbox are gone.
	HookPodTerminated HookPoint = "PodTerminated"
)

// HookPoints lists every lifecycle point in lifecycle order.
var HookPoints = []HookPoint{HookPreSandbox, HookPreCreate, HookPostStart, HookPreStop, HookPodTerminated}

// HookRequest is the input of the hook export.
type HookRequest struct {
	// Point is the lifecycle point.
	Point HookPoint `json:"point"`
	// Pod is the v1.Pod.
	Pod json.RawMessage `json:"pod"`
	// Container is the v1.Container concerned, for container points.
	Container json.RawMessage `json:"container,omitempty"`
}

// HookResponse is the result of the hook export.
type HookResponse struct {
	// Adjustment, honoured at PreSandbox (labels, annotations) and PreCreate
	// (env, labels, annotations); ignored at other points.
	Adjustment *Adjustment `json:"adjustment,omitempty"`
	// Error, when set, fails the lifecycle step under failure policy Fail.
	Error string `json:"error,omitempty"`
}

// Adjustment is a change a hook asks for, in the style of containerd NRI.
type Adjustment struct {
	// Env variables are added to the container, replacing same-named ones.
	Env []EnvVar `json:"env,omitempty"`
	// Labels are added to the CRI sandbox or container config.
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are added to the CRI sandbox or container config.
	Annotations map[string]string `json:"annotations,omitempty"`
}

// EnvVar is one environment variable.
type EnvVar struct {
	// Name of the variable.
	Name string `json:"name"`
	// Value of the variable.
	Value string `json:"value"`
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
