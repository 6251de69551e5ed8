package sdk

import (
	"errors"

	"github.com/wasmlet/wasmlet/abi"
)

// Adjustment is what a hook asks to change in a container's (or, at
// PreSandbox, a sandbox's) CRI config, in the style of containerd NRI
// within what the CRI can express: env, labels, annotations, mounts,
// devices, CDI devices, Linux resources, the OOM score, sandbox sysctls and
// removals. It has abi.Adjustment's fields, so a literal reads the same
// (sdk.Adjustment{Env: …}), and the helper methods below build one a field
// at a time.
//
// The host applies only the fields the manifest's permissions.adjust lists
// (env, labels and annotations when it lists none); a hook that returns
// another field is refused under its failure policy, naming the plugin, the
// pod and the field. Mounts and devices must use host paths under the
// manifest's permissions.hostPaths.
type Adjustment abi.Adjustment

// Mount is a bind mount of a host path into a container (Adjustment.Mounts,
// ContainerConfig.Mounts).
type Mount = abi.Mount

// MountPropagation is a mount's propagation: PropagationNone (the default),
// PropagationHostToContainer or PropagationBidirectional.
type MountPropagation = abi.MountPropagation

// The mount propagations of the CRI (abi.PropagationNone …).
const (
	// PropagationNone is a private mount, the default.
	PropagationNone = abi.PropagationNone
	// PropagationHostToContainer is a recursive slave mount.
	PropagationHostToContainer = abi.PropagationHostToContainer
	// PropagationBidirectional is a recursive shared mount.
	PropagationBidirectional = abi.PropagationBidirectional
)

// Device is a host device node made available in a container
// (Adjustment.Devices, ContainerConfig.Devices).
type Device = abi.Device

// LinuxResources are a container's Linux resources as the CRI has them
// (Adjustment.Resources, a PreUpdate request's Resources). An unset field is
// left as it is. (abi.Resources; sdk.Resources names the pod part of Reads.)
type LinuxResources = abi.Resources

// HugepageLimit limits one huge page size.
type HugepageLimit = abi.HugepageLimit

// Removal names what an adjustment takes away from the container config the
// pod spec made (Adjustment.Remove).
type Removal = abi.Removal

// ContainerConfig is a container's final CRI config after every plugin's
// adjustments, what a Validator sees (HookRequest.Config). Owners names the
// plugin that set each adjusted field ("mounts:/data" → "device-injector").
type ContainerConfig = abi.ContainerConfig

// AdjustField names one field of an Adjustment as a manifest's
// permissions.adjust lists it (AdjustMounts is "mounts" …).
type AdjustField = abi.AdjustField

// The adjustable fields (abi.AdjustEnv …), for a manifest's
// permissions.adjust.
const (
	// AdjustEnv is Adjustment.Env.
	AdjustEnv = abi.AdjustEnv
	// AdjustLabels is Adjustment.Labels.
	AdjustLabels = abi.AdjustLabels
	// AdjustAnnotations is Adjustment.Annotations.
	AdjustAnnotations = abi.AdjustAnnotations
	// AdjustMounts is Adjustment.Mounts.
	AdjustMounts = abi.AdjustMounts
	// AdjustDevices is Adjustment.Devices.
	AdjustDevices = abi.AdjustDevices
	// AdjustCDIDevices is Adjustment.CDIDevices.
	AdjustCDIDevices = abi.AdjustCDIDevices
	// AdjustResources is Adjustment.Resources.
	AdjustResources = abi.AdjustResources
	// AdjustOOMScoreAdj is Adjustment.OOMScoreAdj.
	AdjustOOMScoreAdj = abi.AdjustOOMScoreAdj
	// AdjustSysctls is Adjustment.Sysctls.
	AdjustSysctls = abi.AdjustSysctls
	// AdjustRemove is Adjustment.Remove.
	AdjustRemove = abi.AdjustRemove
)

// Fields lists the fields a sets, in abi.AdjustFields order: what the
// manifest's permissions.adjust must list for the host to apply a.
func (a *Adjustment) Fields() []AdjustField { return (*abi.Adjustment)(a).Fields() }

// Empty reports whether a asks for nothing.
func (a *Adjustment) Empty() bool { return len(a.Fields()) == 0 }

// AddEnv adds an environment variable, replacing a same-named one the
// adjustment already has.
func (a *Adjustment) AddEnv(name, value string) *Adjustment {
	for i := range a.Env {
		if a.Env[i].Name == name {
			a.Env[i].Value = value
			return a
		}
	}
	a.Env = append(a.Env, EnvVar{Name: name, Value: value})
	return a
}

// SetLabel sets a label of the CRI config.
func (a *Adjustment) SetLabel(key, value string) *Adjustment {
	a.Labels = set(a.Labels, key, value)
	return a
}

// SetAnnotation sets an annotation of the CRI config.
func (a *Adjustment) SetAnnotation(key, value string) *Adjustment {
	a.Annotations = set(a.Annotations, key, value)
	return a
}

// AddMount adds a bind mount, replacing one the adjustment already has at
// the same container path. Its host path must lie under the manifest's
// permissions.hostPaths, and permissions.adjust must list mounts.
func (a *Adjustment) AddMount(m Mount) *Adjustment {
	for i := range a.Mounts {
		if a.Mounts[i].ContainerPath == m.ContainerPath {
			a.Mounts[i] = m
			return a
		}
	}
	a.Mounts = append(a.Mounts, m)
	return a
}

// AddDevice adds a device, replacing one the adjustment already has at the
// same container path (an empty ContainerPath is the host path). Its host
// path must lie under the manifest's permissions.hostPaths, and
// permissions.adjust must list devices.
func (a *Adjustment) AddDevice(d Device) *Adjustment {
	at := func(d Device) string {
		if d.ContainerPath != "" {
			return d.ContainerPath
		}
		return d.HostPath
	}
	for i := range a.Devices {
		if at(a.Devices[i]) == at(d) {
			a.Devices[i] = d
			return a
		}
	}
	a.Devices = append(a.Devices, d)
	return a
}

// AddCDIDevice adds a CDI device by its fully qualified name
// ("vendor.com/class=name"), once.
func (a *Adjustment) AddCDIDevice(name string) *Adjustment {
	for _, n := range a.CDIDevices {
		if n == name {
			return a
		}
	}
	a.CDIDevices = append(a.CDIDevices, name)
	return a
}

// resources returns a's resources, allocated on first use.
func (a *Adjustment) resources() *LinuxResources {
	if a.Resources == nil {
		a.Resources = new(LinuxResources)
	}
	return a.Resources
}

// SetMemoryLimit sets the container's memory limit in bytes.
func (a *Adjustment) SetMemoryLimit(bytes int64) *Adjustment {
	a.resources().MemoryLimitBytes = &bytes
	return a
}

// SetCPUShares sets the container's relative CPU weight (cgroup v1 shares;
// the runtime converts them to a cgroup v2 weight).
func (a *Adjustment) SetCPUShares(shares int64) *Adjustment {
	a.resources().CPUShares = &shares
	return a
}

// SetCPUQuota sets the container's CFS quota: quota microseconds of CPU
// time per period microseconds.
func (a *Adjustment) SetCPUQuota(quota, period int64) *Adjustment {
	r := a.resources()
	r.CPUQuota, r.CPUPeriod = &quota, &period
	return a
}

// SetCPU limits the container to milliCPU thousandths of a CPU, as the
// kubelet turns a CPU limit into a CFS quota: a 100 ms period, the quota
// milliCPU × 100, at least 1 ms.
func (a *Adjustment) SetCPU(milliCPU int64) *Adjustment {
	const period = 100000 // µs, the kubelet's quotaPeriod
	quota := milliCPU * period / 1000
	if quota < 1000 { // the kubelet's minQuotaPeriod
		quota = 1000
	}
	return a.SetCPUQuota(quota, period)
}

// SetCPUSet pins the container to cpus (e.g. "0-1") and, when mems is not
// empty, to those memory nodes.
func (a *Adjustment) SetCPUSet(cpus, mems string) *Adjustment {
	r := a.resources()
	r.CpusetCPUs, r.CpusetMems = cpus, mems
	return a
}

// SetHugepageLimit limits huge pages of pageSize ("2MB", "1GB") to limit
// bytes, replacing an earlier limit for the same size.
func (a *Adjustment) SetHugepageLimit(pageSize string, limit uint64) *Adjustment {
	r := a.resources()
	for i := range r.HugepageLimits {
		if r.HugepageLimits[i].PageSize == pageSize {
			r.HugepageLimits[i].Limit = limit
			return a
		}
	}
	r.HugepageLimits = append(r.HugepageLimits, HugepageLimit{PageSize: pageSize, Limit: limit})
	return a
}

// SetOOMScoreAdj sets the container's OOM score adjustment (-1000 … 1000).
func (a *Adjustment) SetOOMScoreAdj(score int64) *Adjustment {
	a.OOMScoreAdj = &score
	return a
}

// SetSysctl sets a sysctl of the pod sandbox (PreSandbox only).
func (a *Adjustment) SetSysctl(name, value string) *Adjustment {
	a.Sysctls = set(a.Sysctls, name, value)
	return a
}

// removal returns a's removal list, allocated on first use.
func (a *Adjustment) removal() *Removal {
	if a.Remove == nil {
		a.Remove = new(Removal)
	}
	return a.Remove
}

// RemoveEnv takes away environment variables the pod spec set.
func (a *Adjustment) RemoveEnv(names ...string) *Adjustment {
	a.removal().Env = append(a.removal().Env, names...)
	return a
}

// RemoveMount takes away the pod spec's mounts at these container paths.
func (a *Adjustment) RemoveMount(containerPaths ...string) *Adjustment {
	a.removal().Mounts = append(a.removal().Mounts, containerPaths...)
	return a
}

// RemoveAnnotation takes away annotations the pod spec's CRI config has.
func (a *Adjustment) RemoveAnnotation(keys ...string) *Adjustment {
	a.removal().Annotations = append(a.removal().Annotations, keys...)
	return a
}

func set(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = make(map[string]string)
	}
	m[k] = v
	return m
}

// Refusal is the error Refuse returns: a Validator's (or any hook's)
// refusal of a container, with the message the pod's status shows.
type Refusal struct {
	// Message says why, e.g. "container app mounts /etc outside the
	// allowed host paths /data".
	Message string
}

// Error implements error.
func (r *Refusal) Error() string { return r.Message }

// Refuse returns the error that refuses the container at Validate: the host
// does not create it, and its status waits with reason
// CreateContainerConfigError and this message. At any other point a
// refusal is an ordinary error (the step fails under failurePolicy Fail),
// since the host honours a refusal only at Validate.
func Refuse(message string) error { return &Refusal{Message: message} }

// refusal returns err's refusal message, if err is or wraps a *Refusal.
func refusal(err error) (string, bool) {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Message, true
	}
	return "", false
}

// PathUnder reports whether the clean absolute path p is prefix or lies
// beneath it, by path components ("/dev/fuse" is under "/dev",
// "/devices" is not): how the host checks permissions.hostPaths.
func PathUnder(p, prefix string) bool { return abi.PathUnder(p, prefix) }
