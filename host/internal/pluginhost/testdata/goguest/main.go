// Command goguest is the standard-Go (wasip1, c-shared) test plugin of
// host/internal/pluginhost, written against the raw ABI v1 without the SDK. Its admission
// answer depends on the pod JSON:
//
//	"panic"  → panics (a Go guest's trap)
//	"bomb"   → allocates until the memory cap stops it
//	"spin"   → loops forever (the deadline must stop it)
//	"config" → denies with reason = config_get("reason")
//	"kv"     → increments kv counter "n" and denies with its value as reason
//	"node"   → denies with the node_info name as reason
//	"http"   → GETs config_get("url") with http_request; denies with the
//	           status (or the errno) as reason and the body as message
//	anything else → allowed
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o goguest.wasm .
package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"unsafe"
)

func main() {}

//go:wasmimport wasmlet config_get
func configGet(kp unsafe.Pointer, kl uint32, bp unsafe.Pointer, bc uint32) int32

//go:wasmimport wasmlet kv_get
func kvGet(kp unsafe.Pointer, kl uint32, bp unsafe.Pointer, bc uint32) int32

//go:wasmimport wasmlet kv_set
func kvSet(kp unsafe.Pointer, kl uint32, vp unsafe.Pointer, vl uint32) int32

//go:wasmimport wasmlet node_info
func nodeInfo(bp unsafe.Pointer, bc uint32) int32

//go:wasmimport wasmlet http_request
func httpRequest(rp unsafe.Pointer, rl uint32, bp unsafe.Pointer, bc uint32) int32

//go:wasmimport wasmlet result_read
func resultRead(bp unsafe.Pointer, bc uint32) int32

//go:wasmimport wasmlet log
func hostLog(level int32, p unsafe.Pointer, n uint32)

//go:wasmexport wasmlet_abi_v1
func abiV1() {}

var input []byte

//go:wasmexport wasmlet_alloc
func alloc(n uint32) unsafe.Pointer {
	if uint32(cap(input)) < n {
		input = make([]byte, n)
	}
	input = input[:n]
	if n == 0 {
		return unsafe.Pointer(unsafe.SliceData(input[:1:1]))
	}
	return unsafe.Pointer(unsafe.SliceData(input))
}

var result []byte

func ret(v any) uint64 {
	result, _ = json.Marshal(v)
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(result))))<<32 | uint64(len(result))
}

func get(f func(kp unsafe.Pointer, kl uint32, bp unsafe.Pointer, bc uint32) int32, key string) (string, int32) {
	buf := make([]byte, 256)
	k := []byte(key)
	n := f(unsafe.Pointer(unsafe.SliceData(k)), uint32(len(k)), unsafe.Pointer(unsafe.SliceData(buf)), uint32(len(buf)))
	if n < 0 {
		return "", n
	}
	return string(buf[:n]), n
}

type verdict struct {
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

var sink [][]byte

//go:wasmexport wasmlet_admit
func admit(p unsafe.Pointer, n uint32) uint64 {
	var req struct {
		Pod json.RawMessage `json:"pod"`
	}
	if err := json.Unmarshal(unsafe.Slice((*byte)(p), n), &req); err != nil {
		return ret(map[string]string{"error": err.Error()})
	}
	pod := string(req.Pod)
	msg := []byte("admitting " + pod)
	hostLog(1, unsafe.Pointer(unsafe.SliceData(msg)), uint32(len(msg)))
	switch {
	case strings.Contains(pod, "panic"):
		panic("goguest: asked to panic")
	case strings.Contains(pod, "bomb"):
		for {
			sink = append(sink, make([]byte, 1<<20))
		}
	case strings.Contains(pod, "spin"):
		x := 0
		for {
			x++
			if x < 0 {
				return ret(verdict{Allowed: true})
			}
		}
	case strings.Contains(pod, "config"):
		v, e := get(configGet, "reason")
		return ret(verdict{Reason: v, Message: strconv.Itoa(int(e))})
	case strings.Contains(pod, "kv"):
		v, _ := get(kvGet, "n")
		i, _ := strconv.Atoi(v)
		s := []byte(strconv.Itoa(i + 1))
		k := []byte("n")
		kvSet(unsafe.Pointer(unsafe.SliceData(k)), 1, unsafe.Pointer(unsafe.SliceData(s)), uint32(len(s)))
		return ret(verdict{Reason: string(s)})
	case strings.Contains(pod, "http"):
		u, _ := get(configGet, "url")
		req, _ := json.Marshal(map[string]string{"method": "GET", "url": u})
		buf := make([]byte, 16) // too small on purpose: exercises result_read
		m := httpRequest(unsafe.Pointer(unsafe.SliceData(req)), uint32(len(req)), unsafe.Pointer(unsafe.SliceData(buf)), uint32(len(buf)))
		if m < 0 {
			return ret(verdict{Reason: strconv.Itoa(int(m))})
		}
		if int(m) > len(buf) {
			buf = make([]byte, m)
			resultRead(unsafe.Pointer(unsafe.SliceData(buf)), uint32(m))
		}
		var resp struct {
			Status int
			Body   []byte
			Error  string
		}
		json.Unmarshal(buf[:m], &resp)
		return ret(verdict{Reason: strconv.Itoa(resp.Status), Message: string(resp.Body) + resp.Error})
	case strings.Contains(pod, "node"):
		buf := make([]byte, 1024)
		m := nodeInfo(unsafe.Pointer(unsafe.SliceData(buf)), 1024)
		var ni struct{ Name string }
		if m > 0 {
			json.Unmarshal(buf[:m], &ni)
		}
		return ret(verdict{Reason: ni.Name, Message: strconv.Itoa(int(m))})
	}
	return ret(verdict{Allowed: true})
}

//go:wasmexport wasmlet_source
func source(p unsafe.Pointer, n uint32) uint64 {
	return ret(map[string]any{"updates": []any{}})
}
