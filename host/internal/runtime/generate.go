package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmlet/wasmlet/host/internal/cgroups"
	"github.com/wasmlet/wasmlet/host/internal/podenv"
	"github.com/wasmlet/wasmlet/host/internal/qos"
)

func namespaceOptions(pod *v1.Pod) *runtimeapi.NamespaceOption {
	o := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}
	// The node's user namespace unless the pod opts out; a pod with
	// hostUsers: false is refused at admission (no ID mappings here).
	if pod.Spec.HostUsers == nil || *pod.Spec.HostUsers {
		o.UsernsOptions = &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}
	}
	if pod.Spec.HostNetwork {
		o.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostPID {
		o.Pid = runtimeapi.NamespaceMode_NODE
	} else if pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace {
		o.Pid = runtimeapi.NamespaceMode_POD
	}
	if pod.Spec.HostIPC {
		o.Ipc = runtimeapi.NamespaceMode_NODE
	}
	return o
}

// sandboxConfig is the CRI sandbox config of a pod, as the kubelet makes it.
func (m *Manager) sandboxConfig(pod *v1.Pod, attempt uint32) *runtimeapi.PodSandboxConfig {
	c := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt},
		LogDirectory: m.PodLogDir(pod.Namespace, pod.Name, pod.UID),
		Labels:       sandboxLabels(pod),
		Annotations:  map[string]string{},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			// The sandbox runs the runtime's default seccomp profile
			// whatever the pod asks for its containers, as the kubelet
			// forces it.
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: namespaceOptions(pod),
				Seccomp:          &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
			},
			Sysctls:   map[string]string{},
			Resources: linuxResources(qos.Sandbox(pod)),
			Overhead:  &runtimeapi.LinuxContainerResources{},
		},
	}
	if o, ok := qos.Overhead(pod); ok {
		c.Linux.Overhead = linuxResources(o)
	}
	if m.cfg.Cgroups != nil {
		c.Linux.CgroupParent = m.cfg.Cgroups.Parent(pod)
	}
	for k, v := range pod.Annotations {
		c.Annotations[k] = v
	}
	// A host-network sandbox has no UTS namespace of its own: no hostname.
	if !pod.Spec.HostNetwork {
		c.Hostname = sandboxHostname(pod, m.cfg.ClusterDomain)
	}
	// A sandbox holding a privileged container must be privileged itself
	// (containerd refuses the container otherwise), as the kubelet makes it.
	c.Linux.SecurityContext.Privileged = hasPrivilegedContainer(pod)
	if sc := pod.Spec.SecurityContext; sc != nil {
		c.Linux.SecurityContext.RunAsUser = int64Value(sc.RunAsUser)
		c.Linux.SecurityContext.RunAsGroup = int64Value(sc.RunAsGroup)
		c.Linux.SecurityContext.SupplementalGroups = supplementalGroups(sc)
		c.Linux.SecurityContext.SelinuxOptions = selinuxOptions(sc.SELinuxOptions)
		for _, s := range sc.Sysctls {
			c.Linux.Sysctls[s.Name] = s.Value
		}
	}
	// Every container port, as the kubelet sends them (a hostPort of 0
	// maps nothing).
	for _, ctr := range pod.Spec.Containers {
		for _, p := range ctr.Ports {
			proto := runtimeapi.Protocol_TCP
			switch p.Protocol {
			case v1.ProtocolUDP:
				proto = runtimeapi.Protocol_UDP
			case v1.ProtocolSCTP:
				proto = runtimeapi.Protocol_SCTP
			}
			c.PortMappings = append(c.PortMappings, &runtimeapi.PortMapping{Protocol: proto, ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIp: p.HostIP})
		}
	}
	return c
}

// hasPrivilegedContainer reports whether any container of the pod (init,
// app or ephemeral) asks to be privileged.
func hasPrivilegedContainer(pod *v1.Pod) bool {
	priv := func(sc *v1.SecurityContext) bool { return sc != nil && sc.Privileged != nil && *sc.Privileged }
	for _, c := range append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if priv(c.SecurityContext) {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if priv(c.SecurityContext) {
			return true
		}
	}
	return false
}

// supplementalGroups are the pod's fsGroup, then its supplemental groups,
// in the kubelet's order.
func supplementalGroups(sc *v1.PodSecurityContext) []int64 {
	var g []int64
	if sc.FSGroup != nil {
		g = append(g, *sc.FSGroup)
	}
	return append(g, sc.SupplementalGroups...)
}

func int64Value(p *int64) *runtimeapi.Int64Value {
	if p == nil {
		return nil
	}
	return &runtimeapi.Int64Value{Value: *p}
}

// containerConfig is the CRI container config of one container instance.
func (m *Manager) containerConfig(ctx context.Context, pod *v1.Pod, c *v1.Container, restartCount int, imageRef string, podIPs []string) (*runtimeapi.ContainerConfig, error) {
	env, err := m.cfg.Env.Env(ctx, pod, c, podIPs)
	if err != nil {
		return nil, err
	}
	mounts, err := m.containerFiles(pod, c, podIPs, env)
	if err != nil {
		return nil, err
	}
	envs := make([]*runtimeapi.KeyValue, 0, len(env))
	for _, e := range env {
		envs = append(envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
	}
	command, args := podenv.CommandAndArgs(c, env)
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(restartCount)},
		Image:       &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: c.Image},
		Command:     command,
		Args:        args,
		WorkingDir:  c.WorkingDir,
		Envs:        envs,
		Mounts:      mounts,
		Labels:      containerLabels(pod, c),
		Annotations: containerAnnotations(pod, c, restartCount),
		LogPath:     filepath.Join(c.Name, strconv.Itoa(restartCount)+".log"),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       m.resources(pod, c),
			SecurityContext: securityContext(pod, c),
		},
	}
	return cfg, nil
}

// containerFiles makes the container's log directory, volumes, /etc/hosts
// and termination-log files and returns its mounts.
func (m *Manager) containerFiles(pod *v1.Pod, c *v1.Container, podIPs []string, env []podenv.EnvVar) ([]*runtimeapi.Mount, error) {
	defer m.fsLock()()
	podDir := m.PodDir(pod.UID)
	logDir := filepath.Join(m.PodLogDir(pod.Namespace, pod.Name, pod.UID), c.Name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("container %s: log directory: %w", c.Name, err)
	}
	mounts, err := m.volumeMounts(pod, c, env)
	if err != nil {
		return nil, err
	}
	if !mountsPath(c, "/etc/hosts") {
		hosts, err := writeHostsFile(podDir, pod, podIPs, m.cfg.ClusterDomain)
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: "/etc/hosts", HostPath: hosts})
	}
	if c.TerminationMessagePath != "" && !mountsPath(c, c.TerminationMessagePath) {
		tl, err := terminationLogFile(podDir, c.Name)
		if err != nil {
			return nil, fmt.Errorf("container %s: termination log: %w", c.Name, err)
		}
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: c.TerminationMessagePath, HostPath: tl})
	}
	return mounts, nil
}

func mountsPath(c *v1.Container, path string) bool {
	for _, vm := range c.VolumeMounts {
		if vm.MountPath == path {
			return true
		}
	}
	return false
}

// resources are the container's Linux resources as the kubelet makes
// them: cpu and memory from its requests and limits (host/internal/qos)
// and the OOM score adjustment of its pod's QoS class.
func (m *Manager) resources(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerResources {
	r := linuxResources(qos.Container(pod, c))
	r.OomScoreAdj = qos.OOMScoreAdjust(pod, c, m.cfg.MemoryCapacity)
	pages := hugePageLimits(pod, c)
	for _, size := range m.cfg.HugePageSizes {
		r.HugepageLimits = append(r.HugepageLimits, &runtimeapi.HugepageLimit{PageSize: size, Limit: pages[size]})
	}
	switch m.cfg.Swap {
	case cgroups.SwapV1:
		r.MemorySwapLimitInBytes = r.MemoryLimitInBytes
	case cgroups.SwapV2:
		r.Unified = map[string]string{"memory.swap.max": "0"}
	}
	return r
}

// hugePageLimits are the container's hugepages-<size> limits by page size
// in the runtime's unit, the pod-level ones where the container sets none.
func hugePageLimits(pod *v1.Pod, c *v1.Container) map[string]uint64 {
	out := map[string]uint64{}
	add := func(l v1.ResourceList) {
		for name, q := range l {
			size, ok := strings.CutPrefix(string(name), v1.ResourceHugePagesPrefix)
			if !ok {
				continue
			}
			if s, err := resource.ParseQuantity(size); err == nil && s.Value() > 0 {
				out[cgroups.HugePageUnit(s.Value())] = uint64(q.Value())
			}
		}
	}
	if pod.Spec.Resources != nil {
		add(pod.Spec.Resources.Limits)
	}
	add(c.Resources.Limits)
	return out
}

// linuxResources is the CRI form of qos.Resources.
func linuxResources(r qos.Resources) *runtimeapi.LinuxContainerResources {
	return &runtimeapi.LinuxContainerResources{CpuShares: r.CPUShares, CpuPeriod: r.CPUPeriod, CpuQuota: r.CPUQuota, MemoryLimitInBytes: r.MemoryLimit}
}

func capsOr(c *runtimeapi.Capability) *runtimeapi.Capability {
	if c == nil {
		return &runtimeapi.Capability{}
	}
	return c
}
