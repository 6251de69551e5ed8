// Command resource-adjuster is a resource-adjusting NRI plugin ported to a
// wasmlet hook: at PreCreate it sets the Linux resources of a container
// whose pod carries the class label (config label, default
// wasmlet.io/resource-class) to what the class names in its config. A pod
// without the label is left alone; a pod naming an unknown class fails its
// container's creation with an error naming the pod, the label and the
// classes there are.
//
// Config:
//
//	label: wasmlet.io/resource-class
//	classes: |              # NAME=SETTING,SETTING… one class a line
//	  small=memory:64Mi,cpu:250m
//	  pinned=memory:1Gi,cpu:2,cpuShares:2048,cpuset:0-1
//	containers: ""          # comma list of container names; empty means all
//
// Settings: memory (the memory limit, a quantity), cpu (a CPU limit, as
// the kubelet turns it into a CFS quota per 100 ms period), cpuShares (the
// relative weight), cpuset (the CPUs, e.g. 0-1). The manifest grants
// resources and nothing else.
package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/wasmlet/wasmlet/plugins/internal/policy"
	"github.com/wasmlet/wasmlet/plugins/internal/quantity"
	"github.com/wasmlet/wasmlet/sdk"
)

// defaultLabel is the pod label naming the class when the config sets none.
const defaultLabel = "wasmlet.io/resource-class"

type adjuster struct{}

// Hook answers PreCreate with the class's resources.
func (adjuster) Hook(req sdk.HookRequest) (sdk.Adjustment, error) {
	var adj sdk.Adjustment
	if req.Point != sdk.HookPreCreate || req.Container == nil {
		return adj, nil
	}
	label, _ := sdk.Config("label")
	if label == "" {
		label = defaultLabel
	}
	class, ok := req.Pod.Labels[label]
	if !ok {
		return adj, nil
	}
	if only := policy.ListSet("containers", ""); len(only) > 0 && !only[req.Container.Name] {
		return adj, nil
	}
	classes, err := policy.Pairs("classes")
	if err != nil {
		return adj, err
	}
	var names []string
	for _, c := range classes {
		if c[0] == class {
			if err := apply(&adj, c[1]); err != nil {
				return sdk.Adjustment{}, fmt.Errorf("config classes: class %s: %w", class, err)
			}
			return adj, nil
		}
		names = append(names, c[0])
	}
	slices.Sort(names)
	return adj, fmt.Errorf("pod %s/%s: label %s=%q: no such class (config classes has %s)", req.Pod.Namespace, req.Pod.Name, label, class, strings.Join(names, ", "))
}

// apply sets on adj the settings of one class, "memory:64Mi,cpu:250m".
func apply(adj *sdk.Adjustment, settings string) error {
	for _, s := range policy.SplitList(settings) {
		name, value, ok := strings.Cut(s, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || value == "" {
			return fmt.Errorf("setting %q: want NAME:VALUE", s)
		}
		switch name {
		case "memory":
			b, err := quantity.Bytes(value)
			if err != nil {
				return fmt.Errorf("memory: %w", err)
			}
			adj.SetMemoryLimit(b)
		case "cpu":
			m, err := quantity.MilliCPU(value)
			if err != nil {
				return fmt.Errorf("cpu: %w", err)
			}
			adj.SetCPU(m)
		case "cpuShares":
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || n < 2 || n > 262144 {
				return fmt.Errorf("cpuShares %q: want an integer from 2 to 262144", value)
			}
			adj.SetCPUShares(n)
		case "cpuset":
			if strings.Trim(value, "0123456789,-") != "" {
				return fmt.Errorf("cpuset %q: want a CPU list such as 0-1,3", value)
			}
			adj.SetCPUSet(value, "")
		default:
			return fmt.Errorf("setting %q: want memory, cpu, cpuShares or cpuset", name)
		}
	}
	return nil
}

// init registers the hook; it reads the pod's labels and the basic fields.
func init() { sdk.Register(adjuster{}, sdk.Reads(sdk.Labels)) }

func main() {}
