// Package podspec holds the lookups every part of the agent makes in a
// pod's spec: the pod's name as logs and errors print it, a container by
// name, a container port by number or name.
package podspec

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Name is the pod's "namespace/name", as logs and errors print it; "" for
// a nil pod.
func Name(p *v1.Pod) string {
	if p == nil {
		return ""
	}
	return p.Namespace + "/" + p.Name
}

// FindContainer is the pod's container named name — an app container, an
// init container or an ephemeral container (whose common fields are
// returned as a Container of its own, a copy) — or nil. Names are unique
// across the three lists, as the API validates.
func FindContainer(pod *v1.Pod, name string) *v1.Container {
	for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			c := v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
			return &c
		}
	}
	return nil
}

// ContainerPort resolves the port of a probe or a lifecycle handler as the
// kubelet does: a number, the name of one of the container's ports, or a
// number written as a string; the result is a valid TCP port (1–65535).
func ContainerPort(c *v1.Container, p intstr.IntOrString) (int, error) {
	n := -1
	if p.Type == intstr.Int {
		n = int(p.IntVal)
	} else {
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				n = int(cp.ContainerPort)
				break
			}
		}
		if n < 0 {
			v, err := strconv.Atoi(p.StrVal)
			if err != nil {
				return 0, fmt.Errorf("couldn't find port: %s in %s", p.StrVal, c.Name)
			}
			n = v
		}
	}
	if n <= 0 || n > 65535 {
		return 0, fmt.Errorf("invalid port number: %d", n)
	}
	return n, nil
}
