//go:build e2e_apiserver

package e2eapi

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/cri"
	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

// diskPressureImage is the image TestDiskPressure imports and no pod uses,
// for the reclaim to remove.
const diskPressureImage = "wasmlet.local/disk-victim:1.0"

// TestDiskPressure: disk pressure made on purpose, on a filesystem of the
// test's own. A 384 MiB tmpfs holds the agent's root directory and a
// private containerd's root and state, so the node's filesystem and the
// image filesystem are one, and small. The agent's hard threshold is
// nodefs.available 160 MiB under what is available at the start, with a
// 10 s transition period and image GC off (high threshold 100 %; images
// are still listed at the start, and a second is their minimum age), so
// that only the eviction manager's reclaim removes images. A pod writes 48 MiB into its
// writable layer and exits (a dead container holding disk); an image of
// 16 MiB no pod uses is imported; then a pod writes 200 MiB into an
// emptyDir. The node reports DiskPressure with the kubelet's reason; the
// dead container and the unused image are gone from the runtime before
// the writer is seen evicted, and the agent's log removes the image
// before it evicts; the writer is evicted with the kubelet's message, an
// Evicted event and a DisruptionTarget condition; once its emptyDir is
// gone and the transition period has passed DiskPressure is False again.
func TestDiskPressure(t *testing.T) {
	if flags.Runtime != "containerd" {
		t.Skip("containerd only: the pressured filesystem holds a private containerd's root (its images and writable layers); the embedded runtime keeps its images in its own root outside it")
	}
	dir := filepath.Join(flags.Base, "dp")
	mountTmpfs(t, dir, "384m")
	sock, ep := privateContainerd(t, filepath.Join(dir, "c"), "pause", "testbox")
	harness.ImportRandomImage(t, sock, diskPressureImage, 16<<20)
	if imgs := runtimeImages(t, ep); !slices.Contains(imgs, diskPressureImage) {
		t.Fatalf("%s not in the runtime after the import: %v", diskPressureImage, imgs)
	}

	available := fsAvailable(t, dir)
	threshold := available - 160<<20
	a := newAgentOn(t, filepath.Join(dir, "agent"), ep)
	// The agent's log stays off the pressured filesystem.
	a.LogFile = filepath.Join(flags.Base, "diskpressure-agent.log")
	a.start(t, "--eviction-hard", "nodefs.available<"+strconv.FormatInt(threshold, 10),
		"--eviction-pressure-transition-period", "10s",
		"--image-gc-high-threshold", "100", "--minimum-image-gc-age", "1s")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log tail:\n%s", a.LogTail(80))
		}
		a.Stop(t)
	})
	t.Logf("nodefs.available at start %d MiB, threshold %d MiB", available>>20, threshold>>20)
	harness.Eventually(t, 60*time.Second, "node DiskPressure False", func() (bool, string) {
		c, err := nodeConditionOf(v1.NodeDiskPressure)
		if err != nil {
			return false, err.Error()
		}
		return c.Status == v1.ConditionFalse, fmt.Sprintf("%+v", c)
	})

	done := newPod("disk-done", "fill", "/junk", "48")
	done.Spec.RestartPolicy = v1.RestartPolicyNever
	createPod(t, done)
	t.Cleanup(func() { deletePod(t, done.Name) })
	got := waitPod(t, "default", done.Name, 120*time.Second, "Succeeded", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
	if len(got.Status.ContainerStatuses) != 1 {
		t.Fatalf("pod %s: container statuses %+v", done.Name, got.Status.ContainerStatuses)
	}
	_, deadID, _ := strings.Cut(got.Status.ContainerStatuses[0].ContainerID, "://")
	if !slices.Contains(runtimeContainers(t, ep), deadID) {
		t.Fatalf("the dead container %s of pod %s is not in the runtime", deadID, done.Name)
	}

	hog := newPod("disk-hog", "fill", "/scratch/big", "200", ";", "sleep", "inf")
	hog.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	hog.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	hog.Spec.TerminationGracePeriodSeconds = ptr.To(int64(3))
	createPod(t, hog)
	t.Cleanup(func() { deletePod(t, hog.Name) })

	harness.Eventually(t, 120*time.Second, "node DiskPressure True", func() (bool, string) {
		c, err := nodeConditionOf(v1.NodeDiskPressure)
		if err != nil {
			return false, err.Error()
		}
		return c.Status == v1.ConditionTrue && c.Reason == "KubeletHasDiskPressure" && c.Message == "wasmlet has disk pressure",
			fmt.Sprintf("%+v", c)
	})
	evicted := waitPod(t, "default", hog.Name, 120*time.Second, "Failed/Evicted", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	// Reclaim comes before eviction: when the API server first shows the
	// pod evicted, the dead container and the unused image are gone.
	if imgs := runtimeImages(t, ep); slices.Contains(imgs, diskPressureImage) {
		t.Errorf("the pod was evicted while the unused image %s was still in the runtime: %v", diskPressureImage, imgs)
	}
	if slices.Contains(runtimeContainers(t, ep), deadID) {
		t.Errorf("the pod was evicted while the dead container %s of pod %s was still in the runtime", deadID, done.Name)
	}
	// The finished pod's status outlives its container.
	if p := waitPod(t, "default", done.Name, 10*time.Second, "Succeeded", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded }); len(p.Status.ContainerStatuses) != 1 ||
		p.Status.ContainerStatuses[0].State.Terminated == nil || p.Status.ContainerStatuses[0].State.Terminated.ExitCode != 0 {
		t.Errorf("pod %s after its dead container was removed: %s, want its container terminated with exit code 0", done.Name, harness.PodSummary(p))
	}
	if imgs := runtimeImages(t, ep); !slices.Contains(imgs, flags.Image) {
		t.Errorf("the image %s the pods use was removed: %v", flags.Image, imgs)
	}
	log, err := os.ReadFile(a.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	removed, evictedAt := strings.Index(string(log), "removing image"), strings.Index(string(log), "event: pod evicted")
	if removed < 0 || evictedAt < 0 || removed > evictedAt {
		t.Errorf("the agent's log: \"removing image\" at %d, \"event: pod evicted\" at %d; want the image removed first", removed, evictedAt)
	}

	checkEvicted(t, evicted, "ephemeral-storage")
	if m := a.metric(t, "wasmlet_evictions_total", `eviction_signal="nodefs.available"`); m != 1 {
		t.Errorf("wasmlet_evictions_total{eviction_signal=\"nodefs.available\"} = %v, want 1", m)
	}

	harness.Eventually(t, 120*time.Second, "node DiskPressure False after the transition period", func() (bool, string) {
		c, err := nodeConditionOf(v1.NodeDiskPressure)
		if err != nil {
			return false, err.Error()
		}
		return c.Status == v1.ConditionFalse && c.Reason == "KubeletHasNoDiskPressure",
			fmt.Sprintf("%+v; nodefs.available %d MiB", c, fsAvailable(t, dir)>>20)
	})
}

// mountTmpfs mounts a tmpfs of size at dir, unmounted (lazily) when the
// test ends, after the cleanups registered later.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Fatalf("mount tmpfs at %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}

// privateContainerd starts a containerd with its root, state and socket
// under base (hack/containerd/up.sh) and imports the suite's image
// tarballs named (build/e2e/images/NAME.tar); hack/containerd/down.sh
// tears it down when the test ends. It returns the socket and the CRI
// endpoint.
func privateContainerd(t *testing.T, base string, images ...string) (sock, ep string) {
	t.Helper()
	repo := filepath.Dir(flags.Hack)
	criTool := filepath.Join(repo, "build", "e2e", "bin", "cri")
	t.Cleanup(func() {
		out, err := exec.Command(filepath.Join(flags.Hack, "containerd", "down.sh"), base, criTool).CombinedOutput()
		if err != nil {
			t.Errorf("containerd down.sh %s: %v\n%s", base, err, out)
		}
	})
	out, err := exec.Command(filepath.Join(flags.Hack, "containerd", "up.sh"), base, "wasmlet.local/pause:1.0").Output()
	if err != nil {
		t.Fatalf("containerd up.sh %s: %v", base, err)
	}
	sock, ep = filepath.Join(base, "c.sock"), strings.TrimSpace(string(out))
	for _, img := range images {
		file := filepath.Join(repo, "build", "e2e", "images", img+".tar")
		if out, err := exec.Command("ctr", "--address", sock, "-n", "k8s.io", "images", "import", file).CombinedOutput(); err != nil {
			t.Fatalf("ctr images import %s: %v\n%s", file, err, out)
		}
	}
	return sock, ep
}

// fsAvailable is the bytes of dir's filesystem unprivileged users may
// still write, as the agent's nodefs.available reads them.
func fsAvailable(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// withCRI calls f with a CRI client of the runtime at ep.
func withCRI(t *testing.T, ep string, f func(context.Context, *cri.Client) error) {
	t.Helper()
	ctx, cancel := ctxT(30 * time.Second)
	defer cancel()
	c, err := cri.Connect(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := f(ctx, c); err != nil {
		t.Fatal(err)
	}
}

// runtimeImages are the tags of the images in the runtime at ep.
func runtimeImages(t *testing.T, ep string) []string {
	t.Helper()
	var tags []string
	withCRI(t, ep, func(ctx context.Context, c *cri.Client) error {
		imgs, err := c.Image.ListImages(ctx, &runtimeapi.ImageFilter{})
		for _, i := range imgs {
			tags = append(tags, i.RepoTags...)
		}
		return err
	})
	return tags
}

// runtimeContainers are the IDs of the containers, in every state, in
// the runtime at ep.
func runtimeContainers(t *testing.T, ep string) []string {
	t.Helper()
	var ids []string
	withCRI(t, ep, func(ctx context.Context, c *cri.Client) error {
		cs, err := c.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{})
		for _, x := range cs {
			ids = append(ids, x.Id)
		}
		return err
	})
	return ids
}
