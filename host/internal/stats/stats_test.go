package stats

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmlet/wasmlet/host/internal/container"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// fakeRuntime answers Stats with a fixed view and SandboxPID from a map.
type fakeRuntime struct {
	stats *container.RuntimeStats
	err   error
	pids  map[string]int
}

func (f *fakeRuntime) Stats(context.Context) (*container.RuntimeStats, error) { return f.stats, f.err }
func (f *fakeRuntime) SandboxPID(_ context.Context, id string) (int, error) {
	return f.pids[id], nil
}

const netDevText = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    100       1    0    0    0     0          0         0      100       1    0    0    0     0       0          0
  ens3:   5000      10    1    0    0     0          0         0     7000      20    2    0    0     0       0          0
`

// procDir writes a /proc with the files the provider reads; cpu is the
// busy ticks of the first line.
func procDir(t *testing.T, cpuUser string) string {
	d := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(d, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// busy = user+nice+system+irq+softirq+steal = cpuUser+1+2+3+4+5.
	write("stat", "cpu  "+cpuUser+" 1 2 999 888 3 4 5 0 0\ncpu0 1 1 1 1 1 1 1 1 0 0\n")
	write("meminfo", "MemTotal:       1000 kB\nMemFree:         200 kB\nMemAvailable:    500 kB\nInactive(file):  100 kB\nAnonPages:       300 kB\n")
	write("net/dev", netDevText)
	write("uptime", "100.50 200.00\n")
	write("42/net/dev", strings.Replace(netDevText, "ens3", "eth0", 1))
	return d
}

func u(v uint64) *runtimeapi.UInt64Value { return &runtimeapi.UInt64Value{Value: v} }

func containerStat(id string, cpu, ws uint64) *runtimeapi.ContainerStats {
	return &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{Id: id},
		Cpu:        &runtimeapi.CpuUsage{Timestamp: 7e9, UsageCoreNanoSeconds: u(cpu), UsageNanoCores: u(cpu / 10)},
		Memory:     &runtimeapi.MemoryUsage{Timestamp: 7e9, WorkingSetBytes: u(ws), UsageBytes: u(ws + 1)},
	}
}

func twoPods() *container.RuntimeStats {
	sb := func(id, name string, ready bool) *runtimeapi.PodSandbox {
		st := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
		if ready {
			st = runtimeapi.PodSandboxState_SANDBOX_READY
		}
		return &runtimeapi.PodSandbox{Id: id, State: st, CreatedAt: 5e9, Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "ns", Uid: "uid-" + name}}
	}
	c := func(id, sandbox, name string, running bool) *runtimeapi.Container {
		st := runtimeapi.ContainerState_CONTAINER_EXITED
		if running {
			st = runtimeapi.ContainerState_CONTAINER_RUNNING
		}
		return &runtimeapi.Container{Id: id, PodSandboxId: sandbox, State: st, CreatedAt: 6e9, Metadata: &runtimeapi.ContainerMetadata{Name: name}}
	}
	return &container.RuntimeStats{
		Sandboxes: []*runtimeapi.PodSandbox{sb("s1", "a", true), sb("s2", "b", true), sb("s0", "a", false)},
		Containers: []*runtimeapi.Container{
			c("a1", "s1", "one", true), c("a2", "s1", "two", true), c("a0", "s1", "one", false),
			c("b1", "s2", "only", true), c("bx", "s2", "nostats", true),
		},
		ContainerStats: map[string]*runtimeapi.ContainerStats{
			"a1": containerStat("a1", 1000, 10), "a2": containerStat("a2", 2000, 20), "a0": containerStat("a0", 9, 9),
			"b1": containerStat("b1", 500, 5),
		},
		SandboxStats: map[string]*runtimeapi.PodSandboxStats{
			"s2": {Attributes: &runtimeapi.PodSandboxAttributes{Id: "s2"}, Linux: &runtimeapi.LinuxPodSandboxStats{
				Cpu:    &runtimeapi.CpuUsage{Timestamp: 8e9, UsageCoreNanoSeconds: u(777)},
				Memory: &runtimeapi.MemoryUsage{Timestamp: 8e9, WorkingSetBytes: u(77)},
				Network: &runtimeapi.NetworkUsage{Timestamp: 8e9, DefaultInterface: &runtimeapi.NetworkInterfaceUsage{Name: "eth0", RxBytes: u(1), TxBytes: u(2)},
					Interfaces: []*runtimeapi.NetworkInterfaceUsage{{Name: "eth0", RxBytes: u(1), TxBytes: u(2)}}},
			}},
		},
	}
}

func podByName(s *statsapi.Summary, name string) *statsapi.PodStats {
	for i := range s.Pods {
		if s.Pods[i].PodRef.Name == name {
			return &s.Pods[i]
		}
	}
	return nil
}

func TestSummary_Node(t *testing.T) {
	dir := procDir(t, "100")
	now := time.Unix(1000, 0)
	p := New(Config{NodeName: "n1", Runtime: &fakeRuntime{stats: &container.RuntimeStats{}}, RootDir: t.TempDir(), ProcDir: dir, Now: func() time.Time { return now }})
	s, err := p.Summary(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	n := s.Node
	// busy ticks 100+1+2+3+4+5 = 115, at 10 ms each.
	if n.NodeName != "n1" || *n.CPU.UsageCoreNanoSeconds != 115*10_000_000 || n.CPU.UsageNanoCores != nil {
		t.Errorf("node cpu %+v, want 1.15 s and no rate yet", n.CPU)
	}
	// usage 800 kB, working set 800-100 kB, available 1000-700 kB.
	if *n.Memory.UsageBytes != 800*1024 || *n.Memory.WorkingSetBytes != 700*1024 || *n.Memory.AvailableBytes != 300*1024 || *n.Memory.RSSBytes != 300*1024 {
		t.Errorf("node memory usage %d ws %d available %d rss %d", *n.Memory.UsageBytes, *n.Memory.WorkingSetBytes, *n.Memory.AvailableBytes, *n.Memory.RSSBytes)
	}
	if n.Network == nil || n.Network.Name != "ens3" || *n.Network.RxBytes != 5000 || *n.Network.TxBytes != 7000 || *n.Network.RxErrors != 1 || *n.Network.TxErrors != 2 || len(n.Network.Interfaces) != 1 {
		t.Errorf("node network %+v, want ens3 only (lo left out)", n.Network)
	}
	if n.Fs == nil || *n.Fs.CapacityBytes == 0 || *n.Fs.Inodes == 0 {
		t.Errorf("node fs %+v, want the root dir's filesystem", n.Fs)
	}
	if !n.StartTime.Time.Equal(time.Unix(899, 0)) { // 1000 - 100.5, truncated to the second
		t.Errorf("node start %v, want boot time 899", n.StartTime)
	}

	// A second reading 2 s later with 2 s more busy time: one core.
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte("cpu  300 1 2 999 888 3 4 5 0 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second)
	s, err = p.Summary(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if s.Node.CPU.UsageNanoCores == nil || *s.Node.CPU.UsageNanoCores != 1e9 {
		t.Errorf("node nanocores %v, want 1e9", s.Node.CPU.UsageNanoCores)
	}
	if s.Node.Network != nil || s.Node.Fs != nil {
		t.Errorf("only_cpu_and_memory: network %+v fs %+v, want neither", s.Node.Network, s.Node.Fs)
	}
}

func TestSummary_Pods(t *testing.T) {
	p := New(Config{NodeName: "n1", Runtime: &fakeRuntime{stats: twoPods(), pids: map[string]int{"s1": 42}}, ProcDir: procDir(t, "1")})
	s, err := p.Summary(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Pods) != 2 {
		t.Fatalf("%d pods, want the two ready sandboxes'", len(s.Pods))
	}
	a := podByName(s, "a")
	if a == nil || a.PodRef.UID != "uid-a" || len(a.Containers) != 2 {
		t.Fatalf("pod a %+v, want two running containers (the exited one left out)", a)
	}
	// No sandbox stats: the sum of the containers'.
	if *a.CPU.UsageCoreNanoSeconds != 3000 || *a.CPU.UsageNanoCores != 300 || *a.Memory.WorkingSetBytes != 30 {
		t.Errorf("pod a cpu %d nanocores %d ws %d, want the sums 3000, 300, 30", *a.CPU.UsageCoreNanoSeconds, *a.CPU.UsageNanoCores, *a.Memory.WorkingSetBytes)
	}
	// Its network from its sandbox process's namespace.
	if a.Network == nil || a.Network.Name != "eth0" || *a.Network.RxBytes != 5000 {
		t.Errorf("pod a network %+v, want eth0 from /proc/42/net/dev", a.Network)
	}
	b := podByName(s, "b")
	if b == nil || len(b.Containers) != 1 || b.Containers[0].Name != "only" {
		t.Fatalf("pod b %+v, want only the container with stats", b)
	}
	if *b.CPU.UsageCoreNanoSeconds != 777 || *b.Memory.WorkingSetBytes != 77 || b.Network == nil || *b.Network.TxBytes != 2 {
		t.Errorf("pod b cpu %+v memory %+v network %+v, want the sandbox's stats", b.CPU, b.Memory, b.Network)
	}
	c := b.Containers[0]
	if !c.StartTime.Time.Equal(time.Unix(6, 0)) || *c.CPU.UsageCoreNanoSeconds != 500 || *c.Memory.UsageBytes != 6 {
		t.Errorf("container %+v", c)
	}
}

func TestSummary_RuntimeError(t *testing.T) {
	p := New(Config{NodeName: "n1", Runtime: &fakeRuntime{err: errors.New("runtime down")}, ProcDir: procDir(t, "1")})
	if _, err := p.Summary(context.Background(), false); err == nil || !strings.Contains(err.Error(), "runtime down") {
		t.Errorf("Summary = %v, want the runtime's error", err)
	}
	if _, err := New(Config{Runtime: &fakeRuntime{stats: twoPods()}, ProcDir: t.TempDir()}).Summary(context.Background(), false); err == nil || !strings.Contains(err.Error(), "node CPU") {
		t.Errorf("Summary without /proc/stat = %v, want a node CPU error", err)
	}
}

func get(t *testing.T, h http.Handler, target string) (int, string) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
	b, _ := io.ReadAll(w.Result().Body)
	return w.Code, string(b)
}

func TestHandlers(t *testing.T) {
	p := New(Config{NodeName: "n1", Runtime: &fakeRuntime{stats: twoPods()}, ProcDir: procDir(t, "1")})
	code, body := get(t, p.SummaryHandler(), "/stats/summary?only_cpu_and_memory=true")
	var s statsapi.Summary
	if code != 200 || json.Unmarshal([]byte(body), &s) != nil || s.Node.NodeName != "n1" || len(s.Pods) != 2 || s.Node.Network != nil {
		t.Errorf("summary: %d %s", code, body)
	}
	if code, body := get(t, p.SummaryHandler(), "/stats/summary?only_cpu_and_memory=maybe"); code != 400 || !strings.Contains(body, "only_cpu_and_memory") {
		t.Errorf("bad query: %d %s, want 400 naming the parameter", code, body)
	}
	code, body = get(t, p.ResourceMetricsHandler(), "/metrics/resource")
	for _, want := range []string{
		"node_cpu_usage_seconds_total 0.16 ", // (1+1+2+3+4+5) ticks
		"node_memory_working_set_bytes 716800 ",
		`pod_cpu_usage_seconds_total{namespace="ns",pod="a"} 3e-06 7000`,
		`pod_memory_working_set_bytes{namespace="ns",pod="b"} 77 8000`,
		`container_cpu_usage_seconds_total{container="one",namespace="ns",pod="a"} 1e-06 7000`,
		`container_memory_working_set_bytes{container="two",namespace="ns",pod="a"} 20 7000`,
		`container_start_time_seconds{container="only",namespace="ns",pod="b"} 6`,
		"resource_scrape_error 0",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics/resource has no %q:\n%s", want, body)
		}
	}
	broken := New(Config{Runtime: &fakeRuntime{err: errors.New("down")}, ProcDir: procDir(t, "1")})
	if code, body := get(t, broken.ResourceMetricsHandler(), "/metrics/resource"); code != 200 || !strings.Contains(body, "resource_scrape_error 1") {
		t.Errorf("scrape with the runtime down: %d %s", code, body)
	}
	if code, body := get(t, broken.SummaryHandler(), "/stats/summary"); code != 500 || !strings.Contains(body, "down") {
		t.Errorf("summary with the runtime down: %d %s", code, body)
	}
}

// TestCadvisorMetricsHandler: the containers' metrics under cAdvisor's
// names and labels, the pod's network on container "POD"; valid text
// exposition (no samples) with the runtime down.
func TestCadvisorMetricsHandler(t *testing.T) {
	p := New(Config{NodeName: "n1", Runtime: &fakeRuntime{stats: twoPods(), pids: map[string]int{"s1": 42}}, ProcDir: procDir(t, "1")})
	code, body := get(t, p.CadvisorMetricsHandler(), "/metrics/cadvisor")
	for _, want := range []string{
		`container_cpu_usage_seconds_total{container="one",namespace="ns",pod="a"} 1e-06`,
		`container_memory_working_set_bytes{container="two",namespace="ns",pod="a"} 20`,
		`container_memory_usage_bytes{container="only",namespace="ns",pod="b"} 6`,
		`container_start_time_seconds{container="only",namespace="ns",pod="b"} 6`,
		`container_network_receive_bytes_total{container="POD",namespace="ns",pod="a"} 5000`,
		`container_last_seen{container="one",namespace="ns",pod="a"}`,
	} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics/cadvisor (%d) has no %q:\n%s", code, want, body)
		}
	}
	broken := New(Config{Runtime: &fakeRuntime{err: errors.New("down")}, ProcDir: procDir(t, "1")})
	if code, body := get(t, broken.CadvisorMetricsHandler(), "/metrics/cadvisor"); code != 200 || strings.Contains(body, "container_") {
		t.Errorf("with the runtime down: %d %q, want 200 and no samples", code, body)
	}
}
