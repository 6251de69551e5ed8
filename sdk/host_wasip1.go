//go:build wasip1

package sdk

import (
	"strings"
	"unsafe"

	"github.com/wasmlet/wasmlet/abi"
)

// ABI v1 host imports (abi/v1/SPEC.md). Pointers are linear-memory offsets;
// Go's wasm pointers are exactly that, and its garbage collector does not
// move objects.

//go:wasmimport wasmlet log
func importLog(level int32, ptr unsafe.Pointer, size uint32)

//go:wasmimport wasmlet config_get
func importConfigGet(keyPtr unsafe.Pointer, keyLen uint32, bufPtr unsafe.Pointer, bufCap uint32) int32

//go:wasmimport wasmlet kv_get
func importKVGet(keyPtr unsafe.Pointer, keyLen uint32, bufPtr unsafe.Pointer, bufCap uint32) int32

//go:wasmimport wasmlet kv_set
func importKVSet(keyPtr unsafe.Pointer, keyLen uint32, valPtr unsafe.Pointer, valLen uint32) int32

//go:wasmimport wasmlet kv_delete
func importKVDelete(keyPtr unsafe.Pointer, keyLen uint32) int32

//go:wasmimport wasmlet http_request
func importHTTPRequest(reqPtr unsafe.Pointer, reqLen uint32, bufPtr unsafe.Pointer, bufCap uint32) int32

//go:wasmimport wasmlet node_info
func importNodeInfo(bufPtr unsafe.Pointer, bufCap uint32) int32

//go:wasmimport wasmlet result_read
func importResultRead(bufPtr unsafe.Pointer, bufCap uint32) int32

func strPtr(s string) unsafe.Pointer { return unsafe.Pointer(unsafe.StringData(s)) }

func bytesPtr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

// firstBuf is the size of the buffer offered on a first try; longer results
// are fetched with result_read.
const firstBuf = 512

// result completes the result-buffer convention: n is what the import
// returned for buf.
func result(buf []byte, n int32) ([]byte, error) {
	if n < 0 {
		return nil, errnoError(n)
	}
	if int(n) <= len(buf) {
		return buf[:n], nil
	}
	buf = make([]byte, n)
	m := importResultRead(bytesPtr(buf), uint32(n))
	if m < 0 {
		return nil, errnoError(m)
	}
	return buf[:m], nil
}

func hostLog(level LogLevel, msg string) {
	importLog(int32(level), strPtr(msg), uint32(len(msg)))
}

// configCache holds the answers of config_get. The manifest's config (with
// the operator's overrides) is fixed for as long as the plugin is loaded, and
// an instance never outlives its plugin, so each key is asked for once per
// instance: a host call and a buffer per Config call cost a Go guest ~15 µs
// per admission, a map lookup well under one.
var configCache map[string]configAnswer

type configAnswer struct {
	value string
	err   error
}

func hostConfig(key string) (string, error) {
	if a, ok := configCache[key]; ok {
		return a.value, a.err
	}
	buf := make([]byte, firstBuf)
	b, err := result(buf, importConfigGet(strPtr(key), uint32(len(key)), bytesPtr(buf), uint32(len(buf))))
	a := configAnswer{value: string(b), err: err}
	if err == nil || err == errNotFound { // other errors are not the config's answer: ask again next time
		if configCache == nil {
			configCache = make(map[string]configAnswer)
		}
		configCache[strings.Clone(key)] = a
	}
	return a.value, a.err
}

func hostKVGet(key string) ([]byte, error) {
	buf := make([]byte, firstBuf)
	return result(buf, importKVGet(strPtr(key), uint32(len(key)), bytesPtr(buf), uint32(len(buf))))
}

func hostKVSet(key string, value []byte) error {
	if n := importKVSet(strPtr(key), uint32(len(key)), bytesPtr(value), uint32(len(value))); n < 0 {
		return errnoError(n)
	}
	return nil
}

func hostKVDelete(key string) error {
	if n := importKVDelete(strPtr(key), uint32(len(key))); n < 0 {
		return errnoError(n)
	}
	return nil
}

func hostHTTP(req []byte) ([]byte, error) {
	buf := make([]byte, 4096)
	return result(buf, importHTTPRequest(bytesPtr(req), uint32(len(req)), bytesPtr(buf), uint32(len(buf))))
}

func hostNodeInfo() ([]byte, error) {
	buf := make([]byte, firstBuf)
	return result(buf, importNodeInfo(bytesPtr(buf), uint32(len(buf))))
}

// The exports. input is the buffer handed out by the last alloc; output is
// the last result, kept reachable until the next call as the ABI requires.
var input, output []byte

//go:wasmexport wasmlet_abi_v1
func exportABIV1() {}

//go:wasmexport wasmlet_reads
func exportReads() int32 { return int32(reads()) }

// exportCheckConfig answers 0 when CheckConfig accepts the config, else its
// error's message as the result.
//
//go:wasmexport wasmlet_check_config
func exportCheckConfig() int64 {
	err := CheckConfig()
	if err == nil {
		return 0
	}
	output = []byte(err.Error())
	if len(output) == 0 {
		output = []byte("config refused")
	}
	return int64(abi.PackResult(uint32(uintptr(bytesPtr(output))), uint32(len(output))))
}

//go:wasmexport wasmlet_alloc
func exportAlloc(size int32) int32 {
	if size < 0 {
		return 0
	}
	input = make([]byte, size, max(size, 1))
	return int32(uintptr(bytesPtr(input[:cap(input)])))
}

//go:wasmexport wasmlet_admit
func exportAdmit(ptr, size int32) int64 { return call(abi.KindAdmission, ptr, size) }

//go:wasmexport wasmlet_source
func exportSource(ptr, size int32) int64 { return call(abi.KindSource, ptr, size) }

//go:wasmexport wasmlet_hook
func exportHook(ptr, size int32) int64 { return call(abi.KindHook, ptr, size) }

func call(kind abi.Kind, ptr, size int32) int64 {
	var in []byte
	if size < 0 {
		size = 0
	}
	if input != nil && uintptr(ptr) == uintptr(bytesPtr(input[:cap(input)])) && int(size) <= len(input) {
		in = input[:size] // ours, fresh for this call: decoded strings may alias it
	} else if size > 0 {
		// Not the buffer alloc gave: copy, the host may reuse that memory.
		in = append([]byte(nil), unsafe.Slice((*byte)(unsafe.Add(nil, int(ptr))), size)...)
	}
	input = nil
	output = Handle(kind, in)
	if len(output) == 0 {
		return 0
	}
	return int64(abi.PackResult(uint32(uintptr(bytesPtr(output))), uint32(len(output))))
}
