package admission

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Names of the built-in admitters.
const (
	MaxPodsName      = "MaxPods"
	ResourceFitName  = "ResourceFit"
	HostPortsName    = "HostPorts"
	defaultProtocol  = v1.ProtocolTCP
	anyHostIP        = "0.0.0.0"
	reasonNodePorts  = "NodePorts"
	reasonOutOfPods  = "OutOfpods"
	reasonOutOfFmt   = "OutOf%s"
	reasonBadRequest = "InvalidResources"
)

// Builtins returns the built-in admitters in the kubelet's order: the
// pod's OS, max pods, resource fit, host ports, sysctls (the safe ones and
// no unsafe one), the refusal of user namespaces, then AppArmor (the host
// checked once). maxPods <= 0 takes the limit from the node's allocatable
// "pods".
func Builtins(maxPods int) []Admitter {
	safe, _ := Sysctls(nil) // no pattern to refuse
	return []Admitter{PodOS(), MaxPods(maxPods), ResourceFit(), HostPorts(), safe, HostUsers(), AppArmor(HostAppArmor)}
}

// MaxPods rejects a pod when the node already runs limit pods (reason
// "OutOfpods"). limit <= 0 takes the limit from the node's allocatable
// "pods"; with neither, every pod is admitted.
func MaxPods(limit int) Admitter { return maxPods{limit: limit} }

type maxPods struct{ limit int }

func (maxPods) Name() string { return MaxPodsName }

func (m maxPods) Admit(_ context.Context, a Attributes) (Result, error) {
	limit := int64(m.limit)
	if limit <= 0 && a.Node != nil {
		if q, ok := a.Node.Status.Allocatable[v1.ResourcePods]; ok {
			limit = q.Value()
		}
	}
	if limit <= 0 || int64(len(a.Pods))+1 <= limit {
		return Result{Admit: true}, nil
	}
	return Result{Reason: reasonOutOfPods, Message: fmt.Sprintf("Too many pods: the node runs %d of %d", len(a.Pods), limit)}, nil
}

// ResourceFit rejects a pod whose requests do not fit in the node's
// allocatable minus the requests of the pods already admitted (reason
// "OutOf<resource>", e.g. "OutOfcpu"). A pod's request is, per resource, the
// larger of the sum over its app containers and the largest init container,
// plus the pod overhead — the scheduler's and the kubelet's rule. Extended
// resources (device plugins') count against the node's allocatable of
// them; one the node does not list is left to the cluster, as the kubelet
// leaves it.
func ResourceFit() Admitter { return resourceFit{} }

type resourceFit struct{}

func (resourceFit) Name() string { return ResourceFitName }

func (resourceFit) Admit(_ context.Context, a Attributes) (Result, error) {
	want := podRequestsMilli(a.Pod)
	if len(want) == 0 {
		return Result{Admit: true}, nil
	}
	// Sums in milli-units as int64: Quantity arithmetic is ten times slower
	// and this runs over every admitted pod for every new pod.
	used := map[v1.ResourceName]int64{}
	for _, p := range a.Pods {
		for n, v := range podRequestsMilli(p) {
			used[n] += v
		}
	}
	var alloc v1.ResourceList
	if a.Node != nil {
		alloc = a.Node.Status.Allocatable
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		req := want[name]
		if req < 0 {
			return Result{Reason: reasonBadRequest, Message: fmt.Sprintf("negative request for %s", name)}, nil
		}
		if req == 0 {
			continue
		}
		capQ, ok := alloc[name]
		if !ok && IsExtendedResourceName(name) {
			// The kubelet's removeMissingExtendedResources: an extended
			// resource the node does not list is the cluster's (a
			// scheduler extender's), not this node's to count.
			continue
		}
		if req > capQ.MilliValue()-used[name] {
			return Result{
				Reason: fmt.Sprintf(reasonOutOfFmt, name),
				Message: fmt.Sprintf("Node didn't have enough resource: %s, requested: %s, used: %s, capacity: %s",
					name, milli(req, capQ.Format), milli(used[name], capQ.Format), capQ.String()),
			}, nil
		}
	}
	return Result{Admit: true}, nil
}

func milli(v int64, f resource.Format) string {
	return resource.NewMilliQuantity(v, f).String()
}

// podRequestsMilli is a pod's effective resource requests in milli-units:
// per resource the larger of the app containers' sum and the largest init
// container, plus overhead.
func podRequestsMilli(p *v1.Pod) map[v1.ResourceName]int64 {
	if p == nil {
		return nil
	}
	var out map[v1.ResourceName]int64
	put := func(n v1.ResourceName, v int64, sum bool) {
		if out == nil {
			out = map[v1.ResourceName]int64{}
		}
		if sum {
			out[n] += v
		} else if cur, ok := out[n]; !ok || v > cur {
			out[n] = v
		}
	}
	for _, c := range p.Spec.Containers {
		for n, q := range c.Resources.Requests {
			put(n, q.MilliValue(), true)
		}
	}
	for _, c := range p.Spec.InitContainers {
		for n, q := range c.Resources.Requests {
			put(n, q.MilliValue(), false)
		}
	}
	for n, q := range p.Spec.Overhead {
		put(n, q.MilliValue(), true)
	}
	return out
}

// HostPorts rejects a pod that asks for a host port (protocol, IP, port)
// another admitted pod holds (reason "NodePorts"). 0.0.0.0 or an empty
// host IP conflicts with every IP. A host-network pod holds its container
// ports.
func HostPorts() Admitter { return hostPorts{} }

type hostPorts struct{}

func (hostPorts) Name() string { return HostPortsName }

type hostPort struct {
	ip    string
	proto v1.Protocol
	port  int32
}

func (hp hostPort) String() string {
	return fmt.Sprintf("%s/%s:%d", strings.ToLower(string(hp.proto)), hp.ip, hp.port)
}

func (hp hostPort) conflicts(o hostPort) bool {
	return hp.port == o.port && hp.proto == o.proto && (hp.ip == o.ip || hp.ip == anyHostIP || o.ip == anyHostIP)
}

func podHostPorts(p *v1.Pod) []hostPort {
	var out []hostPort
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			port := cp.HostPort
			if port == 0 && p.Spec.HostNetwork {
				port = cp.ContainerPort
			}
			if port <= 0 {
				continue
			}
			hp := hostPort{ip: cp.HostIP, proto: cp.Protocol, port: port}
			if hp.ip == "" {
				hp.ip = anyHostIP
			}
			if hp.proto == "" {
				hp.proto = defaultProtocol
			}
			out = append(out, hp)
		}
	}
	return out
}

func (hostPorts) Admit(_ context.Context, a Attributes) (Result, error) {
	want := podHostPorts(a.Pod)
	if len(want) == 0 {
		return Result{Admit: true}, nil
	}
	for _, p := range a.Pods {
		for _, held := range podHostPorts(p) {
			for _, w := range want {
				if w.conflicts(held) {
					return Result{
						Reason:  reasonNodePorts,
						Message: fmt.Sprintf("host port %s is held by pod %s/%s", w, p.Namespace, p.Name),
					}, nil
				}
			}
		}
	}
	return Result{Admit: true}, nil
}

// IsExtendedResourceName tells whether name is an extended resource, as the
// API defines it: outside the kubernetes.io namespace, not a requests.
// quota name, and a qualified name once prefixed with "requests.".
func IsExtendedResourceName(name v1.ResourceName) bool {
	n := string(name)
	if !strings.Contains(n, "/") || strings.Contains(n, v1.ResourceDefaultNamespacePrefix) || strings.HasPrefix(n, v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix+n)) == 0
}
