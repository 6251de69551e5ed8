package eviction

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/wasmlet/wasmlet/host/internal/nodememory"
)

// Observation is one signal's reading.
type Observation struct {
	// Available is the amount left (bytes, inodes or process IDs).
	Available int64
	// Capacity is the total a percentage threshold is taken of.
	Capacity int64
}

// Observations are the signals read in one pass.
type Observations struct {
	// Signals are the readings by signal; a signal not read is absent.
	Signals map[Signal]Observation
	// DedicatedImageFs is true when the images live on a filesystem other
	// than the node's root directory.
	DedicatedImageFs bool
}

// Signals reads the node-pressure signals.
type Signals interface {
	// Observe reads every signal it can; an error means none was read.
	Observe(ctx context.Context) (Observations, error)
}

// FsInfo is a filesystem's sizes, as statfs gives them.
type FsInfo struct {
	// Device identifies the filesystem (st_dev of the path).
	Device uint64
	// Capacity and Available are bytes; Available is what unprivileged
	// users may still write, as df shows it.
	Capacity, Available int64
	// Inodes and InodesFree count inodes.
	Inodes, InodesFree int64
}

// ObserverConfig configures an Observer.
type ObserverConfig struct {
	// Memory reads the node's memory; nil leaves memory.available out.
	Memory func() (nodememory.Stats, error)
	// NodeFs is a directory on the node's filesystem (the root
	// directory): nodefs.available and nodefs.inodesFree.
	NodeFs string
	// ImageFs returns the image filesystem's mountpoint (the runtime's
	// ImageFsInfo); nil, or an error, leaves the imagefs signals out.
	ImageFs func(ctx context.Context) (string, error)
	// ProcDir is the proc filesystem; empty means /proc.
	ProcDir string
	// Statfs reads a filesystem; nil is statfs(2) and stat(2).
	Statfs func(path string) (FsInfo, error)
	// Processes counts the node's processes; nil is sysinfo(2).
	Processes func() (int64, error)
}

// Observer reads the signals from the node: memory from the root memory
// cgroup, the filesystems by statfs, process IDs as the kubelet counts
// them (the lower of kernel.pid_max and kernel.threads-max, less the
// processes sysinfo counts). Build it with NewObserver.
type Observer struct{ cfg ObserverConfig }

// NewObserver fills in cfg's defaults.
func NewObserver(cfg ObserverConfig) *Observer {
	if cfg.ProcDir == "" {
		cfg.ProcDir = "/proc"
	}
	if cfg.Statfs == nil {
		cfg.Statfs = statfs
	}
	if cfg.Processes == nil {
		cfg.Processes = processes
	}
	return &Observer{cfg: cfg}
}

// Observe implements Signals. A signal that cannot be read is left out
// and the error returned only when none could be.
func (o *Observer) Observe(ctx context.Context) (Observations, error) {
	out := Observations{Signals: map[Signal]Observation{}}
	var errs []error
	if o.cfg.Memory != nil {
		if m, err := o.cfg.Memory(); err != nil {
			errs = append(errs, err)
		} else {
			out.Signals[SignalMemoryAvailable] = Observation{Available: int64(m.Available), Capacity: int64(m.Capacity)}
		}
	}
	var nodeDev uint64
	if o.cfg.NodeFs != "" {
		if fs, err := o.cfg.Statfs(o.cfg.NodeFs); err != nil {
			errs = append(errs, fmt.Errorf("nodefs: %w", err))
		} else {
			nodeDev = fs.Device
			out.Signals[SignalNodeFsAvailable] = Observation{fs.Available, fs.Capacity}
			out.Signals[SignalNodeFsInodesFree] = Observation{fs.InodesFree, fs.Inodes}
		}
	}
	if o.cfg.ImageFs != nil {
		mp, err := o.cfg.ImageFs(ctx)
		if err == nil {
			var fs FsInfo
			if fs, err = o.cfg.Statfs(mp); err == nil {
				out.DedicatedImageFs = o.cfg.NodeFs != "" && fs.Device != nodeDev
				out.Signals[SignalImageFsAvailable] = Observation{fs.Available, fs.Capacity}
				out.Signals[SignalImageFsInodesFree] = Observation{fs.InodesFree, fs.Inodes}
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("imagefs: %w", err))
		}
	}
	if max, err := maxPIDs(o.cfg.ProcDir); err != nil {
		errs = append(errs, err)
	} else if n, err := o.cfg.Processes(); err != nil {
		errs = append(errs, err)
	} else {
		out.Signals[SignalPIDAvailable] = Observation{Available: max - n, Capacity: max}
	}
	if len(out.Signals) == 0 && len(errs) > 0 {
		return out, errors.Join(errs...)
	}
	return out, nil
}

// maxPIDs is the lower of kernel.pid_max and kernel.threads-max.
func maxPIDs(procDir string) (int64, error) {
	var out int64
	for _, f := range []string{"pid_max", "threads-max"} {
		b, err := os.ReadFile(filepath.Join(procDir, "sys", "kernel", f))
		if err != nil {
			return 0, fmt.Errorf("pid.available: %w", err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("pid.available: kernel.%s: %w", f, err)
		}
		if out == 0 || n < out {
			out = n
		}
	}
	return out, nil
}

// processes is the number of processes (threads included) sysinfo counts.
func processes() (int64, error) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0, fmt.Errorf("pid.available: sysinfo: %w", err)
	}
	return int64(si.Procs), nil
}

// statfs reads path's filesystem.
func statfs(path string) (FsInfo, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return FsInfo{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	var s unix.Stat_t
	if err := unix.Stat(path, &s); err != nil {
		return FsInfo{}, fmt.Errorf("stat %s: %w", path, err)
	}
	bs := int64(st.Bsize)
	return FsInfo{
		Device: uint64(s.Dev), Capacity: int64(st.Blocks) * bs, Available: int64(st.Bavail) * bs,
		Inodes: int64(st.Files), InodesFree: int64(st.Ffree),
	}, nil
}
