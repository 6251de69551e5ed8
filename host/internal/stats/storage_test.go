package stats

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/wasmlet/wasmlet/internal/disktest"
)

// pathVolumes puts each pod volume under dir/<uid>/<name>, hostPath at
// its path.
type pathVolumes string

func (d pathVolumes) Path(pod *v1.Pod, name string) (string, bool, error) {
	for _, v := range pod.Spec.Volumes {
		if v.Name == name && v.HostPath != nil {
			return v.HostPath.Path, false, nil
		}
	}
	return filepath.Join(string(d), string(pod.UID), name), false, nil
}

func TestSummary_PodStorage(t *testing.T) {
	root, logs, vols := t.TempDir(), t.TempDir(), t.TempDir()
	pod := &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}},
		{Name: "tok", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{}}},
		{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
		{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: root}}},
		{Name: "unset", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	}}}
	pod.UID = "uid-a"
	vol := func(name string, more ...string) string {
		return filepath.Join(append([]string{vols, "uid-a", name}, more...)...)
	}
	disktest.WriteFile(t, vol("scratch", "data"), 64<<10)
	disktest.WriteFile(t, vol("cfg", "key"), 4<<10)
	disktest.WriteFile(t, vol("tok", "token"), 4<<10)
	disktest.WriteFile(t, vol("mem", "m"), 4<<10)
	podLogs := filepath.Join(logs, "ns_a_uid-a")
	disktest.WriteFile(t, filepath.Join(podLogs, "one", "0.log"), 16<<10)
	disktest.WriteFile(t, filepath.Join(podLogs, "one", "0.log.20260101-000000.gz"), 4<<10)
	disktest.WriteFile(t, filepath.Join(podLogs, "extra.log"), 4<<10)
	etcHosts := filepath.Join(root, "pods", "uid-a", "etc-hosts")
	disktest.WriteFile(t, etcHosts, 1<<10)

	rs := twoPods()
	// Container one of pod a has a writable layer; two has none.
	rs.ContainerStats["a1"].WritableLayer = &runtimeapi.FilesystemUsage{Timestamp: 7e9, UsedBytes: u(100000), InodesUsed: u(5)}
	now := time.Unix(1000, 0)
	p := New(Config{
		NodeName: "n1", Runtime: &fakeRuntime{stats: rs}, RootDir: root, ProcDir: procDir(t, "1"), PodLogsDir: logs,
		Pod:     func(uid types.UID) (*v1.Pod, bool) { return pod, uid == pod.UID },
		Volumes: pathVolumes(vols), Now: func() time.Time { return now },
	})
	pods, err := p.PodStorage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a := podByName(&statsapi.Summary{Pods: pods}, "a")
	if a == nil || a.Network != nil {
		t.Fatalf("pod a %+v, want it without a network", a)
	}
	got := map[string]statsapi.VolumeStats{}
	for _, v := range a.VolumeStats {
		got[v.Name] = v
	}
	scratch := disktest.Blocks(t, vol("scratch"), vol("scratch", "data"))
	cfg := disktest.Blocks(t, vol("cfg"), vol("cfg", "key"))
	if len(got) != 4 || *got["scratch"].UsedBytes != scratch || *got["scratch"].InodesUsed != 2 || *got["cfg"].UsedBytes != cfg ||
		*got["tok"].UsedBytes != disktest.Blocks(t, vol("tok"), vol("tok", "token")) || got["scratch"].CapacityBytes == nil {
		t.Errorf("volume stats %+v, want scratch %d, cfg %d, tok and mem; not host (no metrics) nor unset (no directory)", got, scratch, cfg)
	}
	one := &a.Containers[0]
	if one.Name != "one" {
		one = &a.Containers[1]
	}
	logsOne := disktest.Blocks(t, filepath.Join(podLogs, "one", "0.log"), filepath.Join(podLogs, "one", "0.log.20260101-000000.gz"))
	if one.Logs == nil || *one.Logs.UsedBytes != logsOne || *one.Logs.InodesUsed != 2 || *one.Rootfs.UsedBytes != 100000 {
		t.Errorf("container one logs %+v rootfs %+v, want %d bytes in 2 files, rootfs 100000", one.Logs, one.Rootfs, logsOne)
	}
	// The kubelet's calcEphemeralStorage: rootfs and logs of containers with
	// a rootfs, the ephemeral volumes (disk emptyDir, configMap), the pod's
	// own log files, etc-hosts. Secrets and memory emptyDirs are tmpfs.
	want := 100000 + logsOne + scratch + cfg + disktest.Blocks(t, filepath.Join(podLogs, "extra.log")) + disktest.Blocks(t, etcHosts)
	wantInodes := uint64(5 + 2 + 2 + 2 + 1 + 1)
	if e := a.EphemeralStorage; e == nil || *e.UsedBytes != want || *e.InodesUsed != wantInodes || e.CapacityBytes == nil {
		t.Errorf("ephemeral storage %+v, want %d bytes, %d inodes, the root filesystem's capacity", e, want, wantInodes)
	}

	// Within the period the walk is not redone; past it, it is.
	disktest.WriteFile(t, vol("scratch", "more"), 64<<10)
	now = now.Add(30 * time.Second)
	pods, _ = p.PodStorage(context.Background())
	if v := volume(podByName(&statsapi.Summary{Pods: pods}, "a"), "scratch"); *v.UsedBytes != scratch {
		t.Errorf("scratch within the period %d, want the cached %d", *v.UsedBytes, scratch)
	}
	now = now.Add(31 * time.Second)
	pods, _ = p.PodStorage(context.Background())
	if v, more := volume(podByName(&statsapi.Summary{Pods: pods}, "a"), "scratch"), scratch+disktest.Blocks(t, vol("scratch", "more")); *v.UsedBytes != more {
		t.Errorf("scratch after the period %d, want %d", *v.UsedBytes, more)
	}
	// A pod gone from the runtime is dropped from the cache.
	rs.Sandboxes = rs.Sandboxes[1:]
	if _, err := p.PodStorage(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.volumes["uid-a"]; ok {
		t.Error("pod a's volume stats still cached after its sandbox went")
	}
	// only_cpu_and_memory reads no storage.
	s, err := p.Summary(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range s.Pods {
		if ps.EphemeralStorage != nil || ps.VolumeStats != nil {
			t.Errorf("only_cpu_and_memory: pod %s has storage stats", ps.PodRef.Name)
		}
	}
}

func volume(ps *statsapi.PodStats, name string) *statsapi.VolumeStats {
	for i := range ps.VolumeStats {
		if ps.VolumeStats[i].Name == name {
			return &ps.VolumeStats[i]
		}
	}
	return &statsapi.VolumeStats{}
}
