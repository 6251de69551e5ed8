package eviction

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// statsOf gives a pod's stats; false when the pod has none.
type statsOf func(pod *v1.Pod) (*statsapi.PodStats, bool)

// cmpFunc orders two pods for eviction: negative when a goes first.
type cmpFunc func(a, b *v1.Pod) int

// sortBy sorts pods by the first cmpFunc that tells them apart, stably.
func sortBy(pods []*v1.Pod, cmps ...cmpFunc) {
	slices.SortStableFunc(pods, func(a, b *v1.Pod) int {
		for _, c := range cmps {
			if r := c(a, b); r != 0 {
				return r
			}
		}
		return 0
	})
}

// trueFirst orders true before false.
func trueFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// byPriority puts the lower priority first.
func byPriority(a, b *v1.Pod) int {
	pa, pb := corev1helpers.PodPriority(a), corev1helpers.PodPriority(b)
	switch {
	case pa < pb:
		return -1
	case pa > pb:
		return 1
	}
	return 0
}

// byUsage builds the two comparisons of a resource: usage above the
// requests first, and the larger usage less requests first. A pod with no
// stats goes before one with.
func byUsage(stats statsOf, usage func(*v1.Pod, *statsapi.PodStats) int64, request v1.ResourceName) (exceeds, larger cmpFunc) {
	// read is the pod's usage less its requests.
	read := func(p *v1.Pod) (above int64, ok bool) {
		ps, ok := stats(p)
		if !ok {
			return 0, false
		}
		req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})[request]
		return usage(p, ps) - req.Value(), true
	}
	exceeds = func(a, b *v1.Pod) int {
		oa, okA := read(a)
		ob, okB := read(b)
		if !okA || !okB {
			return trueFirst(!okA, !okB)
		}
		return trueFirst(oa > 0, ob > 0)
	}
	larger = func(a, b *v1.Pod) int {
		ua, okA := read(a)
		ub, okB := read(b)
		if !okA || !okB {
			return trueFirst(!okA, !okB)
		}
		switch {
		case ua > ub:
			return -1
		case ua < ub:
			return 1
		}
		return 0
	}
	return exceeds, larger
}

// memoryUsage is the pod's working set.
func memoryUsage(_ *v1.Pod, ps *statsapi.PodStats) int64 {
	if ps.Memory == nil || ps.Memory.WorkingSetBytes == nil {
		return 0
	}
	return int64(*ps.Memory.WorkingSetBytes)
}

// rankMemory is the kubelet's order under memory pressure: pods using
// more than their requests, then the lower priority, then the larger
// usage above requests.
func rankMemory(pods []*v1.Pod, stats statsOf) {
	exceeds, larger := byUsage(stats, memoryUsage, v1.ResourceMemory)
	sortBy(pods, exceeds, byPriority, larger)
}

// rankPIDs is the kubelet's order under PID pressure: the lower priority,
// then the more processes.
func rankPIDs(pods []*v1.Pod, stats statsOf) {
	count := func(p *v1.Pod) int64 {
		if ps, ok := stats(p); ok && ps.ProcessStats != nil && ps.ProcessStats.ProcessCount != nil {
			return int64(*ps.ProcessStats.ProcessCount)
		}
		return 0
	}
	sortBy(pods, byPriority, func(a, b *v1.Pod) int {
		ca, cb := count(a), count(b)
		switch {
		case ca > cb:
			return -1
		case ca < cb:
			return 1
		}
		return 0
	})
}

// fsParts says which of a pod's uses of disk count against a filesystem.
type fsParts struct {
	rootfs, logs, volumes bool
}

// diskParts is what counts for a disk signal, the kubelet's choice:
// without a dedicated image filesystem everything is on the one disk;
// with one, nodefs counts logs and local volumes and imagefs the
// containers' writable layers.
func diskParts(s Signal, dedicatedImageFs bool) fsParts {
	if !dedicatedImageFs {
		return fsParts{rootfs: true, logs: true, volumes: true}
	}
	if s == SignalImageFsAvailable || s == SignalImageFsInodesFree {
		return fsParts{rootfs: true}
	}
	return fsParts{logs: true, volumes: true}
}

// diskUsage is a pod's use of bytes (or inodes) on the parts.
func diskUsage(pod *v1.Pod, ps *statsapi.PodStats, parts fsParts, inodes bool) int64 {
	read := func(fs *statsapi.FsStats) int64 {
		switch {
		case fs == nil:
			return 0
		case inodes && fs.InodesUsed != nil:
			return int64(*fs.InodesUsed)
		case !inodes && fs.UsedBytes != nil:
			return int64(*fs.UsedBytes)
		}
		return 0
	}
	var n int64
	for _, c := range ps.Containers {
		if parts.rootfs {
			n += read(c.Rootfs)
		}
		if parts.logs {
			n += read(c.Logs)
		}
	}
	if parts.volumes {
		local := map[string]bool{}
		for _, v := range pod.Spec.Volumes {
			if v.EmptyDir != nil || v.ConfigMap != nil || v.GitRepo != nil || v.HostPath != nil {
				local[v.Name] = v.HostPath == nil
			}
		}
		for i := range ps.VolumeStats {
			if local[ps.VolumeStats[i].Name] {
				n += read(&ps.VolumeStats[i].FsStats)
			}
		}
	}
	return n
}

// rankDisk is the kubelet's order under disk pressure for signal s: pods
// using more than their ephemeral-storage requests, then the lower
// priority, then the larger usage above requests (inodes have no
// requests: the usage itself).
func rankDisk(s Signal, dedicatedImageFs bool) func([]*v1.Pod, statsOf) {
	parts, inodes := diskParts(s, dedicatedImageFs), signalInfo[s].resource == resourceInodes
	request := v1.ResourceEphemeralStorage
	if inodes {
		request = resourceInodes
	}
	return func(pods []*v1.Pod, stats statsOf) {
		exceeds, larger := byUsage(stats, func(p *v1.Pod, ps *statsapi.PodStats) int64 { return diskUsage(p, ps, parts, inodes) }, request)
		sortBy(pods, exceeds, byPriority, larger)
	}
}
