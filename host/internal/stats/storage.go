package stats

import (
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/wasmlet/wasmlet/host/internal/diskusage"
)

// Volumes tells which host directory backs a pod's volume
// (volumes.Manager).
type Volumes interface {
	// Path is the host path of the pod's volume name.
	Path(pod *v1.Pod, name string) (path string, readOnly bool, err error)
}

// filesUsage is the usage of the regular files directly in dir (not its
// subdirectories), as the kubelet counts a pod's or a container's log
// directory; ok is false when dir cannot be read.
func filesUsage(dir string) (diskusage.Usage, bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return diskusage.Usage{}, false
	}
	var u diskusage.Usage
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if f, err := diskusage.Walk(filepath.Join(dir, e.Name())); err == nil {
			u.Bytes += f.Bytes
			u.Inodes += f.Inodes
		}
	}
	return u, true
}

// fsUsed is an FsStats of usage u at t.
func fsUsed(u diskusage.Usage, t metav1.Time) *statsapi.FsStats {
	return &statsapi.FsStats{Time: t, UsedBytes: ptr.To(u.Bytes), InodesUsed: ptr.To(u.Inodes)}
}

// volumeCache is one pod's volume stats as last walked.
type volumeCache struct {
	at    time.Time
	stats []statsapi.VolumeStats
	// ephemeral names the volumes that count towards the pod's ephemeral
	// storage.
	ephemeral map[string]bool
}

// isEphemeral reports whether a volume lives on the node's root
// filesystem and counts towards the pod's ephemeral storage, as the
// kubelet's IsLocalEphemeralVolume: a disk-backed emptyDir, a configMap
// and a gitRepo (secrets, projected and memory emptyDirs are tmpfs;
// downwardAPI is not counted by the kubelet either).
func isEphemeral(v *v1.Volume) bool {
	return (v.EmptyDir != nil && v.EmptyDir.Medium == v1.StorageMediumDefault) || v.ConfigMap != nil || v.GitRepo != nil
}

// measured reports whether the kubelet measures a volume of this type with
// du: the node's own volume types (hostPath has no metrics).
func measured(v *v1.Volume) bool {
	return v.EmptyDir != nil || v.ConfigMap != nil || v.Secret != nil || v.DownwardAPI != nil || v.Projected != nil
}

// podVolumes is the pod's volume stats, walked at most once per
// VolumeStatsPeriod (the kubelet's volume stats aggregation period): a
// summary between two walks reports the last one.
func (p *Provider) podVolumes(uid types.UID) *volumeCache {
	if p.cfg.Pod == nil || p.cfg.Volumes == nil {
		return nil
	}
	pod, ok := p.cfg.Pod(uid)
	if !ok {
		return nil
	}
	now := p.cfg.Now()
	p.mu.Lock()
	c, ok := p.volumes[uid]
	p.mu.Unlock()
	if ok && now.Sub(c.at) < p.cfg.VolumeStatsPeriod {
		return c
	}
	c = &volumeCache{at: now, ephemeral: map[string]bool{}}
	t := metav1.NewTime(now)
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if !measured(v) {
			continue
		}
		dir, _, err := p.cfg.Volumes.Path(pod, v.Name)
		if err != nil {
			continue
		}
		u, err := diskusage.Walk(dir)
		if err != nil {
			continue // not set up (yet), or gone
		}
		used := fsUsed(u, t)
		if vfs, err := fsStats(dir, t); err == nil {
			withCapacity(used, vfs)
		}
		c.stats = append(c.stats, statsapi.VolumeStats{Name: v.Name, FsStats: *used})
		c.ephemeral[v.Name] = isEphemeral(v)
	}
	p.mu.Lock()
	p.volumes[uid] = c
	p.mu.Unlock()
	return c
}

// forgetVolumes drops the cached volume stats of pods not in live.
func (p *Provider) forgetVolumes(live map[types.UID]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for uid := range p.volumes {
		if !live[uid] {
			delete(p.volumes, uid)
		}
	}
}

// podStorage fills in a pod's storage stats as the kubelet's
// makePodStorageStats: its volumes' stats, each container's log usage
// (the files of <PodLogsDir>/<ns>_<name>_<uid>/<container>), and the pod's
// EphemeralStorage, the kubelet's calcEphemeralStorage: each container's
// rootfs (and its logs, for a container whose runtime reports a rootfs),
// the ephemeral volumes, the files of the pod's log directory itself and
// its etc-hosts file. root is the root filesystem's statfs (nil when not
// read), read once for all the pods of a summary.
func (p *Provider) podStorage(ps *statsapi.PodStats, root *statsapi.FsStats) {
	t := metav1.NewTime(p.cfg.Now())
	logDir := ""
	if p.cfg.PodLogsDir != "" {
		logDir = filepath.Join(p.cfg.PodLogsDir, ps.PodRef.Namespace+"_"+ps.PodRef.Name+"_"+ps.PodRef.UID)
		for i := range ps.Containers {
			if u, ok := filesUsage(filepath.Join(logDir, ps.Containers[i].Name)); ok {
				ps.Containers[i].Logs = fsUsed(u, t)
			}
		}
	}
	eph := &statsapi.FsStats{Time: t}
	withCapacity(eph, root)
	add := func(s *statsapi.FsStats) {
		if s == nil {
			return
		}
		eph.UsedBytes = addUsage(eph.UsedBytes, s.UsedBytes)
		eph.InodesUsed = addUsage(eph.InodesUsed, s.InodesUsed)
		if s.Time.After(eph.Time.Time) {
			eph.Time = s.Time
		}
	}
	for i := range ps.Containers {
		if c := &ps.Containers[i]; c.Rootfs != nil {
			add(c.Rootfs)
			add(c.Logs)
		}
	}
	if vc := p.podVolumes(types.UID(ps.PodRef.UID)); vc != nil {
		ps.VolumeStats = vc.stats
		for i := range vc.stats {
			if vc.ephemeral[vc.stats[i].Name] {
				add(&vc.stats[i].FsStats)
			}
		}
	}
	if logDir != "" {
		if u, ok := filesUsage(logDir); ok {
			add(fsUsed(u, t))
		}
	}
	if p.cfg.RootDir != "" {
		if u, err := diskusage.Walk(filepath.Join(p.cfg.RootDir, "pods", ps.PodRef.UID, "etc-hosts")); err == nil {
			add(fsUsed(u, t))
		}
	}
	ps.EphemeralStorage = eph
}

// withCapacity copies the capacity and free space of filesystem fs (nil:
// nothing) into s, whose usage is its own.
func withCapacity(s, fs *statsapi.FsStats) {
	if fs != nil {
		s.AvailableBytes, s.CapacityBytes, s.InodesFree, s.Inodes = fs.AvailableBytes, fs.CapacityBytes, fs.InodesFree, fs.Inodes
	}
}

// addUsage is a + b, either possibly nil (nil + nil is nil).
func addUsage(a, b *uint64) *uint64 {
	switch {
	case b == nil:
		return a
	case a == nil:
		return ptr.To(*b)
	}
	return ptr.To(*a + *b)
}
