package wasiruntime

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/tetratelabs/wazero/api"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmlet/wasmlet/host/internal/diskusage"
)

// A running module's stats: its memory is its linear memory, its CPU time
// that of the OS thread its goroutine is locked to while it runs (the
// module's code and the host functions it calls run there and nothing
// else does). A container's writable layer is its scratch root.

// userHZ is the unit of /proc's CPU times.
const userHZ = 100

// usage reads a running instance's CPU time (core-nanoseconds since it
// started) and linear memory size.
type usage struct {
	tid     int
	baseCPU uint64
	mod     api.Module
}

// lockThread pins the calling goroutine to its thread for the module's run
// and returns the thread's ID and its CPU time so far; unlock undoes it.
func lockThread() (tid int, cpu uint64, unlock func()) {
	runtime.LockOSThread()
	tid = unix.Gettid()
	cpu, _ = threadCPU(tid)
	return tid, cpu, runtime.UnlockOSThread
}

// threadCPU is a thread of this process's user and system time in
// nanoseconds (/proc/self/task/<tid>/stat fields 14 and 15).
func threadCPU(tid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/stat", tid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("thread %d: malformed stat", tid)
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3
	if len(f) < 13 {
		return 0, fmt.Errorf("thread %d: stat has %d fields", tid, len(f)+2)
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("thread %d: malformed stat times", tid)
	}
	return (utime + stime) * uint64(time.Second/userHZ), nil
}

// layerPeriod is how long a container's scratch-root usage is reused:
// containerd refreshes its snapshots' usage every 10 s
// (stats_collect_period) and a walk costs a stat per file.
const layerPeriod = 10 * time.Second

// layer is a container's scratch root usage as last measured.
type layer struct {
	at    time.Time
	usage diskusage.Usage
}

// writableLayer is the container's writable layer: its scratch root,
// walked at most once per layerPeriod; nil when it cannot be read.
func (r *Runtime) writableLayer(c *container) *runtimeapi.FilesystemUsage {
	root := r.rootfs(c.ID)
	c.mu.Lock()
	l := c.layer
	c.mu.Unlock()
	if l.at.IsZero() || time.Since(l.at) >= layerPeriod {
		u, err := diskusage.Walk(root)
		if err != nil {
			return nil
		}
		l = layer{at: time.Now(), usage: u}
		c.mu.Lock()
		c.layer = l
		c.mu.Unlock()
	}
	return &runtimeapi.FilesystemUsage{
		Timestamp:  l.at.UnixNano(),
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: root},
		UsedBytes:  &runtimeapi.UInt64Value{Value: l.usage.Bytes},
		InodesUsed: &runtimeapi.UInt64Value{Value: l.usage.Inodes},
	}
}

// stats is the CRI stats of container c: its writable layer (its scratch
// root), and CPU and memory while it runs.
func (r *Runtime) stats(c *container) *runtimeapi.ContainerStats {
	c.mu.Lock()
	u := c.usage
	st := &runtimeapi.ContainerStats{Attributes: &runtimeapi.ContainerAttributes{
		Id: c.ID, Metadata: c.Metadata, Labels: c.Labels, Annotations: c.Annotations,
	}}
	c.mu.Unlock()
	st.WritableLayer = r.writableLayer(c)
	if u == nil {
		return st
	}
	now := time.Now().UnixNano()
	if cpu, err := threadCPU(u.tid); err == nil && cpu >= u.baseCPU {
		st.Cpu = &runtimeapi.CpuUsage{Timestamp: now, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: cpu - u.baseCPU}}
	}
	if mem := u.mod.Memory(); mem != nil {
		size := uint64(mem.Size())
		st.Memory = &runtimeapi.MemoryUsage{Timestamp: now, WorkingSetBytes: &runtimeapi.UInt64Value{Value: size}, UsageBytes: &runtimeapi.UInt64Value{Value: size}}
	}
	return st
}

// ContainerStats implements the CRI call: a running module's CPU time and
// linear memory, a container's scratch root as its writable layer.
func (s *runtimeServer) ContainerStats(_ context.Context, req *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	c, err := s.r.container(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ContainerStatsResponse{Stats: s.r.stats(c)}, nil
}

// ListContainerStats implements the CRI call for the running containers
// that match the filter.
func (s *runtimeServer) ListContainerStats(_ context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	f := req.GetFilter()
	r := s.r
	cs := r.containerList()
	resp := &runtimeapi.ListContainerStatsResponse{}
	for _, c := range cs {
		c.mu.Lock()
		running := c.State == runtimeapi.ContainerState_CONTAINER_RUNNING
		c.mu.Unlock()
		if !running || (f != nil && (!matchID(c.ID, f.Id) || !matchID(c.SandboxID, f.PodSandboxId) || !matchLabels(c.Labels, f.LabelSelector))) {
			continue
		}
		resp.Stats = append(resp.Stats, r.stats(c))
	}
	return resp, nil
}

// sandboxStats is the CRI stats of a sandbox: its running containers'
// stats, and their CPU time and linear memory summed as the pod's (there is
// no accounting of a pod's own beside its containers').
func (r *Runtime) sandboxStats(sb *runtimeapi.PodSandboxAttributes) *runtimeapi.PodSandboxStats {
	out := &runtimeapi.PodSandboxStats{Attributes: sb, Linux: &runtimeapi.LinuxPodSandboxStats{}}
	var cpu, mem uint64
	for _, c := range r.containersOf(sb.Id) {
		c.mu.Lock()
		running := c.State == runtimeapi.ContainerState_CONTAINER_RUNNING
		c.mu.Unlock()
		if !running {
			continue
		}
		st := r.stats(c)
		out.Linux.Containers = append(out.Linux.Containers, st)
		cpu += st.GetCpu().GetUsageCoreNanoSeconds().GetValue()
		mem += st.GetMemory().GetWorkingSetBytes().GetValue()
	}
	now := time.Now().UnixNano()
	out.Linux.Cpu = &runtimeapi.CpuUsage{Timestamp: now, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: cpu}}
	out.Linux.Memory = &runtimeapi.MemoryUsage{Timestamp: now, WorkingSetBytes: &runtimeapi.UInt64Value{Value: mem}, UsageBytes: &runtimeapi.UInt64Value{Value: mem}}
	return out
}

// readySandboxes are the attributes of the ready sandboxes that match
// the ID and labels asked ("" and nil match all), taken under the lock.
func (r *Runtime) readySandboxes(id string, labels map[string]string) []*runtimeapi.PodSandboxAttributes {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*runtimeapi.PodSandboxAttributes
	for _, sb := range r.sandboxes {
		if sb.State != runtimeapi.PodSandboxState_SANDBOX_READY || !matchID(sb.ID, id) || !matchLabels(sb.Labels, labels) {
			continue
		}
		out = append(out, &runtimeapi.PodSandboxAttributes{Id: sb.ID, Metadata: sb.Metadata, Labels: sb.Labels, Annotations: sb.Annotations})
	}
	return out
}

// PodSandboxStats implements the CRI call for a ready sandbox: its running
// containers' stats and their sums.
func (s *runtimeServer) PodSandboxStats(_ context.Context, req *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	id := req.GetPodSandboxId()
	sbs := s.r.readySandboxes(id, nil)
	if id == "" || len(sbs) != 1 || sbs[0].Id != id {
		return nil, status.Errorf(codes.NotFound, "no ready pod sandbox %q", id)
	}
	return &runtimeapi.PodSandboxStatsResponse{Stats: s.r.sandboxStats(sbs[0])}, nil
}

// ListPodSandboxStats implements the CRI call for the ready sandboxes that
// match the filter, as containerd lists only ready ones.
func (s *runtimeServer) ListPodSandboxStats(_ context.Context, req *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	f := req.GetFilter()
	resp := &runtimeapi.ListPodSandboxStatsResponse{}
	for _, sb := range s.r.readySandboxes(f.GetId(), f.GetLabelSelector()) {
		resp.Stats = append(resp.Stats, s.r.sandboxStats(sb))
	}
	return resp, nil
}
