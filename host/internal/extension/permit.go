package extension

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/wasmlet/wasmlet/abi"
)

// honoured lists the adjustment fields each point honours.
var honoured = map[abi.HookPoint][]abi.AdjustField{
	abi.HookPreSandbox: {abi.AdjustLabels, abi.AdjustAnnotations, abi.AdjustSysctls, abi.AdjustRemove},
	abi.HookPreCreate: {abi.AdjustEnv, abi.AdjustLabels, abi.AdjustAnnotations, abi.AdjustMounts, abi.AdjustDevices,
		abi.AdjustCDIDevices, abi.AdjustResources, abi.AdjustOOMScoreAdj, abi.AdjustRemove},
}

// honouredAt is the part of a that point honours (SPEC §3.3): the rest is
// ignored, as the ABI has always ignored adjustments where they do not
// apply.
func honouredAt(point abi.HookPoint, a *abi.Adjustment) *abi.Adjustment {
	out := *a
	keep := honoured[point]
	for _, f := range []struct {
		field abi.AdjustField
		clear func()
	}{
		{abi.AdjustEnv, func() { out.Env = nil }},
		{abi.AdjustMounts, func() { out.Mounts = nil }},
		{abi.AdjustDevices, func() { out.Devices = nil }},
		{abi.AdjustCDIDevices, func() { out.CDIDevices = nil }},
		{abi.AdjustResources, func() { out.Resources = nil }},
		{abi.AdjustOOMScoreAdj, func() { out.OOMScoreAdj = nil }},
		{abi.AdjustSysctls, func() { out.Sysctls = nil }},
	} {
		if !slices.Contains(keep, f.field) {
			f.clear()
		}
	}
	if out.Remove != nil && point == abi.HookPreSandbox {
		out.Remove = &abi.Removal{Annotations: out.Remove.Annotations}
	}
	return &out
}

// permit checks a plugin's adjustment (honouredAt its point) against its
// manifest's permissions and the ABI's rules: each field declared in
// permissions.adjust, host paths under permissions.hostPaths, paths
// absolute, propagations, device permissions and CDI names well formed.
// The error names the field; the caller names the plugin and the pod.
func permit(m *abi.Manifest, a *abi.Adjustment) error {
	for _, f := range a.Fields() {
		if !m.Permissions.MayAdjust(f) {
			return fmt.Errorf("adjustment field %q is not declared in the manifest's permissions.adjust", f)
		}
	}
	for i, mt := range a.Mounts {
		if err := hostPath(m, fmt.Sprintf("mounts[%d].hostPath", i), mt.HostPath); err != nil {
			return err
		}
		if !path.IsAbs(mt.ContainerPath) {
			return fmt.Errorf("mounts[%d].containerPath %q: must be absolute", i, mt.ContainerPath)
		}
		switch mt.Propagation {
		case "", abi.PropagationNone, abi.PropagationHostToContainer, abi.PropagationBidirectional:
		default:
			return fmt.Errorf("mounts[%d].propagation %q: want None, HostToContainer or Bidirectional", i, mt.Propagation)
		}
	}
	for i, d := range a.Devices {
		if err := hostPath(m, fmt.Sprintf("devices[%d].hostPath", i), d.HostPath); err != nil {
			return err
		}
		if d.ContainerPath != "" && !path.IsAbs(d.ContainerPath) {
			return fmt.Errorf("devices[%d].containerPath %q: must be absolute", i, d.ContainerPath)
		}
		if strings.Trim(d.Permissions, "rwm") != "" {
			return fmt.Errorf("devices[%d].permissions %q: want letters of rwm", i, d.Permissions)
		}
	}
	for i, name := range a.CDIDevices {
		if k, _, ok := strings.Cut(name, "="); !ok || !strings.Contains(k, "/") {
			return fmt.Errorf("cdiDevices[%d] %q: want a fully qualified CDI name, vendor.com/class=name", i, name)
		}
	}
	return nil
}

// hostPath checks that p is absolute and lies under the manifest's
// permissions.hostPaths.
func hostPath(m *abi.Manifest, field, p string) error {
	if !path.IsAbs(p) {
		return fmt.Errorf("%s %q: must be absolute", field, p)
	}
	if !m.Permissions.HostPathAllowed(p) {
		return fmt.Errorf("%s %q: not under the manifest's permissions.hostPaths %v", field, p, m.Permissions.HostPaths)
	}
	return nil
}
