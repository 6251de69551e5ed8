package extension

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/config"
	"github.com/wasmlet/wasmlet/host/internal/container"
)

// The core (config, runtime) has its own types; the plugin ABI has its own,
// frozen per ABI version. The functions below are the only place where one
// becomes the other, so a new ABI version changes this file and not the
// core. Each switch is explicit on purpose: convert_test.go reads the
// constants of abi, config and runtime from their source and fails when one
// has no case here.

// opFromABI is the core's operation for a source plugin's; false for an
// operation ABI v1 does not define (RECONCILE is the merge's own, never a
// source's).
func opFromABI(op abi.Op) (config.Op, bool) {
	switch op {
	case abi.OpSet:
		return config.OpSet, true
	case abi.OpAdd:
		return config.OpAdd, true
	case abi.OpUpdate:
		return config.OpUpdate, true
	case abi.OpRemove:
		return config.OpRemove, true
	case abi.OpDelete:
		return config.OpDelete, true
	}
	return "", false
}

// opToABI is the ABI's operation for the core's; false for
// config.OpReconcile, which only the merge produces.
func opToABI(op config.Op) (abi.Op, bool) {
	switch op {
	case config.OpSet:
		return abi.OpSet, true
	case config.OpAdd:
		return abi.OpAdd, true
	case config.OpUpdate:
		return abi.OpUpdate, true
	case config.OpRemove:
		return abi.OpRemove, true
	case config.OpDelete:
		return abi.OpDelete, true
	}
	return "", false
}

// hookPointToABI is the ABI's lifecycle point for the runtime's; false for a
// point the ABI does not define.
func hookPointToABI(p container.HookPoint) (abi.HookPoint, bool) {
	switch p {
	case container.HookPreSandbox:
		return abi.HookPreSandbox, true
	case container.HookPreCreate:
		return abi.HookPreCreate, true
	case container.HookValidate:
		return abi.HookValidate, true
	case container.HookPostStart:
		return abi.HookPostStart, true
	case container.HookPreUpdate:
		return abi.HookPreUpdate, true
	case container.HookPreStop:
		return abi.HookPreStop, true
	case container.HookPostStop:
		return abi.HookPostStop, true
	case container.HookPodTerminated:
		return abi.HookPodTerminated, true
	}
	return "", false
}

// hookPointFromABI is the runtime's lifecycle point for the ABI's; false for
// a point the runtime does not know.
func hookPointFromABI(p abi.HookPoint) (container.HookPoint, bool) {
	switch p {
	case abi.HookPreSandbox:
		return container.HookPreSandbox, true
	case abi.HookPreCreate:
		return container.HookPreCreate, true
	case abi.HookValidate:
		return container.HookValidate, true
	case abi.HookPostStart:
		return container.HookPostStart, true
	case abi.HookPreUpdate:
		return container.HookPreUpdate, true
	case abi.HookPreStop:
		return container.HookPreStop, true
	case abi.HookPostStop:
		return container.HookPostStop, true
	case abi.HookPodTerminated:
		return container.HookPodTerminated, true
	}
	return "", false
}

// adjustmentFromABI is the runtime's adjustment for the merged adjustment
// of the hook plugins (nil for nil), with the owner of each conflict key.
// The maps are shared, not copied.
func adjustmentFromABI(a *abi.Adjustment, owners map[string]string) *container.Adjustment {
	if a == nil {
		return nil
	}
	out := &container.Adjustment{Labels: a.Labels, Annotations: a.Annotations, Sysctls: a.Sysctls,
		CDIDevices: a.CDIDevices, OOMScoreAdj: a.OOMScoreAdj, Owners: owners}
	if len(a.Env) > 0 {
		out.Env = make([]container.EnvVar, len(a.Env))
		for i, v := range a.Env {
			out.Env[i] = container.EnvVar{Name: v.Name, Value: v.Value}
		}
	}
	for _, m := range a.Mounts {
		out.Mounts = append(out.Mounts, &runtimeapi.Mount{HostPath: m.HostPath, ContainerPath: m.ContainerPath,
			Readonly: m.ReadOnly, Propagation: propagationFromABI(m.Propagation)})
	}
	for _, d := range a.Devices {
		out.Devices = append(out.Devices, &runtimeapi.Device{HostPath: d.HostPath, ContainerPath: d.ContainerPath, Permissions: d.Permissions})
	}
	if r := a.Resources; r != nil {
		out.Resources = &runtimeapi.LinuxContainerResources{CpusetCpus: r.CpusetCPUs, CpusetMems: r.CpusetMems}
		for _, f := range []struct {
			src *int64
			dst *int64
		}{
			{r.CPUShares, &out.Resources.CpuShares}, {r.CPUQuota, &out.Resources.CpuQuota},
			{r.CPUPeriod, &out.Resources.CpuPeriod}, {r.MemoryLimitBytes, &out.Resources.MemoryLimitInBytes},
		} {
			if f.src != nil {
				*f.dst = *f.src
			}
		}
		for _, h := range r.HugepageLimits {
			out.Resources.HugepageLimits = append(out.Resources.HugepageLimits, &runtimeapi.HugepageLimit{PageSize: h.PageSize, Limit: h.Limit})
		}
	}
	if r := a.Remove; r != nil {
		out.Remove = container.Removal{Env: r.Env, Mounts: r.Mounts, Annotations: r.Annotations}
	}
	return out
}

// propagationFromABI is the CRI's mount propagation for the ABI's (None
// for an empty or unknown one; permit refuses unknown ones).
func propagationFromABI(p abi.MountPropagation) runtimeapi.MountPropagation {
	switch p {
	case abi.PropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
	case abi.PropagationBidirectional:
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
	}
	return runtimeapi.MountPropagation_PROPAGATION_PRIVATE
}

// propagationToABI is the ABI's mount propagation for the CRI's.
func propagationToABI(p runtimeapi.MountPropagation) abi.MountPropagation {
	switch p {
	case runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER:
		return abi.PropagationHostToContainer
	case runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL:
		return abi.PropagationBidirectional
	}
	return abi.PropagationNone
}

// resourcesToABI is the ABI's view of CRI resources (nil for nil); zero
// fields are left out.
func resourcesToABI(r *runtimeapi.LinuxContainerResources) *abi.Resources {
	if r == nil {
		return nil
	}
	out := &abi.Resources{CpusetCPUs: r.CpusetCpus, CpusetMems: r.CpusetMems}
	nonZero := func(v int64) *int64 {
		if v == 0 {
			return nil
		}
		return &v
	}
	out.CPUShares, out.CPUQuota, out.CPUPeriod, out.MemoryLimitBytes = nonZero(r.CpuShares), nonZero(r.CpuQuota), nonZero(r.CpuPeriod), nonZero(r.MemoryLimitInBytes)
	for _, h := range r.HugepageLimits {
		out.HugepageLimits = append(out.HugepageLimits, abi.HugepageLimit{PageSize: h.PageSize, Limit: h.Limit})
	}
	return out
}

// containerConfigToABI is the typed view of a container's final CRI config
// a validator sees, with the owners of adj's items.
func containerConfigToABI(cfg *runtimeapi.ContainerConfig, adj *container.Adjustment) *abi.ContainerConfig {
	out := &abi.ContainerConfig{Labels: cfg.Labels, Annotations: cfg.Annotations}
	if cfg.Image != nil {
		out.Image = cfg.Image.Image
		if cfg.Image.UserSpecifiedImage != "" {
			out.Image = cfg.Image.UserSpecifiedImage
		}
	}
	for _, e := range cfg.Envs {
		out.Env = append(out.Env, abi.EnvVar{Name: e.Key, Value: string(e.Value)})
	}
	for _, m := range cfg.Mounts {
		out.Mounts = append(out.Mounts, abi.Mount{HostPath: m.HostPath, ContainerPath: m.ContainerPath, ReadOnly: m.Readonly, Propagation: propagationToABI(m.Propagation)})
	}
	for _, d := range cfg.Devices {
		out.Devices = append(out.Devices, abi.Device{HostPath: d.HostPath, ContainerPath: d.ContainerPath, Permissions: d.Permissions})
	}
	for _, d := range cfg.CDIDevices {
		out.CDIDevices = append(out.CDIDevices, d.Name)
	}
	if l := cfg.Linux; l != nil && l.Resources != nil {
		out.Resources = resourcesToABI(l.Resources)
		oom := l.Resources.OomScoreAdj
		out.OOMScoreAdj = &oom
	}
	if adj != nil {
		out.Owners = adj.Owners
	}
	return out
}
