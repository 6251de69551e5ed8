// Package nodememory reads the node's memory as the kubelet's eviction
// manager sees it: the root memory cgroup's working set (usage less the
// inactive page cache, which the kernel reclaims first, as cAdvisor
// computes it) against the machine's memory, so memory.available is the
// capacity less the working set. On cgroup v1 it reads the root memory
// cgroup's memory.usage_in_bytes and memory.stat's total_inactive_file;
// cgroup v2 has no memory.current at its root, so there usage is
// MemTotal less MemFree of /proc/meminfo, and the inactive file pages come
// from meminfo's Inactive(file), as cAdvisor reads the v2 root.
//
// Notifier is the cgroup v1 memory threshold notification the kubelet
// uses with --kernel-memcg-notification: an eventfd registered through
// cgroup.event_control for memory.usage_in_bytes, which the kernel
// signals when usage crosses the threshold.
package nodememory

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Stats is one reading of the node's memory, in bytes.
type Stats struct {
	// Capacity is the machine's memory (MemTotal).
	Capacity uint64
	// Usage is the memory in use, page cache included.
	Usage uint64
	// WorkingSet is usage less inactive file pages.
	WorkingSet uint64
	// Available is Capacity less WorkingSet, never below 0.
	Available uint64
}

// Config says where the files are.
type Config struct {
	// CgroupRoot is the cgroup filesystem's mountpoint; empty means
	// /sys/fs/cgroup.
	CgroupRoot string
	// ProcDir is the proc filesystem; empty means /proc.
	ProcDir string
}

// Reader reads the node's memory. Build it with New.
type Reader struct {
	cfg Config
	v2  bool
}

// New finds the cgroup version: v2 when the root holds
// cgroup.controllers, else v1 with its memory hierarchy under memory/.
func New(cfg Config) (*Reader, error) {
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = "/sys/fs/cgroup"
	}
	if cfg.ProcDir == "" {
		cfg.ProcDir = "/proc"
	}
	r := &Reader{cfg: cfg}
	if _, err := os.Stat(filepath.Join(cfg.CgroupRoot, "cgroup.controllers")); err == nil {
		r.v2 = true
		return r, nil
	}
	if _, err := os.Stat(filepath.Join(r.v1Dir(), "memory.usage_in_bytes")); err != nil {
		return nil, fmt.Errorf("nodememory: neither a cgroup v2 root nor a v1 memory hierarchy under %s: %w", cfg.CgroupRoot, err)
	}
	return r, nil
}

// V2 reports whether the node runs cgroup v2.
func (r *Reader) V2() bool { return r.v2 }

// v1Dir is the root of the cgroup v1 memory hierarchy.
func (r *Reader) v1Dir() string { return filepath.Join(r.cfg.CgroupRoot, "memory") }

// Read reads the node's memory now.
func (r *Reader) Read() (Stats, error) {
	mi, err := Meminfo(filepath.Join(r.cfg.ProcDir, "meminfo"))
	if err != nil {
		return Stats{}, err
	}
	capacity := mi["MemTotal"]
	if capacity == 0 {
		return Stats{}, fmt.Errorf("nodememory: %s/meminfo has no MemTotal", r.cfg.ProcDir)
	}
	var usage, inactive uint64
	if r.v2 {
		usage = capacity - min(mi["MemFree"], capacity)
		inactive = mi["Inactive(file)"]
	} else {
		if usage, err = readUint(filepath.Join(r.v1Dir(), "memory.usage_in_bytes")); err != nil {
			return Stats{}, err
		}
		st, err := statFile(filepath.Join(r.v1Dir(), "memory.stat"))
		if err != nil {
			return Stats{}, err
		}
		inactive = st["total_inactive_file"]
	}
	ws := usage - min(inactive, usage)
	return Stats{Capacity: capacity, Usage: usage, WorkingSet: ws, Available: capacity - min(ws, capacity)}, nil
}

// Meminfo reads the fields of a /proc/meminfo file, in bytes (a "kB"
// value times 1024).
func Meminfo(path string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("nodememory: %w", err)
	}
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("nodememory: %s: %s: %w", path, k, err)
		}
		if len(f) > 1 && f[1] == "kB" {
			n *= 1024
		}
		out[k] = n
	}
	return out, nil
}

// statFile reads a memory.stat file: "name value" lines.
func statFile(path string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("nodememory: %w", err)
	}
	out := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("nodememory: %s: %s: %w", path, f[0], err)
		}
		out[f[0]] = n
	}
	return out, nil
}

// readUint reads a file holding one number.
func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("nodememory: %w", err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("nodememory: %s: %w", path, err)
	}
	return n, nil
}

// ErrNotSupported is returned by NewNotifier on cgroup v2, which has no
// cgroup.event_control (the kubelet's notifier is cgroup v1 only too).
var ErrNotSupported = errors.New("nodememory: memory threshold notification needs cgroup v1 (cgroup.event_control)")
