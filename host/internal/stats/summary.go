// Package stats builds the node's stats summary (the kubelet's
// /stats/summary, k8s.io/kubelet's stats/v1alpha1 Summary) and its
// resource metrics (/metrics/resource), which metrics-server and
// `kubectl top` read: the node's CPU, memory, network and filesystem from
// /proc and statfs, the pods' and containers' CPU and memory from the CRI
// runtime's stats, a pod's network from its sandbox's network namespace,
// and its local storage as the kubelet accounts it: containers' rootfs
// (the CRI writable layer) and logs, volumes (a du of each volume's
// directory, cached per pod) and their sum, the pod's ephemeral storage.
package stats

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/wasmlet/wasmlet/host/internal/container"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

// Runtime is the CRI runtime's side of the summary (runtime.Manager).
type Runtime interface {
	// Stats lists the managed sandboxes and containers with their stats.
	Stats(ctx context.Context) (*container.RuntimeStats, error)
	// SandboxPID is the process of a sandbox, 0 when unknown.
	SandboxPID(ctx context.Context, sandboxID string) (int, error)
}

// Config configures a Provider.
type Config struct {
	// NodeName names the node in the summary.
	NodeName string
	// Runtime gives the pods' stats.
	Runtime Runtime
	// RootDir is a directory on the filesystem reported as the node's
	// (the agent's root directory, as the kubelet reports its root's).
	RootDir string
	// ProcDir is the proc filesystem; empty means /proc.
	ProcDir string
	// PodLogsDir is the root of the containers' logs,
	// <PodLogsDir>/<ns>_<pod>_<uid>/<container>/; empty reports no logs.
	PodLogsDir string
	// Pod returns a pod the node runs, by UID: its spec names its volumes.
	// With Volumes, pods get VolumeStats; nil reports none.
	Pod func(types.UID) (*v1.Pod, bool)
	// Volumes tells where the pods' volumes live.
	Volumes Volumes
	// VolumeStatsPeriod is how long a pod's volume stats (a walk of each
	// volume's directory) are reused; 0 means 1 min, the kubelet's
	// --volume-stats-agg-period.
	VolumeStatsPeriod time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Provider builds summaries; it keeps the node's last CPU reading for the
// node's CPU rate. It is safe for concurrent use.
type Provider struct {
	cfg Config

	mu      sync.Mutex
	nodeCPU cpuSample
	volumes map[types.UID]*volumeCache
}

// New returns a Provider for cfg.
func New(cfg Config) *Provider {
	if cfg.ProcDir == "" {
		cfg.ProcDir = "/proc"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.VolumeStatsPeriod <= 0 {
		cfg.VolumeStatsPeriod = time.Minute
	}
	return &Provider{cfg: cfg, volumes: map[types.UID]*volumeCache{}}
}

// Summary is the node's stats summary. With cpuAndMemoryOnly (the
// kubelet's only_cpu_and_memory query) it leaves out filesystems and
// networks. A pod whose network cannot be read is reported without it.
func (p *Provider) Summary(ctx context.Context, cpuAndMemoryOnly bool) (*statsapi.Summary, error) {
	node, err := p.node(cpuAndMemoryOnly)
	if err != nil {
		return nil, err
	}
	rs, err := p.cfg.Runtime.Stats(ctx)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	pods := p.pods(ctx, rs, parts{network: !cpuAndMemoryOnly, storage: !cpuAndMemoryOnly})
	return &statsapi.Summary{Node: *node, Pods: pods}, nil
}

// PodStorage is the pods' part of the summary without networks: each
// running pod's containers (CPU, memory, rootfs, logs), volumes and
// ephemeral storage — what the eviction manager reads every period,
// without the node's readings or a sandbox status call per pod.
func (p *Provider) PodStorage(ctx context.Context) ([]statsapi.PodStats, error) {
	rs, err := p.cfg.Runtime.Stats(ctx)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	return p.pods(ctx, rs, parts{storage: true}), nil
}

// parts says which optional parts of the pods' stats to read.
type parts struct {
	network bool // the pod's network (a sandbox status call per pod)
	storage bool // logs, volumes, ephemeral storage
}

func (p *Provider) node(cpuAndMemoryOnly bool) (*statsapi.NodeStats, error) {
	now := p.cfg.Now()
	t := metav1.NewTime(now)
	ticks, err := cpuTicks(p.cfg.ProcDir)
	if err != nil {
		return nil, fmt.Errorf("stats: node CPU: %w", err)
	}
	cur := cpuSample{at: now, usage: ticks * (uint64(time.Second) / userHZ)}
	p.mu.Lock()
	nanoCores := rate(p.nodeCPU, cur)
	p.nodeCPU = cur
	p.mu.Unlock()
	mem, err := nodeMemory(p.cfg.ProcDir, t)
	if err != nil {
		return nil, fmt.Errorf("stats: node memory: %w", err)
	}
	n := &statsapi.NodeStats{
		NodeName:  p.cfg.NodeName,
		StartTime: metav1.NewTime(bootTime(p.cfg.ProcDir, now)),
		CPU:       &statsapi.CPUStats{Time: t, UsageCoreNanoSeconds: ptr.To(cur.usage), UsageNanoCores: nanoCores},
		Memory:    mem,
	}
	if cpuAndMemoryOnly {
		return n, nil
	}
	if n.Network, err = network(filepath.Join(p.cfg.ProcDir, "net", "dev"), t); err != nil {
		return nil, fmt.Errorf("stats: node network: %w", err)
	}
	if p.cfg.RootDir != "" {
		if n.Fs, err = fsStats(p.cfg.RootDir, t); err != nil {
			return nil, fmt.Errorf("stats: node filesystem: %w", err)
		}
	}
	return n, nil
}

// bootTime is when the node booted (now less /proc/uptime); now when
// unreadable.
func bootTime(procDir string, now time.Time) time.Time {
	b, err := readFirstField(filepath.Join(procDir, "uptime"))
	if err != nil {
		return now
	}
	up, err := strconv.ParseFloat(b, 64)
	if err != nil {
		return now
	}
	return now.Add(-time.Duration(up * float64(time.Second))).Truncate(time.Second)
}

// pods is the stats of each ready sandbox's pod: its running containers
// with CRI stats, the pod's CPU and memory from the sandbox's stats or else
// the sum of its containers', its network from the sandbox's.
func (p *Provider) pods(ctx context.Context, rs *container.RuntimeStats, want parts) []statsapi.PodStats {
	byPod := map[string][]*runtimeapi.Container{}
	for _, c := range rs.Containers {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			byPod[c.PodSandboxId] = append(byPod[c.PodSandboxId], c)
		}
	}
	var out []statsapi.PodStats
	live := map[types.UID]bool{}
	var root *statsapi.FsStats // the root filesystem, for the pods' ephemeral storage
	if want.storage && p.cfg.RootDir != "" {
		root, _ = fsStats(p.cfg.RootDir, metav1.NewTime(p.cfg.Now()))
	}
	for _, sb := range rs.Sandboxes {
		if sb.State != runtimeapi.PodSandboxState_SANDBOX_READY || sb.Metadata == nil {
			continue
		}
		ps := statsapi.PodStats{
			PodRef:    statsapi.PodReference{Name: sb.Metadata.Name, Namespace: sb.Metadata.Namespace, UID: sb.Metadata.Uid},
			StartTime: metav1.NewTime(time.Unix(0, sb.CreatedAt)),
		}
		for _, c := range byPod[sb.Id] {
			st, ok := rs.ContainerStats[c.Id]
			if !ok || c.Metadata == nil {
				continue
			}
			ps.Containers = append(ps.Containers, containerStats(c, st))
		}
		if ss, ok := rs.SandboxStats[sb.Id]; ok && ss.GetLinux() != nil {
			ps.CPU, ps.Memory = cpuStats(ss.Linux.Cpu), memoryStats(ss.Linux.Memory)
			if want.network {
				ps.Network = networkStats(ss.Linux.Network)
			}
		}
		if ps.CPU == nil || ps.Memory == nil {
			ps.CPU, ps.Memory = sumContainers(ps.Containers)
		}
		if ps.Network == nil && want.network {
			ps.Network = p.sandboxNetwork(ctx, sb.Id)
		}
		if want.storage {
			live[types.UID(sb.Metadata.Uid)] = true
			p.podStorage(&ps, root)
		}
		out = append(out, ps)
	}
	if want.storage {
		p.forgetVolumes(live)
	}
	return out
}

// sandboxNetwork reads the network of a sandbox's namespace through its
// process; nil when the runtime does not tell the process or it is gone.
func (p *Provider) sandboxNetwork(ctx context.Context, id string) *statsapi.NetworkStats {
	pid, err := p.cfg.Runtime.SandboxPID(ctx, id)
	if err != nil || pid <= 0 {
		return nil
	}
	n, err := network(filepath.Join(p.cfg.ProcDir, strconv.Itoa(pid), "net", "dev"), metav1.NewTime(p.cfg.Now()))
	if err != nil {
		return nil
	}
	return n
}

func containerStats(c *runtimeapi.Container, st *runtimeapi.ContainerStats) statsapi.ContainerStats {
	cs := statsapi.ContainerStats{
		Name:      c.Metadata.Name,
		StartTime: metav1.NewTime(time.Unix(0, c.CreatedAt)),
		CPU:       cpuStats(st.Cpu),
		Memory:    memoryStats(st.Memory),
	}
	if w := st.WritableLayer; w != nil {
		cs.Rootfs = &statsapi.FsStats{Time: metav1.NewTime(time.Unix(0, w.Timestamp)), UsedBytes: value(w.UsedBytes), InodesUsed: value(w.InodesUsed)}
	}
	return cs
}

func value(v *runtimeapi.UInt64Value) *uint64 {
	if v == nil {
		return nil
	}
	return ptr.To(v.Value)
}

func cpuStats(c *runtimeapi.CpuUsage) *statsapi.CPUStats {
	if c == nil {
		return nil
	}
	return &statsapi.CPUStats{
		Time:                 metav1.NewTime(time.Unix(0, c.Timestamp)),
		UsageCoreNanoSeconds: value(c.UsageCoreNanoSeconds),
		UsageNanoCores:       value(c.UsageNanoCores),
	}
}

func memoryStats(m *runtimeapi.MemoryUsage) *statsapi.MemoryStats {
	if m == nil {
		return nil
	}
	return &statsapi.MemoryStats{
		Time:            metav1.NewTime(time.Unix(0, m.Timestamp)),
		AvailableBytes:  value(m.AvailableBytes),
		UsageBytes:      value(m.UsageBytes),
		WorkingSetBytes: value(m.WorkingSetBytes),
		RSSBytes:        value(m.RssBytes),
		PageFaults:      value(m.PageFaults),
		MajorPageFaults: value(m.MajorPageFaults),
	}
}

func networkStats(n *runtimeapi.NetworkUsage) *statsapi.NetworkStats {
	if n == nil || n.DefaultInterface == nil {
		return nil
	}
	conv := func(i *runtimeapi.NetworkInterfaceUsage) statsapi.InterfaceStats {
		return statsapi.InterfaceStats{Name: i.Name, RxBytes: value(i.RxBytes), RxErrors: value(i.RxErrors), TxBytes: value(i.TxBytes), TxErrors: value(i.TxErrors)}
	}
	out := &statsapi.NetworkStats{Time: metav1.NewTime(time.Unix(0, n.Timestamp)), InterfaceStats: conv(n.DefaultInterface)}
	for _, i := range n.Interfaces {
		out.Interfaces = append(out.Interfaces, conv(i))
	}
	return out
}

// sumContainers is a pod's CPU and memory as the sum of its containers'
// (the kubelet's fallback when the runtime has no pod-level stats); nil
// when no container has them.
func sumContainers(cs []statsapi.ContainerStats) (*statsapi.CPUStats, *statsapi.MemoryStats) {
	var cpu *statsapi.CPUStats
	var mem *statsapi.MemoryStats
	add := func(dst **uint64, v *uint64) {
		if v == nil {
			return
		}
		if *dst == nil {
			*dst = ptr.To(uint64(0))
		}
		**dst += *v
	}
	for _, c := range cs {
		if c.CPU != nil {
			if cpu == nil {
				cpu = &statsapi.CPUStats{}
			}
			if c.CPU.Time.After(cpu.Time.Time) {
				cpu.Time = c.CPU.Time
			}
			add(&cpu.UsageCoreNanoSeconds, c.CPU.UsageCoreNanoSeconds)
			add(&cpu.UsageNanoCores, c.CPU.UsageNanoCores)
		}
		if c.Memory != nil {
			if mem == nil {
				mem = &statsapi.MemoryStats{}
			}
			if c.Memory.Time.After(mem.Time.Time) {
				mem.Time = c.Memory.Time
			}
			add(&mem.UsageBytes, c.Memory.UsageBytes)
			add(&mem.WorkingSetBytes, c.Memory.WorkingSetBytes)
			add(&mem.RSSBytes, c.Memory.RSSBytes)
			add(&mem.PageFaults, c.Memory.PageFaults)
			add(&mem.MajorPageFaults, c.Memory.MajorPageFaults)
		}
	}
	return cpu, mem
}
