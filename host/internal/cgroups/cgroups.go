// Package cgroups keeps the kubelet's pod cgroup hierarchy (its
// cgroupsPerQOS layout): every pod runs under a cgroup of its own,
// <root>/kubepods/pod<uid> for a Guaranteed pod and
// <root>/kubepods/{burstable,besteffort}/pod<uid> for the others, whose
// cpu shares, CFS quota and memory limit are the pod's summed requests and
// limits (host/internal/qos). The runtime is told that cgroup as the
// sandbox's cgroup parent and puts the pod's containers inside it.
//
// With the cgroupfs driver the package makes and writes the cgroups
// itself, on cgroup v1 (one hierarchy per controller) and v2 (one unified
// hierarchy, controllers enabled down the path). With the systemd driver
// it only names them as systemd slices (kubepods-burstable-pod<uid>.slice),
// which systemd creates when the runtime places a container in them; the
// pod-level limits are then not written (the containers' own limits
// still are). The layout and the figures are pkg/kubelet/cm's.
package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmlet/wasmlet/host/internal/qos"
)

// The cgroup drivers.
const (
	// DriverCgroupfs writes the cgroup file system directly.
	DriverCgroupfs = "cgroupfs"
	// DriverSystemd names cgroups as systemd slices.
	DriverSystemd = "systemd"
)

// Config says where the hierarchy lives.
type Config struct {
	// MountPoint is where cgroups are mounted; empty means /sys/fs/cgroup.
	MountPoint string
	// CgroupRoot is the cgroup the hierarchy is made under ("/" when
	// empty), the kubelet's --cgroup-root.
	CgroupRoot string
	// Driver is DriverCgroupfs (the default) or DriverSystemd, as the
	// runtime's own cgroup driver.
	Driver string
	// Logger receives structured logs; nil means none.
	Logger hclog.Logger
}

// v1Controllers are the cgroup v1 hierarchies a pod cgroup is made in:
// those the pod's limits are written to and those runc expects the parent
// in; runc makes the others itself.
var v1Controllers = []string{"cpu", "cpuacct", "memory", "pids"}

// v2Controllers are enabled for the children of each cgroup on the path.
var v2Controllers = []string{"cpu", "memory", "pids"}

// Manager makes, updates and removes pod cgroups. Its methods are safe
// for concurrent use (each works on its own pod's directories; the shared
// QoS levels are made once by New).
type Manager struct {
	cfg Config
	v2  bool
	log hclog.Logger
}

// New checks the cgroup mount and, with the cgroupfs driver, makes the
// kubepods, burstable and besteffort cgroups (besteffort gets the
// smallest cpu shares, as the kubelet gives it).
func New(cfg Config) (*Manager, error) {
	if cfg.MountPoint == "" {
		cfg.MountPoint = "/sys/fs/cgroup"
	}
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = "/"
	}
	if cfg.Driver == "" {
		cfg.Driver = DriverCgroupfs
	}
	if cfg.Driver != DriverCgroupfs && cfg.Driver != DriverSystemd {
		return nil, fmt.Errorf("cgroups: unknown cgroup driver %q (want %s or %s)", cfg.Driver, DriverCgroupfs, DriverSystemd)
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	m := &Manager{cfg: cfg, log: cfg.Logger}
	_, err := os.Stat(filepath.Join(cfg.MountPoint, "cgroup.controllers"))
	m.v2 = err == nil
	if !m.v2 {
		if _, err := os.Stat(filepath.Join(cfg.MountPoint, "memory")); err != nil {
			return nil, fmt.Errorf("cgroups: no cgroup v2 or v1 memory hierarchy under %s: %w", cfg.MountPoint, err)
		}
	}
	if cfg.Driver == DriverSystemd {
		return m, nil
	}
	for _, dir := range []string{"kubepods", "kubepods/burstable", "kubepods/besteffort"} {
		if err := m.ensure(path.Join(cfg.CgroupRoot, dir)); err != nil {
			return nil, err
		}
	}
	if err := m.write(path.Join(cfg.CgroupRoot, "kubepods/besteffort"), qos.PodCgroup{CPUShares: qos.MinShares}); err != nil {
		return nil, err
	}
	return m, nil
}

// qosDir is the QoS level a class of pod lives in, relative to the root.
func qosDir(class v1.PodQOSClass) string {
	switch class {
	case v1.PodQOSGuaranteed:
		return "kubepods"
	case v1.PodQOSBestEffort:
		return "kubepods/besteffort"
	}
	return "kubepods/burstable"
}

// Parent is the pod's cgroup as the runtime is given it (the sandbox's
// CgroupParent): /kubepods/burstable/pod<uid> with cgroupfs,
// kubepods-burstable-pod<uid>.slice with systemd.
func (m *Manager) Parent(pod *v1.Pod) string {
	dir := path.Join(m.cfg.CgroupRoot, qosDir(qos.Class(pod)), "pod"+string(pod.UID))
	if m.cfg.Driver == DriverSystemd {
		return systemdSlice(dir)
	}
	return dir
}

// systemdSlice is the kubelet's systemd name of a cgroupfs path: each
// component escaped ('-' → '_') and joined by '-', ending in ".slice".
func systemdSlice(dir string) string {
	var parts []string
	for _, p := range strings.Split(strings.Trim(dir, "/"), "/") {
		if p != "" {
			parts = append(parts, strings.ReplaceAll(p, "-", "_"))
		}
	}
	if len(parts) == 0 {
		return "-.slice"
	}
	return strings.Join(parts, "-") + ".slice"
}

// Ensure makes the pod's cgroup and writes its limits (cgroupfs only):
// called before each sandbox is created, so a pod whose resources were
// resized gets its new figures.
func (m *Manager) Ensure(pod *v1.Pod) error {
	if m.cfg.Driver == DriverSystemd {
		return nil
	}
	dir := m.Parent(pod)
	if err := m.ensure(dir); err != nil {
		return fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if err := m.write(dir, qos.ForPodCgroup(pod)); err != nil {
		return fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// Resize writes one resource of the pod's cgroup from the pod's resources
// (cgroupfs only): v1.ResourceCPU its cpu shares and CFS quota,
// v1.ResourceMemory its memory limit; an in-place resize changes the pod
// cgroup one resource at a time, around its containers.
func (m *Manager) Resize(pod *v1.Pod, r v1.ResourceName) error {
	if m.cfg.Driver == DriverSystemd {
		return nil
	}
	var err error
	switch r {
	case v1.ResourceCPU:
		err = m.writeCPU(m.Parent(pod), qos.ForPodCgroup(pod))
	case v1.ResourceMemory:
		err = m.writeMemory(m.Parent(pod), qos.ForPodCgroup(pod))
	default:
		err = fmt.Errorf("cgroups: resource %s is not resized", r)
	}
	if err != nil {
		return fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// MemoryUsage is the memory the pod's cgroup uses, in bytes (v2
// memory.current, v1 memory.usage_in_bytes); an error with the systemd
// driver, whose cgroups this package does not keep.
func (m *Manager) MemoryUsage(pod *v1.Pod) (int64, error) {
	if m.cfg.Driver == DriverSystemd {
		return 0, errors.New("cgroups: the systemd driver's pod cgroups are not read")
	}
	file := filepath.Join(m.cfg.MountPoint, m.Parent(pod), "memory.current")
	if !m.v2 {
		file = filepath.Join(m.cfg.MountPoint, "memory", m.Parent(pod), "memory.usage_in_bytes")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, fmt.Errorf("cgroups: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cgroups: %s: %w", file, err)
	}
	return n, nil
}

// Remove removes the pod's cgroup (in every QoS level: the pod's class is
// not known any more when it is gone). A cgroup still holding processes
// or container cgroups stays and its error is returned, to be tried again
// at the next cleanup; a missing one is no error.
func (m *Manager) Remove(uid types.UID) error {
	if m.cfg.Driver == DriverSystemd {
		return nil
	}
	var errs []error
	for _, class := range []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		dir := path.Join(m.cfg.CgroupRoot, qosDir(class), "pod"+string(uid))
		for _, h := range m.hierarchies(dir) {
			if err := os.Remove(h); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("cgroups: remove %s: %w", h, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Pods lists the UIDs of the pod cgroups that exist, for cleanup of those
// no pod owns any more.
func (m *Manager) Pods() []types.UID {
	if m.cfg.Driver == DriverSystemd {
		return nil
	}
	seen := map[types.UID]bool{}
	var out []types.UID
	for _, class := range []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		dir := path.Join(m.cfg.CgroupRoot, qosDir(class))
		ents, err := os.ReadDir(m.hierarchies(dir)[0])
		if err != nil {
			continue
		}
		for _, e := range ents {
			if uid, ok := strings.CutPrefix(e.Name(), "pod"); ok && e.IsDir() && !seen[types.UID(uid)] {
				seen[types.UID(uid)] = true
				out = append(out, types.UID(uid))
			}
		}
	}
	return out
}

// hierarchies are the directories of one cgroup: one on v2, one per
// controller on v1 (memory first, the one every setup has).
func (m *Manager) hierarchies(dir string) []string {
	if m.v2 {
		return []string{filepath.Join(m.cfg.MountPoint, dir)}
	}
	out := []string{filepath.Join(m.cfg.MountPoint, "memory", dir)}
	for _, c := range v1Controllers {
		if c != "memory" {
			out = append(out, filepath.Join(m.cfg.MountPoint, c, dir))
		}
	}
	return out
}

// ensure makes the cgroup in every hierarchy; on v2 it first enables the
// controllers for the children of each cgroup on the way down.
func (m *Manager) ensure(dir string) error {
	if m.v2 {
		parent := m.cfg.MountPoint
		for _, p := range strings.Split(strings.Trim(dir, "/"), "/") {
			if err := enableControllers(parent); err != nil {
				return err
			}
			parent = filepath.Join(parent, p)
			if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("cgroups: %w", err)
			}
		}
		return nil
	}
	for _, c := range v1Controllers {
		if _, err := os.Stat(filepath.Join(m.cfg.MountPoint, c)); err != nil {
			continue // a controller this kernel does not mount
		}
		if err := os.MkdirAll(filepath.Join(m.cfg.MountPoint, c, dir), 0o755); err != nil {
			return fmt.Errorf("cgroups: %w", err)
		}
	}
	return nil
}

// enableControllers turns on the controllers the pod cgroups use for the
// children of a v2 cgroup, those it has.
func enableControllers(dir string) error {
	have, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("cgroups: %w", err)
	}
	on, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	var add []string
	for _, c := range v2Controllers {
		if hasWord(string(have), c) && !hasWord(string(on), c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) == 0 {
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(add, " ")), 0o644); err != nil {
		return fmt.Errorf("cgroups: enable %s in %s: %w", strings.Join(add, " "), dir, err)
	}
	return nil
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// write sets the cgroup's cpu shares, CFS quota and memory limit; an
// unset quota or limit is written as unlimited, so a pod resized to no
// limit loses it.
func (m *Manager) write(dir string, r qos.PodCgroup) error {
	if err := m.writeCPU(dir, r); err != nil {
		return err
	}
	return m.writeMemory(dir, r)
}

// writeCPU sets the cgroup's cpu shares (v2 weight) and CFS quota.
func (m *Manager) writeCPU(dir string, r qos.PodCgroup) error {
	if m.v2 {
		quota, period := "max", strconv.Itoa(qos.QuotaPeriod)
		if r.CPUQuota != nil && *r.CPUQuota > 0 {
			quota, period = strconv.FormatInt(*r.CPUQuota, 10), strconv.FormatInt(*r.CPUPeriod, 10)
		}
		return writeFiles(filepath.Join(m.cfg.MountPoint, dir), map[string]string{
			"cpu.weight": strconv.FormatInt(sharesToWeight(r.CPUShares), 10),
			"cpu.max":    quota + " " + period,
		})
	}
	cpu := map[string]string{"cpu.shares": strconv.FormatInt(r.CPUShares, 10), "cpu.cfs_quota_us": "-1"}
	if r.CPUQuota != nil && *r.CPUQuota > 0 {
		cpu["cpu.cfs_period_us"] = strconv.FormatInt(*r.CPUPeriod, 10)
		cpu["cpu.cfs_quota_us"] = strconv.FormatInt(*r.CPUQuota, 10)
	}
	return writeFiles(filepath.Join(m.cfg.MountPoint, "cpu", dir), cpu)
}

// writeMemory sets the cgroup's memory limit.
func (m *Manager) writeMemory(dir string, r qos.PodCgroup) error {
	if m.v2 {
		mem := "max"
		if r.MemoryLimit != nil && *r.MemoryLimit > 0 {
			mem = strconv.FormatInt(*r.MemoryLimit, 10)
		}
		return writeFiles(filepath.Join(m.cfg.MountPoint, dir), map[string]string{"memory.max": mem})
	}
	mem := "-1"
	if r.MemoryLimit != nil && *r.MemoryLimit > 0 {
		mem = strconv.FormatInt(*r.MemoryLimit, 10)
	}
	return writeFiles(filepath.Join(m.cfg.MountPoint, "memory", dir), map[string]string{"memory.limit_in_bytes": mem})
}

// writeFiles writes cgroup files in a fixed order (period before quota).
func writeFiles(dir string, files map[string]string) error {
	for _, name := range []string{"cpu.shares", "cpu.cfs_period_us", "cpu.cfs_quota_us", "cpu.weight", "cpu.max", "memory.limit_in_bytes", "memory.max"} {
		v, ok := files[name]
		if !ok {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			return fmt.Errorf("cgroups: write %s to %s: %w", v, filepath.Join(dir, name), err)
		}
	}
	return nil
}

// sharesToWeight is runc's conversion of cgroup v1 cpu.shares [2, 262144]
// to a v2 cpu.weight [1, 10000].
func sharesToWeight(shares int64) int64 {
	if shares == 0 {
		return 100
	}
	return 1 + ((shares-2)*9999)/262142
}

// Swap says how the node limits a container's swap, as the kubelet's
// NoSwap behaviour asks: on cgroup v1 with the memsw controller the
// memory+swap limit equals the memory limit; on v2 with the swap
// controller memory.swap.max is 0; without the controller, nothing.
type Swap int

// The swap modes.
const (
	// SwapUncontrolled: no swap controller, nothing is sent.
	SwapUncontrolled Swap = iota
	// SwapV1: memory_swap_limit_in_bytes = memory_limit_in_bytes.
	SwapV1
	// SwapV2: the unified memory.swap.max = 0.
	SwapV2
)

// DetectSwap reads which swap controller the cgroup mount has.
func DetectSwap(mountPoint string) Swap {
	if mountPoint == "" {
		mountPoint = "/sys/fs/cgroup"
	}
	if _, err := os.Stat(filepath.Join(mountPoint, "cgroup.controllers")); err == nil {
		// The root has no swap files of its own: look one level down.
		if m, _ := filepath.Glob(filepath.Join(mountPoint, "*", "memory.swap.max")); len(m) > 0 {
			return SwapV2
		}
		return SwapUncontrolled
	}
	if _, err := os.Stat(filepath.Join(mountPoint, "memory", "memory.memsw.limit_in_bytes")); err == nil {
		return SwapV1
	}
	return SwapUncontrolled
}

// HugePageSizes lists the node's huge page sizes as the kubelet names them
// for the runtime ("2MB", "1GB"), from <sysfs>/kernel/mm/hugepages; ""
// means /sys.
func HugePageSizes(sysfs string) []string {
	if sysfs == "" {
		sysfs = "/sys"
	}
	dirs, _ := filepath.Glob(filepath.Join(sysfs, "kernel", "mm", "hugepages", "hugepages-*kB"))
	var out []string
	for _, d := range dirs {
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(d), "hugepages-"), "kB"), 10, 64)
		if err != nil || kb <= 0 {
			continue
		}
		out = append(out, HugePageUnit(kb<<10))
	}
	return out
}

// HugePageUnit names a page size in bytes in the runtime's unit ("2MB").
func HugePageUnit(bytes int64) string {
	units := []string{"B", "KB", "MB", "GB", "TB", "PB"}
	i := 0
	for bytes >= 1024 && bytes%1024 == 0 && i < len(units)-1 {
		bytes /= 1024
		i++
	}
	return strconv.FormatInt(bytes, 10) + units[i]
}
