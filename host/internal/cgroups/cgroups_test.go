package cgroups

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmlet/wasmlet/host/internal/qos"
)

func testPod(uid string, req, lim v1.ResourceList) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1ObjectMeta(uid),
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}}},
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// A fake cgroup v1 mount: one directory per controller.
func v1Mount(t *testing.T) string {
	root := t.TempDir()
	for _, c := range []string{"cpu", "cpuacct", "memory", "pids", "blkio"} {
		if err := os.Mkdir(filepath.Join(root, c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestV1(t *testing.T) {
	mnt := v1Mount(t)
	m, err := New(Config{MountPoint: mnt})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"cpu", "cpuacct", "memory", "pids"} {
		for _, d := range []string{"kubepods", "kubepods/burstable", "kubepods/besteffort"} {
			if _, err := os.Stat(filepath.Join(mnt, c, d)); err != nil {
				t.Errorf("%s/%s not made: %v", c, d, err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(mnt, "blkio", "kubepods")); err == nil {
		t.Error("blkio/kubepods made; runc makes the other controllers")
	}
	if got := read(t, filepath.Join(mnt, "cpu/kubepods/besteffort/cpu.shares")); got != "2" {
		t.Errorf("besteffort cpu.shares = %s, want 2", got)
	}

	q := resource.MustParse
	lim := v1.ResourceList{v1.ResourceCPU: q("500m"), v1.ResourceMemory: q("64Mi")}
	g := testPod("g1", lim, lim)
	b := testPod("b1", v1.ResourceList{v1.ResourceCPU: q("100m")}, nil)
	be := testPod("e1", nil, nil)
	for pod, want := range map[*v1.Pod]string{g: "/kubepods/podg1", b: "/kubepods/burstable/podb1", be: "/kubepods/besteffort/pode1"} {
		if got := m.Parent(pod); got != want {
			t.Errorf("Parent(%s) = %s, want %s", pod.UID, got, want)
		}
		if err := m.Ensure(pod); err != nil {
			t.Fatal(err)
		}
	}
	checkFiles(t, mnt, map[string]string{
		"cpu/kubepods/podg1/cpu.shares":                         "512",
		"cpu/kubepods/podg1/cpu.cfs_period_us":                  "100000",
		"cpu/kubepods/podg1/cpu.cfs_quota_us":                   "50000",
		"memory/kubepods/podg1/memory.limit_in_bytes":           "67108864",
		"cpu/kubepods/burstable/podb1/cpu.shares":               "102",
		"cpu/kubepods/burstable/podb1/cpu.cfs_quota_us":         "-1",
		"memory/kubepods/burstable/podb1/memory.limit_in_bytes": "-1",
		"cpu/kubepods/besteffort/pode1/cpu.shares":              "2",
	})
	if _, err := os.Stat(filepath.Join(mnt, "pids/kubepods/burstable/podb1")); err != nil {
		t.Errorf("pids cgroup of the pod not made: %v", err)
	}

	pods := m.Pods()
	slices.Sort(pods)
	if want := []types.UID{"b1", "e1", "g1"}; !slices.Equal(pods, want) {
		t.Errorf("Pods() = %v, want %v", pods, want)
	}
	// The fake's cgroup files make the directories non-empty, as a
	// cgroup with a container still in it: Remove reports it and keeps it.
	if err := m.Remove("b1"); err == nil {
		t.Error("Remove of a non-empty cgroup reported no error")
	}
	for _, c := range []string{"cpu", "cpuacct", "memory", "pids"} {
		os.RemoveAll(filepath.Join(mnt, c, "kubepods/burstable/podb1"))
		os.Mkdir(filepath.Join(mnt, c, "kubepods/burstable/podb1"), 0o755)
	}
	if err := m.Remove("b1"); err != nil {
		t.Errorf("Remove: %v", err)
	}
	if err := m.Remove("never-there"); err != nil {
		t.Errorf("Remove of a missing cgroup: %v", err)
	}
	pods = m.Pods()
	slices.Sort(pods)
	if want := []types.UID{"e1", "g1"}; !slices.Equal(pods, want) {
		t.Errorf("Pods() after Remove = %v, want %v", pods, want)
	}
}

func TestV2(t *testing.T) {
	mnt := t.TempDir()
	os.WriteFile(filepath.Join(mnt, "cgroup.controllers"), []byte("cpuset cpu io memory pids\n"), 0o644)
	// A real v2 mount fills cgroup.controllers in each new directory; the
	// fake gets it from a parent's subtree_control after the fact.
	m := &Manager{cfg: Config{MountPoint: mnt, CgroupRoot: "/", Driver: DriverCgroupfs}, v2: true}
	fill := func(dir string) {
		os.WriteFile(filepath.Join(mnt, dir, "cgroup.controllers"), []byte("cpu memory pids"), 0o644)
	}
	if err := os.Mkdir(filepath.Join(mnt, "kubepods"), 0o755); err != nil {
		t.Fatal(err)
	}
	fill("kubepods")
	for _, d := range []string{"burstable", "besteffort"} {
		os.Mkdir(filepath.Join(mnt, "kubepods", d), 0o755)
		fill("kubepods/" + d)
	}
	if _, err := New(Config{MountPoint: mnt}); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(mnt, "cgroup.subtree_control")); got != "+cpu +memory +pids" {
		t.Errorf("root subtree_control = %q", got)
	}
	q := resource.MustParse
	lim := v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("1Gi")}
	g := testPod("g2", lim, lim)
	if err := m.Ensure(g); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, mnt, map[string]string{
		"kubepods/podg2/cpu.weight":      "39",
		"kubepods/podg2/cpu.max":         "100000 100000",
		"kubepods/podg2/memory.max":      "1073741824",
		"kubepods/besteffort/cpu.weight": "1",
		"kubepods/besteffort/memory.max": "max",
	})
}

func TestSystemd(t *testing.T) {
	m, err := New(Config{MountPoint: v1Mount(t), Driver: DriverSystemd})
	if err != nil {
		t.Fatal(err)
	}
	p := testPod("1234-ab", v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Mi")}, nil)
	if got, want := m.Parent(p), "kubepods-burstable-pod1234_ab.slice"; got != want {
		t.Errorf("Parent = %s, want %s", got, want)
	}
	if err := m.Ensure(p); err != nil {
		t.Errorf("Ensure with systemd: %v", err)
	}
	if _, err := New(Config{MountPoint: t.TempDir(), Driver: "nope"}); err == nil {
		t.Error("unknown driver accepted")
	}
	if _, err := New(Config{MountPoint: t.TempDir()}); err == nil {
		t.Error("a directory without cgroups accepted")
	}
}

func metav1ObjectMeta(uid string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: "p-" + uid, Namespace: "default", UID: types.UID(uid)}
}

// checkFiles compares cgroup files under mnt with their wanted content.
func checkFiles(t *testing.T, mnt string, want map[string]string) {
	t.Helper()
	for file, w := range want {
		if got := read(t, filepath.Join(mnt, file)); got != w {
			t.Errorf("%s = %s, want %s", file, got, w)
		}
	}
}

func TestDetectSwapAndHugePages(t *testing.T) {
	v1 := v1Mount(t)
	if s := DetectSwap(v1); s != SwapUncontrolled {
		t.Errorf("v1 without memsw: %v", s)
	}
	os.WriteFile(filepath.Join(v1, "memory", "memory.memsw.limit_in_bytes"), []byte("-1"), 0o644)
	if s := DetectSwap(v1); s != SwapV1 {
		t.Errorf("v1 with memsw: %v", s)
	}
	v2 := t.TempDir()
	os.WriteFile(filepath.Join(v2, "cgroup.controllers"), []byte("memory"), 0o644)
	if s := DetectSwap(v2); s != SwapUncontrolled {
		t.Errorf("v2 without swap files: %v", s)
	}
	os.Mkdir(filepath.Join(v2, "kubepods"), 0o755)
	os.WriteFile(filepath.Join(v2, "kubepods", "memory.swap.max"), []byte("max"), 0o644)
	if s := DetectSwap(v2); s != SwapV2 {
		t.Errorf("v2 with memory.swap.max: %v", s)
	}
	sys := t.TempDir()
	for _, d := range []string{"hugepages-2048kB", "hugepages-1048576kB", "hugepages-x"} {
		os.MkdirAll(filepath.Join(sys, "kernel", "mm", "hugepages", d), 0o755)
	}
	got := HugePageSizes(sys)
	slices.Sort(got)
	if want := []string{"1GB", "2MB"}; !slices.Equal(got, want) {
		t.Errorf("HugePageSizes = %v, want %v", got, want)
	}
	if u := HugePageUnit(64 << 10); u != "64KB" {
		t.Errorf("HugePageUnit(64 KiB) = %s", u)
	}
}

// Resize writes one resource of a pod cgroup, on v1 and v2, and leaves
// the other as it was; MemoryUsage reads the cgroup's usage.
func TestManager_Resize(t *testing.T) {
	q := resource.MustParse
	for _, v2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "v1", true: "v2"}[v2], func(t *testing.T) {
			mnt := v1Mount(t)
			if v2 {
				mnt = t.TempDir()
			}
			m := &Manager{cfg: Config{MountPoint: mnt, CgroupRoot: "/", Driver: DriverCgroupfs}, v2: v2}
			lim := v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("1Gi")}
			p := testPod("r1", lim, lim)
			for _, d := range []string{"kubepods/podr1", "cpu/kubepods/podr1", "memory/kubepods/podr1"} {
				os.MkdirAll(filepath.Join(mnt, d), 0o755)
			}
			if err := m.write(m.Parent(p), qos.ForPodCgroup(p)); err != nil {
				t.Fatal(err)
			}
			bigger := v1.ResourceList{v1.ResourceCPU: q("2"), v1.ResourceMemory: q("2Gi")}
			resized := testPod("r1", bigger, bigger)
			if err := m.Resize(resized, v1.ResourceMemory); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"memory/kubepods/podr1/memory.limit_in_bytes": "2147483648", "cpu/kubepods/podr1/cpu.cfs_quota_us": "100000"}
			usage := "memory/kubepods/podr1/memory.usage_in_bytes"
			if v2 {
				want = map[string]string{"kubepods/podr1/memory.max": "2147483648", "kubepods/podr1/cpu.max": "100000 100000"}
				usage = "kubepods/podr1/memory.current"
			}
			checkFiles(t, mnt, want)
			if err := m.Resize(resized, v1.ResourceCPU); err != nil {
				t.Fatal(err)
			}
			if v2 {
				checkFiles(t, mnt, map[string]string{"kubepods/podr1/cpu.max": "200000 100000"})
			} else {
				checkFiles(t, mnt, map[string]string{"cpu/kubepods/podr1/cpu.cfs_quota_us": "200000"})
			}
			os.WriteFile(filepath.Join(mnt, usage), []byte("12345\n"), 0o644)
			if n, err := m.MemoryUsage(resized); err != nil || n != 12345 {
				t.Errorf("memory usage %d %v, want 12345", n, err)
			}
		})
	}
}
