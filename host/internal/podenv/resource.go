package podenv

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/wasmlet/wasmlet/host/internal/podspec"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ResourceValue is the value of a downward-API resourceFieldRef, as the
// kubelet gives it: limits.cpu, limits.memory, limits.ephemeral-storage,
// requests.cpu, requests.memory, requests.ephemeral-storage and
// limits./requests.hugepages-<size>, divided by fs.Divisor (1 when unset
// or zero) and rounded up (cpu counted in millicores, so 1500m with
// divisor 1 is "2").
//
// The container is fs.ContainerName, looked up among the pod's containers
// and then its init containers; when fs.ContainerName is empty it is c.
// A cpu, memory or ephemeral-storage limit that is unset (or zero) is
// node's allocatable, or the pod-level limit (spec.resources.limits,
// cpu and memory) when the pod has one, as the kubelet defaults them; with
// node nil no limit is defaulted. Hugepages and requests are never
// defaulted.
func ResourceValue(fs *v1.ResourceFieldSelector, pod *v1.Pod, c *v1.Container, node *v1.Node) (string, error) {
	if fs == nil {
		return "", fmt.Errorf("no resource field selector")
	}
	if fs.ContainerName != "" {
		if pod == nil {
			return "", fmt.Errorf("container %s not found", fs.ContainerName)
		}
		c = podspec.FindContainer(pod, fs.ContainerName)
		if c == nil {
			return "", fmt.Errorf("container %s not found", fs.ContainerName)
		}
	}
	if c == nil {
		return "", fmt.Errorf("no container for resource %s", fs.Resource)
	}
	var allocatable v1.ResourceList
	if node != nil {
		allocatable = defaultLimits(pod, node.Status.Allocatable)
	}
	return containerResourceValue(fs, c.Resources.Requests, withDefaults(c.Resources.Limits, allocatable))
}

// defaultedResources are the resources whose unset limits are defaulted;
// hugepages are never overcommitted, so always have a limit.
var defaultedResources = []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage}

// defaultLimits is what unset limits default to: the node's allocatable,
// with the pod-level cpu and memory limits in place of the node's where
// the pod sets them (and the node has the resource).
func defaultLimits(pod *v1.Pod, allocatable v1.ResourceList) v1.ResourceList {
	if pod == nil || pod.Spec.Resources == nil || len(pod.Spec.Resources.Limits) == 0 {
		return allocatable
	}
	out := allocatable.DeepCopy()
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		q, ok := pod.Spec.Resources.Limits[name]
		if !ok || q.IsZero() {
			continue
		}
		if _, ok := out[name]; ok {
			out[name] = q.DeepCopy()
		}
	}
	return out
}

// withDefaults is limits with each unset or zero cpu, memory and
// ephemeral-storage limit taken from defaults. limits is not modified.
func withDefaults(limits, defaults v1.ResourceList) v1.ResourceList {
	if len(defaults) == 0 {
		return limits
	}
	out := make(v1.ResourceList, len(limits)+len(defaultedResources))
	for k, v := range limits {
		out[k] = v
	}
	for _, name := range defaultedResources {
		if q, ok := out[name]; ok && !q.IsZero() {
			continue
		}
		if d, ok := defaults[name]; ok {
			out[name] = d.DeepCopy()
		}
	}
	return out
}

// containerResourceValue is fs's resource among requests and limits,
// divided by the divisor and rounded up.
func containerResourceValue(fs *v1.ResourceFieldSelector, requests, limits v1.ResourceList) (string, error) {
	divisor := fs.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	kind, name, ok := strings.Cut(fs.Resource, ".")
	var list v1.ResourceList
	switch {
	case ok && kind == "limits":
		list = limits
	case ok && kind == "requests":
		list = requests
	default:
		return "", fmt.Errorf("unsupported container resource : %v", fs.Resource)
	}
	rn := v1.ResourceName(name)
	switch {
	case rn == v1.ResourceCPU:
		q := list[rn]
		return ceilDiv(q.MilliValue(), divisor.MilliValue(), fs.Resource)
	case rn == v1.ResourceMemory, rn == v1.ResourceEphemeralStorage,
		strings.HasPrefix(name, v1.ResourceHugePagesPrefix):
		q := list[rn]
		return ceilDiv(q.Value(), divisor.Value(), fs.Resource)
	}
	return "", fmt.Errorf("unsupported container resource : %v", fs.Resource)
}

// ceilDiv is the decimal text of a/b rounded up.
func ceilDiv(a, b int64, what string) (string, error) {
	if b <= 0 {
		return "", fmt.Errorf("invalid divisor for %s", what)
	}
	q := a / b
	if a%b > 0 {
		q++
	}
	return strconv.FormatInt(q, 10), nil
}
