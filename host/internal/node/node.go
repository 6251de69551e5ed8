// Package node describes the host the agent runs on as a v1.Node: name, labels,
// capacity and allocatable (cpu, memory, ephemeral storage, pods),
// addresses and node info. Admission uses it and /pods reports its name and
// addresses; registration with an API server builds on it later.
package node

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Config configures New.
type Config struct {
	// Name is the node's name; empty means the host name.
	Name string
	// MaxPods is the node's pods capacity; <= 0 means 110.
	MaxPods int
	// RootDir is where ephemeral storage is measured; empty means "/".
	RootDir string
	// Allocatable gives the node's allocatable from its capacity
	// (host/internal/allocatable: capacity less what is reserved); an
	// error fails New. Nil makes allocatable the capacity.
	Allocatable func(capacity v1.ResourceList) (v1.ResourceList, error)
	// Labels are added to the node's own (hostname, os, arch), over them
	// when a key is the same, as the kubelet's --node-labels.
	Labels map[string]string
	// Taints are the node's spec.taints at registration.
	Taints []v1.Taint
	// ProviderID is the node's spec.providerID.
	ProviderID string
	// NodeIPs are the node's InternalIP addresses, one per family (a
	// dual-stack node's first is its primary); an unspecified address
	// (0.0.0.0, ::) stands for the host's first of that family. An
	// address no interface of the host has is an error, as the kubelet's.
	// Empty: the host's first global address, IPv4 before IPv6.
	NodeIPs []string
	// AgentVersion is reported as nodeInfo.kubeletVersion.
	AgentVersion string
	// RuntimeVersion is reported as nodeInfo.containerRuntimeVersion
	// (e.g. "containerd://1.6.20").
	RuntimeVersion string
	// KubeletPort is the port of the node's kubelet API, advertised in
	// status.daemonEndpoints; 0 advertises none.
	KubeletPort int32
	// ProcRoot is where proc and sys are read from; empty means "/". Tests
	// point it at a fake tree.
	ProcRoot string
}

// New reads the machine and returns its v1.Node. Parts that cannot be read
// (product UUID needs root, say) are left empty; a missing /proc/meminfo is
// an error.
func New(cfg Config) (*v1.Node, error) {
	host, herr := os.Hostname()
	if cfg.Name == "" {
		if herr != nil {
			return nil, fmt.Errorf("node: host name: %w", herr)
		}
		cfg.Name = strings.ToLower(host)
	}
	if cfg.MaxPods <= 0 {
		cfg.MaxPods = 110
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/"
	}
	if cfg.RootDir == "" {
		cfg.RootDir = "/"
	}
	mem, err := memTotal(cfg.ProcRoot + "/proc/meminfo")
	if err != nil {
		return nil, err
	}
	capacity := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
		v1.ResourcePods:   *resource.NewQuantity(int64(cfg.MaxPods), resource.DecimalSI),
	}
	if st, ok := storage(cfg.RootDir); ok {
		capacity[v1.ResourceEphemeralStorage] = *resource.NewQuantity(st, resource.BinarySI)
	}
	allocatable := capacity.DeepCopy()
	if cfg.Allocatable != nil {
		if allocatable, err = cfg.Allocatable(capacity); err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
	}
	addrs, err := addresses(host, cfg.NodeIPs)
	if err != nil {
		return nil, err
	}
	n := &v1.Node{
		TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: cfg.Name,
			Labels: map[string]string{
				v1.LabelHostname:   cfg.Name,
				v1.LabelOSStable:   runtime.GOOS,
				v1.LabelArchStable: runtime.GOARCH,
			},
		},
		Status: v1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			Addresses:   addrs,
			DaemonEndpoints: v1.NodeDaemonEndpoints{
				KubeletEndpoint: v1.DaemonEndpoint{Port: cfg.KubeletPort},
			},
			NodeInfo: v1.NodeSystemInfo{
				MachineID:               readTrim(cfg.ProcRoot + "/etc/machine-id"),
				SystemUUID:              readTrim(cfg.ProcRoot + "/sys/class/dmi/id/product_uuid"),
				BootID:                  readTrim(cfg.ProcRoot + "/proc/sys/kernel/random/boot_id"),
				KernelVersion:           readTrim(cfg.ProcRoot + "/proc/sys/kernel/osrelease"),
				OSImage:                 osImage(cfg.ProcRoot + "/etc/os-release"),
				ContainerRuntimeVersion: cfg.RuntimeVersion,
				KubeletVersion:          cfg.AgentVersion,
				OperatingSystem:         runtime.GOOS,
				Architecture:            runtime.GOARCH,
			},
		},
	}
	maps.Copy(n.Labels, cfg.Labels)
	n.Spec.Taints = append([]v1.Taint(nil), cfg.Taints...)
	n.Spec.ProviderID = cfg.ProviderID
	return n, nil
}

// AddExtendedResources adds the resources extended gives (device plugins')
// to a status's capacity and allocatable; a nil extended adds none.
func AddExtendedResources(s *v1.NodeStatus, extended func() (capacity, allocatable v1.ResourceList)) {
	if extended == nil {
		return
	}
	capacity, allocatable := extended()
	if len(capacity)+len(allocatable) == 0 {
		return
	}
	s.Capacity, s.Allocatable = s.Capacity.DeepCopy(), s.Allocatable.DeepCopy()
	if s.Capacity == nil {
		s.Capacity = v1.ResourceList{}
	}
	if s.Allocatable == nil {
		s.Allocatable = v1.ResourceList{}
	}
	for n, q := range capacity {
		s.Capacity[n] = q
	}
	for n, q := range allocatable {
		s.Allocatable[n] = q
	}
}

// WithExtendedResources is n with the resources extended gives added to
// its status (a copy; n itself when extended adds none), for admission.
func WithExtendedResources(n *v1.Node, extended func() (capacity, allocatable v1.ResourceList)) *v1.Node {
	if n == nil || extended == nil {
		return n
	}
	capacity, allocatable := extended()
	if len(capacity)+len(allocatable) == 0 {
		return n
	}
	c := *n
	c.Status.Capacity, c.Status.Allocatable = n.Status.Capacity, n.Status.Allocatable
	AddExtendedResources(&c.Status, func() (v1.ResourceList, v1.ResourceList) { return capacity, allocatable })
	return &c
}

// MemoryCapacity is the machine's memory in bytes (MemTotal of
// <procRoot>/proc/meminfo; "" is "/").
func MemoryCapacity(procRoot string) (int64, error) {
	if procRoot == "" {
		procRoot = "/"
	}
	return memTotal(procRoot + "/proc/meminfo")
}

// memTotal reads MemTotal from a meminfo file, in bytes.
func memTotal(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("node: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("node: %s: MemTotal %q: %w", path, f[1], err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("node: %s: no MemTotal line", path)
}

// storage is the size of the file system holding dir (or "/" when dir does
// not exist yet).
func storage(dir string) (int64, bool) {
	var st syscall.Statfs_t
	for _, d := range []string{dir, "/"} {
		if err := syscall.Statfs(d, &st); err == nil {
			return int64(st.Blocks) * st.Bsize, true
		}
	}
	return 0, false
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// osImage is PRETTY_NAME from os-release, as the kubelet reports it.
func osImage(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"'`)
		}
	}
	return ""
}

// addresses are the InternalIPs (nodeIPs as resolved by internalIPs) and
// the host name.
func addresses(host string, nodeIPs []string) ([]v1.NodeAddress, error) {
	ips, err := internalIPs(nodeIPs, hostIPs())
	if err != nil {
		return nil, err
	}
	var out []v1.NodeAddress
	for _, ip := range ips {
		out = append(out, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
	}
	if host != "" {
		out = append(out, v1.NodeAddress{Type: v1.NodeHostName, Address: host})
	}
	return out, nil
}

// internalIPs resolves the configured node IPs against the host's
// addresses (in interface order): none configured is the first IPv4, else
// the first IPv6; an unspecified address is the host's first of its
// family; any other must be one of the host's.
func internalIPs(nodeIPs []string, host []net.IP) ([]string, error) {
	first := func(v4 bool) net.IP {
		for _, ip := range host {
			if ip.IsGlobalUnicast() && (ip.To4() != nil) == v4 {
				return ip
			}
		}
		return nil
	}
	if len(nodeIPs) == 0 {
		for _, v4 := range []bool{true, false} {
			if ip := first(v4); ip != nil {
				return []string{ip.String()}, nil
			}
		}
		return nil, nil
	}
	var out []string
	for _, s := range nodeIPs {
		ip := net.ParseIP(strings.TrimSpace(s))
		switch {
		case ip == nil:
			return nil, fmt.Errorf("node: node IP %q is not an IP address", s)
		case ip.IsUnspecified():
			if found := first(ip.To4() != nil); found != nil {
				out = append(out, found.String())
			}
		case slices.ContainsFunc(host, ip.Equal):
			out = append(out, ip.String())
		default:
			return nil, fmt.Errorf("node: node IP %q not found in the host's network interfaces", s)
		}
	}
	return out, nil
}

// hostIPs are the addresses of the host's interfaces that are up, the
// loopback's aside.
func hostIPs() []net.IP {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var out []net.IP
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := i.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				out = append(out, ipn.IP)
			}
		}
	}
	return out
}
