// Command cost-copy is cost-empty with a fresh input buffer per call, as the
// SDK's alloc export makes: the cost of the input's allocation
// (BenchmarkGuestCost).
package main

import "unsafe"

var (
	input []byte
	resp  = []byte(`{"allowed":true}`)
)

//go:wasmexport wasmlet_abi_v1
func marker() {}

//go:wasmexport wasmlet_alloc
func alloc(size int32) int32 {
	input = make([]byte, size, max(size, 1))
	return int32(uintptr(unsafe.Pointer(&input[:1][0])))
}

//go:wasmexport wasmlet_admit
func admit(ptr, size int32) int64 {
	return int64(uintptr(unsafe.Pointer(&resp[0])))<<32 | int64(len(resp))
}

func main() {}
