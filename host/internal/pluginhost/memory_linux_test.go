package pluginhost

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"
)

// TestCappedMemory_Mapped checks that a linear memory is a mapping of its
// own: resident only where touched, growing in place, refused past its cap,
// and unmapped by Free (a discarded instance gives its memory back at once).
func TestCappedMemory_Mapped(t *testing.T) {
	var denied atomic.Bool
	m := &cappedMemory{max: 64 << 16, denied: &denied}
	m.allocate(1<<16, 1<<32)
	if !m.mapped {
		t.Fatal("memory not mapped")
	}
	buf := m.Reallocate(16 << 16)
	if len(buf) != 16<<16 {
		t.Fatalf("Reallocate(16 pages) = %d bytes", len(buf))
	}
	if r := m.resident(uint64(len(buf))); r != 0 {
		t.Fatalf("untouched memory: %d bytes resident, want 0", r)
	}
	buf[0], buf[5<<16] = 1, 1
	if r := m.resident(uint64(len(buf))); r == 0 || r > 2<<16 {
		t.Fatalf("two bytes touched: %d bytes resident, want a page or two", r)
	}
	grown := m.Reallocate(64 << 16)
	if unsafe.SliceData(grown) != unsafe.SliceData(buf) || grown[5<<16] != 1 {
		t.Fatal("growing moved or lost the memory")
	}
	if m.Reallocate(65<<16) != nil || !denied.Load() {
		t.Fatal("growing past the cap was not refused")
	}
	addr := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(unsafe.SliceData(grown))))
	if !strings.Contains(maps(t), addr) {
		t.Fatalf("mapping %s not in /proc/self/maps", addr)
	}
	m.Free()
	if strings.Contains(maps(t), addr) {
		t.Fatalf("mapping %s still in /proc/self/maps after Free", addr)
	}
}

func maps(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
