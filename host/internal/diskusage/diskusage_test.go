package diskusage

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/wasmlet/wasmlet/internal/disktest"
)

func TestWalk(t *testing.T) {
	d := t.TempDir()
	disktest.WriteFile(t, filepath.Join(d, "big"), 64<<10)
	disktest.WriteFile(t, filepath.Join(d, "sub", "small"), 8<<10)
	if err := os.Link(filepath.Join(d, "big"), filepath.Join(d, "sub", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(d, "sym")); err != nil {
		t.Fatal(err)
	}
	u, err := Walk(d)
	if err != nil {
		t.Fatal(err)
	}
	// The hard link counts once; the symlink is its own inode, not /etc.
	want := disktest.Blocks(t, d, filepath.Join(d, "big"), filepath.Join(d, "sub"), filepath.Join(d, "sub", "small"), filepath.Join(d, "sym"))
	if u.Bytes != want || u.Inodes != 5 || u.Bytes < 72<<10 {
		t.Errorf("Walk = %d bytes, %d inodes; want %d bytes (at least 72 KiB), 5 inodes", u.Bytes, u.Inodes, want)
	}
	if _, err := Walk(filepath.Join(d, "missing")); err == nil {
		t.Error("Walk of a missing path: no error")
	}
}

// BenchmarkWalk walks a volume of 1,000 files of 4 KiB in 10
// directories: the cost of one pod volume's measurement, which the
// provider pays once per VolumeStatsPeriod, not per summary.
func BenchmarkWalk(b *testing.B) {
	d := b.TempDir()
	buf := make([]byte, 4<<10)
	for i := 0; i < 1000; i++ {
		dir := filepath.Join(d, "d"+strconv.Itoa(i%10))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)), buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		u, err := Walk(d)
		if err != nil || u.Inodes != 1011 {
			b.Fatalf("Walk = %+v, %v; want 1011 inodes", u, err)
		}
	}
}
