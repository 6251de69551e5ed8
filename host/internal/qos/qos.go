// Package qos is the kubelet's quality-of-service model of a pod: its QoS
// class (Guaranteed, Burstable, BestEffort), the OOM score adjustment each
// of its containers gets from it, and the CPU and memory figures the
// kubelet hands the runtime (cpu shares, CFS quota, memory limit) for a
// container, a sandbox and a pod cgroup. The rules are those of
// pkg/apis/core/v1/helper/qos, pkg/kubelet/qos and pkg/kubelet/cm of
// Kubernetes v1.36, with the v1.36 default feature gates (pod-level
// resources on).
package qos

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// The OOM score adjustments of the QoS classes.
const (
	// GuaranteedOOMScoreAdj is a Guaranteed (or node-critical) pod's
	// containers': the last to be killed.
	GuaranteedOOMScoreAdj = -997
	// BestEffortOOMScoreAdj is a BestEffort pod's containers': the first.
	BestEffortOOMScoreAdj = 1000
)

// The CFS figures of pkg/kubelet/cm.
const (
	// MinShares is the smallest cpu.shares value (a pod with no request).
	MinShares = 2
	// MaxShares is the largest cpu.shares value.
	MaxShares = 262144
	// SharesPerCPU is cpu.shares for one CPU.
	SharesPerCPU = 1024
	// QuotaPeriod is the CFS period in microseconds (100 ms).
	QuotaPeriod = 100000
	// MinQuota is the smallest CFS quota in microseconds (1 ms).
	MinQuota = 1000
)

// systemNodeCritical is the priority class of pods the node needs most.
const systemNodeCritical = "system-node-critical"

// systemCriticalPriority is the lowest priority of a critical pod.
const systemCriticalPriority = 2 * 1000000000

// Class is the pod's QoS class: Guaranteed when every container (init
// ones included; or the pod-level resources, when set) limits both cpu
// and memory and its requests equal its limits, BestEffort when nothing
// requests or limits cpu or memory, else Burstable. The API server keeps
// its answer in status.qosClass; a static pod gets it from here.
func Class(pod *v1.Pod) v1.PodQOSClass {
	requests, limits := v1.ResourceList{}, v1.ResourceList{}
	guaranteed := true
	add := func(into v1.ResourceList, from v1.ResourceList) (found map[v1.ResourceName]bool) {
		found = map[v1.ResourceName]bool{}
		for name, q := range from {
			if name != v1.ResourceCPU && name != v1.ResourceMemory || q.Sign() != 1 {
				continue
			}
			found[name] = true
			sum := q.DeepCopy()
			if prev, ok := into[name]; ok {
				sum.Add(prev)
			}
			into[name] = sum
		}
		return found
	}
	if r := pod.Spec.Resources; r != nil {
		add(requests, r.Requests)
		if len(r.Limits) > 0 {
			if f := add(limits, r.Limits); !f[v1.ResourceCPU] || !f[v1.ResourceMemory] {
				guaranteed = false
			}
		}
	} else {
		for _, c := range append(append([]v1.Container(nil), pod.Spec.Containers...), pod.Spec.InitContainers...) {
			add(requests, c.Resources.Requests)
			if f := add(limits, c.Resources.Limits); !f[v1.ResourceCPU] || !f[v1.ResourceMemory] {
				guaranteed = false
			}
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return v1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
				break
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

// classOf is the pod's class as the API server recorded it, else Class.
func classOf(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return Class(pod)
}

// OOMScoreAdjust is the oom_score_adj of a container of the pod on a node
// with memoryCapacity bytes, as the kubelet gives it: -997 for a
// Guaranteed or node-critical pod, 1000 for BestEffort, and for Burstable
// 1000 less the container's share of the node's memory in thousandths
// (a sidecar no higher than the pod's smallest regular container), kept
// within [3, 999].
func OOMScoreAdjust(pod *v1.Pod, c *v1.Container, memoryCapacity int64) int64 {
	if nodeCritical(pod) {
		return GuaranteedOOMScoreAdj
	}
	switch classOf(pod) {
	case v1.PodQOSGuaranteed:
		return GuaranteedOOMScoreAdj
	case v1.PodQOSBestEffort:
		return BestEffortOOMScoreAdj
	}
	if memoryCapacity <= 0 {
		return BestEffortOOMScoreAdj - 1
	}
	extra := int64(0)
	if pod.Spec.Resources != nil && len(pod.Spec.Resources.Requests) > 0 {
		extra = remainingMemoryPerContainer(pod)
	}
	adj := 1000 - 1000*(c.Resources.Requests.Memory().Value()+extra)/memoryCapacity
	if isSidecar(pod, c) {
		if floor := 1000 - 1000*(minRegularMemory(pod)+extra)/memoryCapacity; adj > floor {
			adj = floor
		}
	}
	if adj < 1000+GuaranteedOOMScoreAdj {
		return 1000 + GuaranteedOOMScoreAdj
	}
	if adj == BestEffortOOMScoreAdj {
		return adj - 1
	}
	return adj
}

// nodeCritical is the kubelet's IsNodeCriticalPod: a critical pod (static,
// mirror, or of system priority) in the system-node-critical class.
func nodeCritical(pod *v1.Pod) bool {
	if pod.Spec.PriorityClassName != systemNodeCritical {
		return false
	}
	src := pod.Annotations["kubernetes.io/config.source"]
	_, mirror := pod.Annotations["kubernetes.io/config.mirror"]
	return (src != "" && src != "api") || mirror || (pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority)
}

func isSidecar(pod *v1.Pod, c *v1.Container) bool {
	if c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
		return false
	}
	for _, ic := range pod.Spec.InitContainers {
		if ic.Name == c.Name {
			return true
		}
	}
	return false
}

// minRegularMemory is the smallest memory request of the pod's regular
// containers.
func minRegularMemory(pod *v1.Pod) int64 {
	m := int64(-1)
	for _, c := range pod.Spec.Containers {
		if v := c.Resources.Requests.Memory().Value(); m < 0 || v < m {
			m = v
		}
	}
	return max(m, 0)
}

// remainingMemoryPerContainer is the pod-level memory request not given
// to any container, shared equally among the containers that run.
func remainingMemoryPerContainer(pod *v1.Pod) int64 {
	sum, n := int64(0), int64(0)
	for _, c := range pod.Spec.Containers {
		sum += c.Resources.Requests.Memory().Value()
		n++
	}
	for _, c := range pod.Spec.InitContainers {
		if isSidecar(pod, &c) {
			sum += c.Resources.Requests.Memory().Value()
			n++
		}
	}
	rest := pod.Spec.Resources.Requests.Memory().Value() - sum
	if rest <= 0 || n == 0 {
		return 0
	}
	return rest / n
}

// Shares is cpu.shares for a request of milliCPU (0: none).
func Shares(milliCPU int64) int64 {
	if milliCPU == 0 {
		return MinShares
	}
	return min(max(milliCPU*SharesPerCPU/1000, MinShares), MaxShares)
}

// Quota is the CFS quota in microseconds for a limit of milliCPU per
// QuotaPeriod (0: no limit).
func Quota(milliCPU int64) int64 {
	if milliCPU == 0 {
		return 0
	}
	return max(milliCPU*QuotaPeriod/1000, MinQuota)
}

// Resources is what the kubelet asks of the runtime for one container or
// sandbox: cpu shares from the cpu request (the limit when no request is
// set), a CFS quota from the cpu limit over QuotaPeriod, and the memory
// limit in bytes (0: none).
type Resources struct {
	CPUShares   int64
	CPUPeriod   int64
	CPUQuota    int64
	MemoryLimit int64
}

// Linux is the kubelet's calculateLinuxResources: request and limits may
// be nil.
func Linux(cpuRequest, cpuLimit, memoryLimit *resource.Quantity) Resources {
	r := Resources{CPUPeriod: QuotaPeriod}
	switch {
	case cpuRequest == nil && cpuLimit != nil:
		r.CPUShares = Shares(cpuLimit.MilliValue())
	case cpuRequest != nil:
		r.CPUShares = Shares(cpuRequest.MilliValue())
	default:
		r.CPUShares = MinShares
	}
	if cpuLimit != nil {
		r.CPUQuota = Quota(cpuLimit.MilliValue())
	}
	if memoryLimit != nil {
		r.MemoryLimit = memoryLimit.Value()
	}
	return r
}

// Container is the container's resources: its own requests and limits,
// or the pod-level limit where it sets none.
func Container(pod *v1.Pod, c *v1.Container) Resources {
	var cpuRequest *resource.Quantity
	if q, ok := c.Resources.Requests[v1.ResourceCPU]; ok {
		cpuRequest = &q
	}
	cpuLimit, memLimit := c.Resources.Limits.Cpu(), c.Resources.Limits.Memory()
	if pr := pod.Spec.Resources; pr != nil {
		if cpuLimit.IsZero() {
			cpuLimit = pr.Limits.Cpu()
		}
		if memLimit.IsZero() {
			memLimit = pr.Limits.Memory()
		}
	}
	return Linux(cpuRequest, cpuLimit, memLimit)
}

// Sandbox is the sandbox's resources: the pod's summed requests and
// limits without overhead.
func Sandbox(pod *v1.Pod) Resources {
	opts := resourcehelper.PodResourcesOptions{ExcludeOverhead: true}
	req, lim := resourcehelper.PodRequests(pod, opts), resourcehelper.PodLimits(pod, opts)
	var cpuRequest *resource.Quantity
	if q, ok := req[v1.ResourceCPU]; ok {
		cpuRequest = &q
	}
	return Linux(cpuRequest, lim.Cpu(), lim.Memory())
}

// Overhead is the pod's overhead (its runtime class's), requests and
// limits alike; zero without one.
func Overhead(pod *v1.Pod) (Resources, bool) {
	if pod.Spec.Overhead == nil {
		return Resources{}, false
	}
	cpu, mem := pod.Spec.Overhead.Cpu(), pod.Spec.Overhead.Memory()
	return Linux(cpu, cpu, mem), true
}

// PodCgroup is what the kubelet writes into a pod's cgroup: cpu shares
// always; a CFS quota when the pod is Guaranteed or every container
// limits cpu; a memory limit when it is Guaranteed or every container
// limits memory. A field is nil when not set.
type PodCgroup struct {
	CPUShares   int64
	CPUQuota    *int64
	CPUPeriod   *int64
	MemoryLimit *int64
}

// ForPodCgroup is the kubelet's ResourceConfigForPod (CFS quota enforced,
// no memory QoS).
func ForPodCgroup(pod *v1.Pod) PodCgroup {
	cpuLimited, memLimited := true, true
	for _, c := range append(append([]v1.Container(nil), pod.Spec.Containers...), pod.Spec.InitContainers...) {
		if c.Resources.Limits.Cpu().IsZero() {
			cpuLimited = false
		}
		if c.Resources.Limits.Memory().IsZero() {
			memLimited = false
		}
	}
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	lim := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	if pr := pod.Spec.Resources; pr != nil && (len(pr.Requests) > 0 || len(pr.Limits) > 0) {
		if !pr.Limits.Cpu().IsZero() {
			cpuLimited = true
		}
		if !pr.Limits.Memory().IsZero() {
			memLimited = true
		}
	}
	shares := Shares(req.Cpu().MilliValue())
	quota, period, mem := Quota(lim.Cpu().MilliValue()), int64(QuotaPeriod), lim.Memory().Value()
	switch classOf(pod) {
	case v1.PodQOSGuaranteed:
		return PodCgroup{CPUShares: shares, CPUQuota: &quota, CPUPeriod: &period, MemoryLimit: &mem}
	case v1.PodQOSBurstable:
		c := PodCgroup{CPUShares: shares}
		if cpuLimited {
			c.CPUQuota, c.CPUPeriod = &quota, &period
		}
		if memLimited {
			c.MemoryLimit = &mem
		}
		return c
	}
	return PodCgroup{CPUShares: MinShares}
}
