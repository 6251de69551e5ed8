package wasiruntime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestImageService(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	spec := func(ref string) *runtimeapi.ImageSpec { return &runtimeapi.ImageSpec{Image: ref} }

	// Unknown: a nil image, not an error, as in containerd.
	st, err := h.is.ImageStatus(ctx, spec("wasmlet.local/nothere:1"), false)
	if err != nil || st.Image != nil {
		t.Errorf("ImageStatus(unknown) = %v, %v; want nil image, no error", st, err)
	}
	// A name not imported is pulled from its registry: none answers here.
	if _, err := h.is.PullImage(ctx, spec("127.0.0.1:1/nothere:1"), nil, nil); err == nil ||
		!strings.Contains(err.Error(), "pull image 127.0.0.1:1/nothere:1") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("PullImage(name in no registry) = %v, want the registry's failure naming the image", err)
	}
	text := filepath.Join(t.TempDir(), "text.wasm")
	os.WriteFile(text, []byte("not wasm"), 0o644)
	if _, err := h.is.PullImage(ctx, spec("file://"+text), nil, nil); err == nil || !strings.Contains(err.Error(), text) {
		t.Errorf("PullImage(not wasm) = %v, want an error naming the file", err)
	}

	// A file reference is imported under its own name.
	ref := "file://" + testboxWasm
	id, err := h.is.PullImage(ctx, spec(ref), nil, nil)
	if err != nil || !strings.HasPrefix(id, "sha256:") {
		t.Fatalf("PullImage(%s) = %q, %v", ref, id, err)
	}
	st, err = h.is.ImageStatus(ctx, spec(ref), false)
	if err != nil || st.Image == nil || st.Image.Id != id || st.Image.Size == 0 {
		t.Fatalf("ImageStatus = %v, %v", st, err)
	}
	// testbox.wasm is already in the store as testboxImage: one image, two names.
	if want := []string{ref, testboxImage}; strings.Join(st.Image.RepoTags, ",") != strings.Join(want, ",") {
		t.Errorf("RepoTags = %v, want %v", st.Image.RepoTags, want)
	}
	// Pulling a name already in the store succeeds (imagePullPolicy Always).
	if got, err := h.is.PullImage(ctx, spec(testboxImage), nil, nil); err != nil || got != id {
		t.Errorf("PullImage(%s) = %q, %v; want %s", testboxImage, got, err, id)
	}
	imgs, err := h.is.ListImages(ctx, nil)
	if err != nil || len(imgs) != 1 || imgs[0].Id != id {
		t.Errorf("ListImages = %v, %v", imgs, err)
	}
	imgs, err = h.is.ListImages(ctx, &runtimeapi.ImageFilter{Image: spec("wasmlet.local/other:1")})
	if err != nil || len(imgs) != 0 {
		t.Errorf("ListImages(filter other) = %v, %v", imgs, err)
	}

	// The kubelet creates containers by image ID; the status shows the name.
	sb, sbCfg := h.sandbox(t, "img", nil)
	c := h.run(t, sb, sbCfg, "byid", []string{"echo", "hi"}, func(c *runtimeapi.ContainerConfig) {
		c.Image = &runtimeapi.ImageSpec{Image: id, UserSpecifiedImage: ref}
	})
	cs := h.waitExit(t, c, 30*time.Second)
	if cs.Image.Image != ref || cs.ImageRef != id || cs.Reason != "Completed" {
		t.Errorf("container status image %q ref %q reason %q", cs.Image.Image, cs.ImageRef, cs.Reason)
	}

	fs, err := h.is.ImageFsInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs.ImageFilesystems) != 1 || fs.ImageFilesystems[0].UsedBytes.Value < st.Image.Size ||
		fs.ImageFilesystems[0].InodesUsed.Value == 0 || fs.ImageFilesystems[0].FsId.Mountpoint == "" {
		t.Errorf("ImageFsInfo = %v", fs)
	}

	if err := h.is.RemoveImage(ctx, spec(testboxImage)); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{ref, testboxImage, id} {
		if st, err := h.is.ImageStatus(ctx, spec(r), false); err != nil || st.Image != nil {
			t.Errorf("ImageStatus(%s) after remove = %v, %v", r, st, err)
		}
	}
	if err := h.is.RemoveImage(ctx, spec(testboxImage)); err != nil {
		t.Errorf("second RemoveImage = %v", err)
	}
}
