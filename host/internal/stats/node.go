package stats

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/wasmlet/wasmlet/host/internal/nodememory"
)

// userHZ is the unit of /proc/stat's CPU times (USER_HZ, 100 on Linux
// everywhere the ABI is stable).
const userHZ = 100

// cpuTicks is the busy time in /proc/stat's first line ("cpu ..."): user,
// nice, system, irq, softirq and steal, in USER_HZ ticks (idle and iowait
// are not use; guest time is already in user).
func cpuTicks(procDir string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(procDir, "stat"))
	if err != nil {
		return 0, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("%s/stat: first line %q is not the cpu total", procDir, line)
	}
	var sum uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system irq softirq steal
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s/stat: field %d: %w", procDir, i, err)
		}
		sum += v
	}
	return sum, nil
}

// nodeMemory is the node's memory as the kubelet reports its root cgroup:
// usage is what is not free, the working set leaves out inactive page
// cache (which the kernel reclaims first), available is the rest.
func nodeMemory(procDir string, now metav1.Time) (*statsapi.MemoryStats, error) {
	m, err := nodememory.Meminfo(filepath.Join(procDir, "meminfo"))
	if err != nil {
		return nil, err
	}
	total, free := m["MemTotal"], m["MemFree"]
	if total == 0 {
		return nil, fmt.Errorf("%s/meminfo: no MemTotal", procDir)
	}
	usage := total - free
	ws := usage
	if inactive := m["Inactive(file)"]; inactive < ws {
		ws -= inactive
	}
	return &statsapi.MemoryStats{
		Time:            now,
		AvailableBytes:  ptr.To(total - ws),
		UsageBytes:      ptr.To(usage),
		WorkingSetBytes: ptr.To(ws),
		RSSBytes:        ptr.To(m["AnonPages"]),
	}, nil
}

// netDev reads /proc/<...>/net/dev: each interface but loopback, in file
// order.
func netDev(path string) ([]statsapi.InterfaceStats, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []statsapi.InterfaceStats
	for i, line := range strings.Split(string(b), "\n") {
		if i < 2 { // two header lines
			continue
		}
		name, rest, ok := strings.Cut(line, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "lo" {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 16 {
			return nil, fmt.Errorf("%s: interface %s: %d fields, want 16", path, name, len(f))
		}
		n := func(i int) *uint64 {
			v, _ := strconv.ParseUint(f[i], 10, 64)
			return ptr.To(v)
		}
		out = append(out, statsapi.InterfaceStats{
			Name: name, RxBytes: n(0), RxErrors: n(2), TxBytes: n(8), TxErrors: n(10),
		})
	}
	return out, nil
}

// network is the stats of the interfaces in a net/dev file; the first
// carries the summary's default interface (eth0 when there is one, as the
// kubelet names a pod's).
func network(path string, now metav1.Time) (*statsapi.NetworkStats, error) {
	ifs, err := netDev(path)
	if err != nil || len(ifs) == 0 {
		return nil, err
	}
	def := ifs[0]
	for _, i := range ifs {
		if i.Name == "eth0" {
			def = i
		}
	}
	return &statsapi.NetworkStats{Time: now, InterfaceStats: def, Interfaces: ifs}, nil
}

// fsStats is the capacity and use of the filesystem holding path.
func fsStats(path string, now metav1.Time) (*statsapi.FsStats, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return nil, fmt.Errorf("statfs %s: %w", path, err)
	}
	bs := uint64(st.Bsize)
	return &statsapi.FsStats{
		Time:           now,
		AvailableBytes: ptr.To(st.Bavail * bs),
		CapacityBytes:  ptr.To(st.Blocks * bs),
		UsedBytes:      ptr.To((st.Blocks - st.Bfree) * bs),
		InodesFree:     ptr.To(st.Ffree),
		Inodes:         ptr.To(st.Files),
		InodesUsed:     ptr.To(st.Files - st.Ffree),
	}, nil
}

// cpuSample is one reading of a cumulative CPU counter, for the rate
// (UsageNanoCores) between two readings.
type cpuSample struct {
	at    time.Time
	usage uint64 // core-nanoseconds
}

// rate is the nanocores used between prev and cur; nil without a
// previous reading or when the counter went back.
func rate(prev, cur cpuSample) *uint64 {
	d := cur.at.Sub(prev.at)
	if prev.at.IsZero() || d <= 0 || cur.usage < prev.usage {
		return nil
	}
	return ptr.To(uint64(float64(cur.usage-prev.usage) / d.Seconds()))
}

// readFirstField is the first whitespace-separated field of a file.
func readFirstField(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "", fmt.Errorf("%s: empty", path)
	}
	return f[0], nil
}
