package abi

import (
	"path"
	"slices"
	"strings"
)

// AdjustField is one field of an Adjustment, as a manifest's
// permissions.adjust names it. It is also the first part of the conflict key
// under which the host merges the adjustments of several plugins.
type AdjustField string

// The fields a hook may adjust.
const (
	// AdjustEnv: Adjustment.Env.
	AdjustEnv AdjustField = "env"
	// AdjustLabels: Adjustment.Labels.
	AdjustLabels AdjustField = "labels"
	// AdjustAnnotations: Adjustment.Annotations.
	AdjustAnnotations AdjustField = "annotations"
	// AdjustMounts: Adjustment.Mounts (host paths under permissions.hostPaths).
	AdjustMounts AdjustField = "mounts"
	// AdjustDevices: Adjustment.Devices (host paths under permissions.hostPaths).
	AdjustDevices AdjustField = "devices"
	// AdjustCDIDevices: Adjustment.CDIDevices.
	AdjustCDIDevices AdjustField = "cdiDevices"
	// AdjustResources: Adjustment.Resources.
	AdjustResources AdjustField = "resources"
	// AdjustOOMScoreAdj: Adjustment.OOMScoreAdj.
	AdjustOOMScoreAdj AdjustField = "oomScoreAdj"
	// AdjustSysctls: Adjustment.Sysctls.
	AdjustSysctls AdjustField = "sysctls"
	// AdjustRemove: Adjustment.Remove.
	AdjustRemove AdjustField = "remove"
)

// AdjustFields lists every AdjustField in a stable order.
var AdjustFields = []AdjustField{AdjustEnv, AdjustLabels, AdjustAnnotations, AdjustMounts, AdjustDevices, AdjustCDIDevices, AdjustResources, AdjustOOMScoreAdj, AdjustSysctls, AdjustRemove}

// DefaultAdjust is what a manifest that declares no permissions.adjust may
// adjust: the reach of the initial ABI v1.
var DefaultAdjust = []AdjustField{AdjustEnv, AdjustLabels, AdjustAnnotations}

// knownAdjustField reports whether f is an AdjustField of this ABI.
func knownAdjustField(f AdjustField) bool {
	return slices.Contains(AdjustFields, f)
}

// Fields lists the fields a sets (non-empty), in AdjustFields order; none
// for nil.
func (a *Adjustment) Fields() []AdjustField {
	if a == nil {
		return nil
	}
	set := map[AdjustField]bool{
		AdjustEnv:         len(a.Env) > 0,
		AdjustLabels:      len(a.Labels) > 0,
		AdjustAnnotations: len(a.Annotations) > 0,
		AdjustMounts:      len(a.Mounts) > 0,
		AdjustDevices:     len(a.Devices) > 0,
		AdjustCDIDevices:  len(a.CDIDevices) > 0,
		AdjustResources:   a.Resources != nil && !a.Resources.Empty(),
		AdjustOOMScoreAdj: a.OOMScoreAdj != nil,
		AdjustSysctls:     len(a.Sysctls) > 0,
		AdjustRemove:      a.Remove != nil && (len(a.Remove.Env) > 0 || len(a.Remove.Mounts) > 0 || len(a.Remove.Annotations) > 0),
	}
	var out []AdjustField
	for _, f := range AdjustFields {
		if set[f] {
			out = append(out, f)
		}
	}
	return out
}

// Empty reports whether r sets no field.
func (r *Resources) Empty() bool {
	return r.CPUShares == nil && r.CPUQuota == nil && r.CPUPeriod == nil && r.CpusetCPUs == "" &&
		r.CpusetMems == "" && r.MemoryLimitBytes == nil && len(r.HugepageLimits) == 0
}

// MayAdjust reports whether the permissions allow adjusting f: f is listed
// in Adjust, or Adjust is empty and f is in DefaultAdjust.
func (p *Permissions) MayAdjust(f AdjustField) bool {
	if len(p.Adjust) == 0 {
		return slices.Contains(DefaultAdjust, f)
	}
	return slices.Contains(p.Adjust, f)
}

// HostPathAllowed reports whether the absolute path hostPath lies under one
// of HostPaths (path components compared after cleaning, so "/dev/fuse"
// is under "/dev" and "/devices" is not; ".." cannot climb out).
func (p *Permissions) HostPathAllowed(hostPath string) bool {
	if !path.IsAbs(hostPath) {
		return false
	}
	hp := path.Clean(hostPath)
	for _, prefix := range p.HostPaths {
		if PathUnder(hp, prefix) {
			return true
		}
	}
	return false
}

// PathUnder reports whether the clean absolute path p is prefix or lies
// beneath it.
func PathUnder(p, prefix string) bool {
	prefix = path.Clean(prefix)
	return p == prefix || prefix == "/" || strings.HasPrefix(p, prefix+"/")
}
