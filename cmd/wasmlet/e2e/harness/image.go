package harness

import (
	"context"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ImportRandomImage writes an image of one layer of size random bytes,
// tagged ref, as a docker-save tarball and imports it with ctr into the
// containerd listening on sock (namespace k8s.io, unpacked): an image no
// pod uses, for image garbage collection and disk-pressure reclaim to
// remove.
func ImportRandomImage(t testing.TB, sock, ref string, size int64) {
	t.Helper()
	img, err := random.Image(size, 1)
	if err != nil {
		t.Fatal(err)
	}
	// ctr imports only images of its platform.
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", goruntime.GOARCH
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "image.tar")
	if err := tarball.WriteToFile(file, tag, img); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ctr", "--address", sock, "-n", "k8s.io", "images", "import", file).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr images import %s: %v\n%s", ref, err, out)
	}
}
