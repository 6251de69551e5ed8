package harness

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// MemoryAvailable is memory.available as the kubelet and wasmlet read it:
// MemTotal less the root memory cgroup's working set (cgroup v1:
// memory.usage_in_bytes less total_inactive_file; cgroup v2, where the
// root has no usage file: MemTotal − MemFree − Inactive(file)).
func MemoryAvailable() (int64, error) {
	mi, err := meminfo()
	if err != nil {
		return 0, err
	}
	total := mi["MemTotal"]
	usage, inactive := total-mi["MemFree"], mi["Inactive(file)"]
	if b, err := os.ReadFile("/sys/fs/cgroup/memory/memory.usage_in_bytes"); err == nil {
		if usage, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil {
			return 0, fmt.Errorf("memory.usage_in_bytes: %w", err)
		}
		st, err := os.ReadFile("/sys/fs/cgroup/memory/memory.stat")
		if err != nil {
			return 0, err
		}
		for _, line := range bytes.Split(st, []byte("\n")) {
			if v, ok := bytes.CutPrefix(line, []byte("total_inactive_file ")); ok {
				inactive, _ = strconv.ParseInt(string(v), 10, 64)
			}
		}
	}
	return total - max(usage-inactive, 0), nil
}

// meminfo is /proc/meminfo in bytes by key.
func meminfo() (map[string]int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	mi := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		if fs := strings.Fields(v); len(fs) > 0 {
			n, _ := strconv.ParseInt(fs[0], 10, 64)
			mi[k] = n * 1024
		}
	}
	return mi, sc.Err()
}
