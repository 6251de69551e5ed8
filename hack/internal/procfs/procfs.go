// Package procfs reads what the benchmarks measure of a process and of the
// machine from /proc: a process's CPU time and resident memory, the load
// average.
package procfs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ClockTicks is USER_HZ, the unit of the CPU times in /proc/PID/stat: 100
// on every Linux architecture Go supports.
const ClockTicks = 100

// Usage is a process's CPU time and resident memory at one moment.
type Usage struct {
	// CPU is user plus system time, in seconds.
	CPU float64
	// ChildrenCPU is the user plus system time of its reaped children.
	ChildrenCPU float64
	// RSS is the resident set, in bytes; Anon the anonymous part of it
	// (RssAnon: what is the process's own, not pages of files such as its
	// binary, which processes of one program share).
	RSS, Anon int64
}

// Read is the usage of process pid.
func Read(pid int) (Usage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Usage{}, err
	}
	u, err := ParseStat(string(stat))
	if err != nil {
		return Usage{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Usage{}, err
	}
	if u.RSS, err = StatusBytes(string(status), "VmRSS"); err != nil {
		return Usage{}, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	if u.Anon, err = StatusBytes(string(status), "RssAnon"); err != nil {
		return Usage{}, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	return u, nil
}

// ParseStat reads the CPU times of a /proc/PID/stat line (its RSS is left
// zero: status has it in bytes). The command name in parentheses may hold
// spaces and parentheses itself; the fields after its last ')' are counted.
func ParseStat(s string) (Usage, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return Usage{}, fmt.Errorf("no command name in %q", s)
	}
	f := strings.Fields(s[i+1:])
	// After the name: state(0) … utime(11) stime(12) cutime(13) cstime(14).
	if len(f) < 15 {
		return Usage{}, fmt.Errorf("%d fields after the command name, want at least 15", len(f))
	}
	var t [4]float64
	for k := range t {
		v, err := strconv.ParseFloat(f[11+k], 64)
		if err != nil {
			return Usage{}, fmt.Errorf("field %d: %w", 14+k, err)
		}
		t[k] = v / ClockTicks
	}
	return Usage{CPU: t[0] + t[1], ChildrenCPU: t[2] + t[3]}, nil
}

// StatusBytes is the field name (VmRSS, RssAnon, …) of a /proc/PID/status,
// in bytes.
func StatusBytes(status, name string) (int64, error) {
	for _, l := range strings.Split(status, "\n") {
		v, ok := strings.CutPrefix(l, name+":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("%s %q: want N kB", name, strings.TrimSpace(v))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("no %s line", name)
}

// LoadAverage is the 1-minute load average, or -1 when /proc/loadavg
// cannot be read.
func LoadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// MemAvailable is MemAvailable of /proc/meminfo, in bytes: what the
// machine can still give processes without swapping.
func MemAvailable() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	v, err := StatusBytes(string(b), "MemAvailable")
	if err != nil {
		return 0, fmt.Errorf("/proc/meminfo: %w", err)
	}
	return v, nil
}
