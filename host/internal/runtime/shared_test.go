package runtime

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMakeRShared: a directory that is not a mount point becomes one, and
// shared; doing it again changes nothing.
func TestMakeRShared(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := t.TempDir()
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	if point, _, err := mountOf(dir); err != nil || point == dir {
		t.Fatalf("before: mount point %q, %v; want a parent of %s", point, err, dir)
	}
	for i := 0; i < 2; i++ {
		if err := makeRShared(dir); err != nil {
			t.Fatal(err)
		}
		point, shared, err := mountOf(dir)
		if err != nil || point != dir || !shared {
			t.Fatalf("after %d: mount point %q shared %v, %v; want %s shared", i+1, point, shared, err, dir)
		}
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	if got := unescapeMountinfo(`/var/lib/with\040space`); got != "/var/lib/with space" {
		t.Errorf("unescape = %q", got)
	}
}

// TestShareVolume_outsideRootDir: a host path outside the root dir (a
// hostPath) is left as it is.
func TestShareVolume_outsideRootDir(t *testing.T) {
	m := &Manager{cfg: Config{RootDir: t.TempDir()}}
	other := t.TempDir()
	if err := m.shareVolume(other); err != nil {
		t.Fatal(err)
	}
	if point, _, err := mountOf(other); err != nil || point == other {
		t.Errorf("a path outside the root dir became mount point %q (%v)", point, err)
	}
}
