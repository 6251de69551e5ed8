package extension

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/container"
)

// merger merges the adjustments of several hook plugins in order, refusing
// conflicts as containerd NRI's result merge does: every adjusted item has
// a conflict key (field, then the name or path of the item), and two
// plugins setting one key to different values, or one removing what another
// added, conflict. The same value twice is no conflict.
type merger struct {
	out abi.Adjustment
	// owners is the plugin that set each key; values the value it set
	// (removals under "remove:"+key).
	owners map[string]string
	values map[string]string
}

// removed is the value a removal records under its key.
const removed = "\x00removed"

// conflictError is two plugins adjusting one key differently.
type conflictError struct {
	key, first, second string
	removal            bool
}

func (c *conflictError) Error() string {
	if c.removal {
		return fmt.Sprintf("hook plugins %s and %s conflict: one removes %s, which the other adds", c.first, c.second, c.key)
	}
	return fmt.Sprintf("hook plugins %s and %s conflict: both set %s, to different values", c.first, c.second, c.key)
}

// claim records that plugin sets key to value, or reports the conflict.
func (m *merger) claim(plugin, key, value string) error {
	if m.owners == nil {
		m.owners, m.values = map[string]string{}, map[string]string{}
	}
	// A removal of key conflicts with another plugin's addition and
	// the other way round.
	other, otherKey := "remove:"+key, key
	if value == removed {
		other, key = key, "remove:"+key
		otherKey = other
	}
	if o, ok := m.owners[other]; ok && o != plugin {
		return &conflictError{key: otherKey, first: o, second: plugin, removal: true}
	}
	if o, ok := m.owners[key]; ok && o != plugin && m.values[key] != value {
		return &conflictError{key: key, first: o, second: plugin}
	}
	if _, ok := m.owners[key]; !ok {
		m.owners[key] = plugin
	}
	m.values[key] = value
	return nil
}

// add merges plugin's adjustment a (already checked against its
// permissions) into the result.
func (m *merger) add(plugin string, a *abi.Adjustment) error {
	for _, e := range a.Env {
		if err := m.claim(plugin, "env:"+e.Name, e.Value); err != nil {
			return err
		}
		if i := slices.IndexFunc(m.out.Env, func(x abi.EnvVar) bool { return x.Name == e.Name }); i >= 0 {
			m.out.Env[i] = e
		} else {
			m.out.Env = append(m.out.Env, e)
		}
	}
	for _, f := range []struct {
		field abi.AdjustField
		src   map[string]string
		dst   *map[string]string
	}{
		{abi.AdjustLabels, a.Labels, &m.out.Labels},
		{abi.AdjustAnnotations, a.Annotations, &m.out.Annotations},
		{abi.AdjustSysctls, a.Sysctls, &m.out.Sysctls},
	} {
		for k, v := range f.src {
			if err := m.claim(plugin, string(f.field)+":"+k, v); err != nil {
				return err
			}
			if *f.dst == nil {
				*f.dst = map[string]string{}
			}
			(*f.dst)[k] = v
		}
	}
	for _, mt := range a.Mounts {
		if err := m.claim(plugin, "mounts:"+mt.ContainerPath, jsonString(mt)); err != nil {
			return err
		}
		m.out.Mounts = container.ReplaceOrAppend(m.out.Mounts, mt, func(x abi.Mount) bool { return x.ContainerPath == mt.ContainerPath })
	}
	for _, d := range a.Devices {
		if d.ContainerPath == "" {
			d.ContainerPath = d.HostPath
		}
		if d.Permissions == "" {
			d.Permissions = "rwm"
		}
		if err := m.claim(plugin, "devices:"+d.ContainerPath, jsonString(d)); err != nil {
			return err
		}
		m.out.Devices = container.ReplaceOrAppend(m.out.Devices, d, func(x abi.Device) bool { return x.ContainerPath == d.ContainerPath })
	}
	for _, name := range a.CDIDevices {
		if err := m.claim(plugin, "cdiDevices:"+name, ""); err != nil {
			return err
		}
		if !slices.Contains(m.out.CDIDevices, name) {
			m.out.CDIDevices = append(m.out.CDIDevices, name)
		}
	}
	if a.OOMScoreAdj != nil {
		if err := m.claim(plugin, string(abi.AdjustOOMScoreAdj), strconv.FormatInt(*a.OOMScoreAdj, 10)); err != nil {
			return err
		}
		m.out.OOMScoreAdj = a.OOMScoreAdj
	}
	if err := m.addResources(plugin, a.Resources); err != nil {
		return err
	}
	return m.addRemoval(plugin, a.Remove)
}

// addResources merges r field by field.
func (m *merger) addResources(plugin string, r *abi.Resources) error {
	if r == nil {
		return nil
	}
	if m.out.Resources == nil {
		m.out.Resources = &abi.Resources{}
	}
	out := m.out.Resources
	for _, f := range []struct {
		name string
		src  *int64
		dst  **int64
	}{
		{"cpuShares", r.CPUShares, &out.CPUShares},
		{"cpuQuota", r.CPUQuota, &out.CPUQuota},
		{"cpuPeriod", r.CPUPeriod, &out.CPUPeriod},
		{"memoryLimitBytes", r.MemoryLimitBytes, &out.MemoryLimitBytes},
	} {
		if f.src == nil {
			continue
		}
		if err := m.claim(plugin, "resources:"+f.name, strconv.FormatInt(*f.src, 10)); err != nil {
			return err
		}
		*f.dst = f.src
	}
	for _, f := range []struct {
		name, src string
		dst       *string
	}{
		{"cpusetCpus", r.CpusetCPUs, &out.CpusetCPUs},
		{"cpusetMems", r.CpusetMems, &out.CpusetMems},
	} {
		if f.src == "" {
			continue
		}
		if err := m.claim(plugin, "resources:"+f.name, f.src); err != nil {
			return err
		}
		*f.dst = f.src
	}
	for _, h := range r.HugepageLimits {
		if err := m.claim(plugin, "resources:hugepageLimits:"+h.PageSize, strconv.FormatUint(h.Limit, 10)); err != nil {
			return err
		}
		out.HugepageLimits = container.ReplaceOrAppend(out.HugepageLimits, h, func(x abi.HugepageLimit) bool { return x.PageSize == h.PageSize })
	}
	return nil
}

// addRemoval merges r: a removal conflicts with another plugin's addition
// of the same item.
func (m *merger) addRemoval(plugin string, r *abi.Removal) error {
	if r == nil {
		return nil
	}
	for _, f := range []struct {
		field abi.AdjustField
		names []string
	}{
		{abi.AdjustEnv, r.Env},
		{abi.AdjustMounts, r.Mounts},
		{abi.AdjustAnnotations, r.Annotations},
	} {
		for _, n := range f.names {
			if err := m.claim(plugin, string(f.field)+":"+n, removed); err != nil {
				return err
			}
		}
	}
	if m.out.Remove == nil {
		m.out.Remove = &abi.Removal{}
	}
	m.out.Remove.Env = appendNew(m.out.Remove.Env, r.Env)
	m.out.Remove.Mounts = appendNew(m.out.Remove.Mounts, r.Mounts)
	m.out.Remove.Annotations = appendNew(m.out.Remove.Annotations, r.Annotations)
	return nil
}

// result is the merged adjustment (nil when no plugin adjusted anything)
// and the owner of each conflict key.
func (m *merger) result() (*abi.Adjustment, map[string]string) {
	if m.owners == nil {
		return nil, nil
	}
	return &m.out, m.owners
}

// appendNew appends the elements of add not yet in list.
func appendNew(list, add []string) []string {
	for _, s := range add {
		if !slices.Contains(list, s) {
			list = append(list, s)
		}
	}
	return list
}

// jsonString is v's JSON, the value compared for a conflict.
func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
