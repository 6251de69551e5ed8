// Command cost-empty is a Go guest on the raw ABI whose admission export
// answers a constant into a buffer it reuses: what a call costs before any
// work (BenchmarkGuestCost).
package main

import "unsafe"

var (
	buf  = make([]byte, 64<<10)
	resp = []byte(`{"allowed":true}`)
)

//go:wasmexport wasmlet_abi_v1
func marker() {}

//go:wasmexport wasmlet_alloc
func alloc(size int32) int32 {
	if int(size) > len(buf) {
		buf = make([]byte, size)
	}
	return int32(uintptr(unsafe.Pointer(&buf[0])))
}

//go:wasmexport wasmlet_admit
func admit(ptr, size int32) int64 {
	return int64(uintptr(unsafe.Pointer(&resp[0])))<<32 | int64(len(resp))
}

func main() {}
