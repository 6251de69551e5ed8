package pluginhost

import (
	"syscall"
	"unsafe"
)

// reserve maps n bytes of address space for the memory, without reserving
// swap (MAP_NORESERVE): only the pages the guest touches become resident.
// It reports false when the mapping fails; the memory then lives in the Go
// heap.
func (m *cappedMemory) reserve(n uint64) bool {
	if n == 0 || n > 1<<32 {
		return false
	}
	b, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_NORESERVE)
	if err != nil {
		return false
	}
	m.buf, m.mapped = b, true
	return true
}

func (m *cappedMemory) unmap() {
	if m.buf != nil {
		_ = syscall.Munmap(m.buf[:cap(m.buf)])
	}
}

// resident counts the resident bytes of the first size bytes (mincore).
func (m *cappedMemory) resident(size uint64) uint64 {
	if !m.mapped || size == 0 {
		return size
	}
	page := uint64(syscall.Getpagesize())
	vec := make([]byte, (size+page-1)/page)
	if _, _, e := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&m.buf[0])), uintptr(size), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return size
	}
	var n uint64
	for _, v := range vec {
		n += uint64(v & 1)
	}
	return n * page
}
