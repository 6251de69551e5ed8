package container

import (
	"slices"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ApplyContainer lays a over cfg, the container's CRI config as the pod
// spec made it: first the removals (env variables, mounts by container
// path, annotations), then env, labels, annotations, mounts, devices, CDI
// devices, resources and the OOM score. Nothing is applied for nil.
func (a *Adjustment) ApplyContainer(cfg *runtimeapi.ContainerConfig) {
	if a == nil {
		return
	}
	cfg.Envs = slices.DeleteFunc(cfg.Envs, func(e *runtimeapi.KeyValue) bool { return slices.Contains(a.Remove.Env, e.Key) })
	cfg.Mounts = slices.DeleteFunc(cfg.Mounts, func(m *runtimeapi.Mount) bool { return slices.Contains(a.Remove.Mounts, m.ContainerPath) })
	for _, k := range a.Remove.Annotations {
		delete(cfg.Annotations, k)
	}
	for _, e := range a.Env {
		cfg.Envs = setKeyValue(cfg.Envs, e.Name, e.Value)
	}
	cfg.Labels = overlay(cfg.Labels, a.Labels)
	cfg.Annotations = overlay(cfg.Annotations, a.Annotations)
	for _, m := range a.Mounts {
		cfg.Mounts = ReplaceOrAppend(cfg.Mounts, m, func(x *runtimeapi.Mount) bool { return x.ContainerPath == m.ContainerPath })
	}
	for _, d := range a.Devices {
		cfg.Devices = ReplaceOrAppend(cfg.Devices, d, func(x *runtimeapi.Device) bool { return x.ContainerPath == d.ContainerPath })
	}
	for _, name := range a.CDIDevices {
		if !slices.ContainsFunc(cfg.CDIDevices, func(x *runtimeapi.CDIDevice) bool { return x.Name == name }) {
			cfg.CDIDevices = append(cfg.CDIDevices, &runtimeapi.CDIDevice{Name: name})
		}
	}
	if a.Resources == nil && a.OOMScoreAdj == nil {
		return
	}
	if cfg.Linux == nil {
		cfg.Linux = &runtimeapi.LinuxContainerConfig{}
	}
	if cfg.Linux.Resources == nil {
		cfg.Linux.Resources = &runtimeapi.LinuxContainerResources{}
	}
	r := cfg.Linux.Resources
	if a.OOMScoreAdj != nil {
		r.OomScoreAdj = *a.OOMScoreAdj
	}
	if ar := a.Resources; ar != nil {
		setNonZero(&r.CpuShares, ar.CpuShares)
		setNonZero(&r.CpuQuota, ar.CpuQuota)
		setNonZero(&r.CpuPeriod, ar.CpuPeriod)
		setNonZero(&r.CpusetCpus, ar.CpusetCpus)
		setNonZero(&r.CpusetMems, ar.CpusetMems)
		setNonZero(&r.MemoryLimitInBytes, ar.MemoryLimitInBytes)
		for _, h := range ar.HugepageLimits {
			r.HugepageLimits = ReplaceOrAppend(r.HugepageLimits, h, func(x *runtimeapi.HugepageLimit) bool { return x.PageSize == h.PageSize })
		}
	}
}

// ApplySandbox lays a over cfg, the pod's sandbox config: annotations
// removed, then labels, annotations and sysctls set. Nothing is applied
// for nil.
func (a *Adjustment) ApplySandbox(cfg *runtimeapi.PodSandboxConfig) {
	if a == nil {
		return
	}
	for _, k := range a.Remove.Annotations {
		delete(cfg.Annotations, k)
	}
	cfg.Labels = overlay(cfg.Labels, a.Labels)
	cfg.Annotations = overlay(cfg.Annotations, a.Annotations)
	if len(a.Sysctls) > 0 {
		if cfg.Linux == nil {
			cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{}
		}
		cfg.Linux.Sysctls = overlay(cfg.Linux.Sysctls, a.Sysctls)
	}
}

// setKeyValue sets k to v in env, replacing a same-named variable.
func setKeyValue(env []*runtimeapi.KeyValue, k, v string) []*runtimeapi.KeyValue {
	for _, e := range env {
		if e.Key == k {
			e.Value = []byte(v)
			return env
		}
	}
	return append(env, &runtimeapi.KeyValue{Key: k, Value: []byte(v)})
}

// overlay copies src into dst, making dst only when src has entries.
func overlay(dst, src map[string]string) map[string]string {
	if dst == nil && len(src) > 0 {
		dst = make(map[string]string, len(src))
	}
	for k, v := range src {
		dst[k] = v
	}
	return dst
}

// ReplaceOrAppend replaces the first element of list that same matches by
// v, or appends v: how an adjustment's item is laid over a list keyed by
// path or name.
func ReplaceOrAppend[T any](list []T, v T, same func(T) bool) []T {
	if i := slices.IndexFunc(list, same); i >= 0 {
		list[i] = v
		return list
	}
	return append(list, v)
}

// setNonZero sets *dst to v unless v is the zero value.
func setNonZero[T comparable](dst *T, v T) {
	var zero T
	if v != zero {
		*dst = v
	}
}
