package pluginhost

import (
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// cappedMemory backs one instance's linear memory and refuses to grow past
// max bytes: memory.grow then returns -1 to the guest (which usually traps on
// it). Where the platform allows (memory_linux.go) the memory is a mapping of
// its own outside the Go heap: the cap is reserved as address space only,
// pages become resident when the guest touches them, growing never copies,
// and Free unmaps it, so a discarded instance's memory goes back to the
// system at once rather than when the Go heap's scavenger gets to it (and
// never counts towards the Go heap's GC goal). See RATIONALE.md.
type cappedMemory struct {
	buf    []byte // the whole reservation (mapped) or the current slice (heap)
	max    uint64
	denied *atomic.Bool
	mapped bool
}

// allocate implements experimental.MemoryAllocator's function.
func (m *cappedMemory) allocate(capHint, maxHint uint64) experimental.LinearMemory {
	if m.reserve(min(m.max, maxHint)) {
		return m
	}
	if capHint > m.max {
		capHint = m.max
	}
	m.buf = make([]byte, 0, capHint)
	return m
}

// Reallocate implements experimental.LinearMemory.
func (m *cappedMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		m.denied.Store(true)
		return nil
	}
	if m.mapped {
		if size > uint64(len(m.buf)) { // the module's own maximum
			return nil
		}
		return m.buf[:size:size]
	}
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
		return m.buf
	}
	c := min(max(size, uint64(cap(m.buf))*2), m.max)
	nb := make([]byte, size, c)
	copy(nb, m.buf)
	m.buf = nb
	return m.buf
}

// Free implements experimental.LinearMemory.
func (m *cappedMemory) Free() {
	if m.mapped {
		m.unmap()
	}
	m.buf = nil
}
