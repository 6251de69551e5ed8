//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

// victimImage is the unused image TestImageGC imports for the collection
// to remove.
const victimImage = "wasmlet.local/gc-victim:1.0"

// TestImageGC, on the suite's containerd: an agent whose image GC must run
// (high threshold 1% of the image filesystem, low 0%) removes an image no
// container uses, seen gone through CRI, and keeps the images its pod's
// containers use and the sandbox image.
func TestImageGC(t *testing.T) {
	if flags.Runtime != "containerd" {
		t.Skipf("image GC is tested on containerd, not %s", flags.Runtime)
	}
	if *ctrdBaseFlag == "" || *busyboxFlag == "" {
		t.Skip("needs -containerd-base (its socket, for ctr import) and -busybox")
	}
	harness.ImportRandomImage(t, filepath.Join(*ctrdBaseFlag, "c.sock"), victimImage, 4096)
	before := images(t)
	if !slices.Contains(before, victimImage) {
		t.Fatalf("%s not in the runtime after the import: %v", victimImage, before)
	}

	a := newAgent(t, "imagegc", flags.Endpoint)
	// The pod's containers use testbox and busybox; the minimum age keeps
	// every image for the 30 s its containers take to be made.
	a.Write(t, "keep.yaml", newPod("keep", v1.RestartPolicyAlways,
		box("main", "log", "2s", "alive"),
		v1.Container{Name: "shell", Image: *busyboxFlag, ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"/bin/sh", "-c", "exec sleep 3600"}}))
	a.Start(t, "--node-name", nodeName, "--container-runtime-endpoint", flags.Endpoint,
		"--image-gc-high-threshold", "1", "--image-gc-low-threshold", "0",
		"--minimum-image-gc-age", "30s", "--image-gc-period", "2s")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log tail:\n%s", a.LogTail(60))
		}
		a.Stop(t)
		cleanRuntime(t)
	})
	a.waitRunning(t, "keep", 30*time.Second)

	harness.Eventually(t, 120*time.Second, victimImage+" removed by image GC", func() (bool, string) {
		now := images(t)
		return !slices.Contains(now, victimImage), fmt.Sprintf("images %v", now)
	})
	after := images(t)
	for _, keep := range []string{flags.Image, *busyboxFlag} {
		if !slices.Contains(after, keep) {
			t.Errorf("%s removed though a container uses it (images %v)", keep, after)
		}
	}
	// Every image but the victim is still there: the sandbox image too.
	for _, img := range before {
		if img != victimImage && !slices.Contains(after, img) {
			t.Errorf("%s removed (images before %v, after %v)", img, before, after)
		}
	}
	if v, err := a.Metric("wasmlet_image_garbage_collected_total", `reason="space"`); err != nil || v < 1 {
		t.Errorf("wasmlet_image_garbage_collected_total{reason=space} = %v, %v; want at least 1", v, err)
	}
	if !a.LogContains("image filesystem over the high threshold") || !a.LogContains("removing image") {
		t.Errorf("the agent's log does not tell of the collection:\n%s", a.LogTail(40))
	}
}

// images are the tags of the runtime's images, through CRI.
func images(t *testing.T) []string {
	t.Helper()
	ctx, cancel := withTimeout(30 * time.Second)
	defer cancel()
	imgs, err := rt.Image.ListImages(ctx, &runtimeapi.ImageFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	for _, i := range imgs {
		tags = append(tags, i.RepoTags...)
	}
	slices.Sort(tags)
	return slices.Compact(tags)
}
