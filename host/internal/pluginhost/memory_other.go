//go:build !linux

package pluginhost

// reserve is not available here: linear memories live in the Go heap.
func (m *cappedMemory) reserve(uint64) bool { return false }

func (m *cappedMemory) unmap() {}

func (m *cappedMemory) resident(size uint64) uint64 { return size }
