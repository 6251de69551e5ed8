package pluginhost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmlet/wasmlet/abi"
)

// maxValue caps a key, a value or a request the guest hands to the host.
const maxValue = 1 << 20

// instantiateHostModule defines the "wasmlet" host module of ABI v1 in r.
func instantiateHostModule(ctx context.Context, r wazero.Runtime) error {
	i32 := api.ValueTypeI32
	b := r.NewHostModuleBuilder(abi.ImportModule)
	def := func(name string, fn api.GoModuleFunc, params []api.ValueType, results []api.ValueType) {
		b.NewFunctionBuilder().WithGoModuleFunction(fn, params, results).Export(name)
	}
	def(abi.ImportLog, hostLog, []api.ValueType{i32, i32, i32}, nil)
	def(abi.ImportConfigGet, hostConfigGet, []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32})
	def(abi.ImportKVGet, hostKVGet, []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32})
	def(abi.ImportKVSet, hostKVSet, []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32})
	def(abi.ImportKVDelete, hostKVDelete, []api.ValueType{i32, i32}, []api.ValueType{i32})
	def(abi.ImportHTTPRequest, hostHTTPRequest, []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32})
	def(abi.ImportNodeInfo, hostNodeInfo, []api.ValueType{i32, i32}, []api.ValueType{i32})
	def(abi.ImportResultRead, hostResultRead, []api.ValueType{i32, i32}, []api.ValueType{i32})
	_, err := b.Instantiate(ctx)
	return err
}

func errno(stack []uint64, e abi.Errno) { stack[0] = api.EncodeI32(int32(e)) }

// guestBytes copies [ptr, ptr+n) out of guest memory.
func guestBytes(m api.Module, ptr, n uint32) ([]byte, bool) {
	if n > maxValue {
		return nil, false
	}
	v, ok := m.Memory().Read(ptr, n)
	if !ok {
		return nil, false
	}
	return append([]byte(nil), v...), true
}

// keyArg returns the calling instance and a copy of the guest bytes named by
// the (ptr, len) pair in stack[0:2]; when either is missing it sets
// ErrnoInvalid and reports false.
func keyArg(ctx context.Context, m api.Module, stack []uint64) (*instance, []byte, bool) {
	inst := instanceFrom(ctx)
	key, ok := guestBytes(m, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
	if inst == nil || !ok {
		errno(stack, abi.ErrnoInvalid)
		return nil, nil, false
	}
	return inst, key, true
}

// done ends a host call that returns only an errno: 0 when err is nil, else
// ErrnoFailed after a warning naming the import.
func done(inst *instance, stack []uint64, what string, err error, args ...any) {
	if err != nil {
		inst.p.log.Warn(what+" failed", append(args, "error", err)...)
		errno(stack, abi.ErrnoFailed)
		return
	}
	stack[0] = 0
}

// writeResult implements the result buffer convention of abi.go.
func writeResult(inst *instance, m api.Module, data []byte, bufPtr, bufCap uint32, stack []uint64) {
	n := uint32(len(data))
	w := min(n, bufCap)
	if w > 0 && !m.Memory().Write(bufPtr, data[:w]) {
		errno(stack, abi.ErrnoInvalid)
		return
	}
	if n > bufCap {
		inst.pending = data
	} else {
		inst.pending = nil
	}
	stack[0] = api.EncodeI32(int32(n))
}

func hostLog(ctx context.Context, m api.Module, stack []uint64) {
	inst := instanceFrom(ctx)
	level := abi.LogLevel(api.DecodeI32(stack[0]))
	msg, ok := guestBytes(m, api.DecodeU32(stack[1]), min(api.DecodeU32(stack[2]), 64<<10))
	if inst == nil || !ok {
		return
	}
	inst.p.guestLog(level, "log", msg)
}

func hostConfigGet(ctx context.Context, m api.Module, stack []uint64) {
	inst, key, ok := keyArg(ctx, m, stack)
	if !ok {
		return
	}
	v, found := inst.p.manifest.Config[string(key)]
	if !found {
		errno(stack, abi.ErrnoNotFound)
		return
	}
	writeResult(inst, m, []byte(v), api.DecodeU32(stack[2]), api.DecodeU32(stack[3]), stack)
}

func hostKVGet(ctx context.Context, m api.Module, stack []uint64) {
	inst, key, ok := keyArg(ctx, m, stack)
	if !ok {
		return
	}
	v, found := inst.p.e.cfg.KV.Get(inst.p.manifest.Name, string(key))
	if !found {
		errno(stack, abi.ErrnoNotFound)
		return
	}
	writeResult(inst, m, v, api.DecodeU32(stack[2]), api.DecodeU32(stack[3]), stack)
}

func hostKVSet(ctx context.Context, m api.Module, stack []uint64) {
	inst := instanceFrom(ctx)
	key, ok1 := guestBytes(m, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
	if api.DecodeU32(stack[3]) > maxValue {
		errno(stack, abi.ErrnoTooLarge)
		return
	}
	val, ok2 := guestBytes(m, api.DecodeU32(stack[2]), api.DecodeU32(stack[3]))
	if inst == nil || !ok1 || !ok2 {
		errno(stack, abi.ErrnoInvalid)
		return
	}
	done(inst, stack, "kv_set", inst.p.e.cfg.KV.Set(inst.p.manifest.Name, string(key), val), "key", string(key))
}

func hostKVDelete(ctx context.Context, m api.Module, stack []uint64) {
	inst, key, ok := keyArg(ctx, m, stack)
	if !ok {
		return
	}
	done(inst, stack, "kv_delete", inst.p.e.cfg.KV.Delete(inst.p.manifest.Name, string(key)), "key", string(key))
}

func hostNodeInfo(ctx context.Context, m api.Module, stack []uint64) {
	inst := instanceFrom(ctx)
	if inst == nil {
		errno(stack, abi.ErrnoInvalid)
		return
	}
	f := inst.p.e.cfg.NodeInfo
	if f == nil {
		errno(stack, abi.ErrnoNotFound)
		return
	}
	ni, err := f(ctx)
	if err != nil {
		inst.p.log.Warn("node_info failed", "error", err)
		errno(stack, abi.ErrnoFailed)
		return
	}
	b, _ := json.Marshal(ni)
	writeResult(inst, m, b, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), stack)
}

func hostResultRead(ctx context.Context, m api.Module, stack []uint64) {
	inst := instanceFrom(ctx)
	if inst == nil || inst.pending == nil {
		errno(stack, abi.ErrnoNoResult)
		return
	}
	writeResult(inst, m, inst.pending, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), stack)
}

func hostHTTPRequest(ctx context.Context, m api.Module, stack []uint64) {
	inst, raw, ok := keyArg(ctx, m, stack)
	if !ok {
		return
	}
	var req abi.HTTPRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		errno(stack, abi.ErrnoInvalid)
		return
	}
	u, err := url.Parse(req.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		errno(stack, abi.ErrnoInvalid)
		return
	}
	if !hostAllowed(inst.p.manifest.Permissions.AllowedHosts, u) {
		inst.p.log.Warn("http_request denied: host not in allowedHosts", "url", req.URL)
		errno(stack, abi.ErrnoDenied)
		return
	}
	resp := inst.p.doHTTP(ctx, inst, &req)
	b, _ := json.Marshal(resp)
	writeResult(inst, m, b, api.DecodeU32(stack[2]), api.DecodeU32(stack[3]), stack)
}

// doHTTP performs an allowed request within the call's remaining time.
func (p *Plugin) doHTTP(ctx context.Context, inst *instance, req *abi.HTTPRequest) *abi.HTTPResponse {
	timeout := p.timeout
	if req.TimeoutMillis > 0 {
		timeout = min(timeout, time.Duration(req.TimeoutMillis)*time.Millisecond)
	}
	if p.deadline == DeadlineMeter {
		timeout = min(timeout, inst.Deadline()-mono())
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	hr, err := http.NewRequestWithContext(ctx, method, req.URL, bytes.NewReader(req.Body))
	if err != nil {
		return &abi.HTTPResponse{Error: err.Error()}
	}
	for k, v := range req.Headers {
		hr.Header.Set(k, v)
	}
	// Every redirect must stay within the allow-list too.
	client := *p.e.cfg.HTTPClient
	client.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if !hostAllowed(p.manifest.Permissions.AllowedHosts, r.URL) {
			return fmt.Errorf("redirect to %s denied: host not in allowedHosts", r.URL.Host)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	res, err := client.Do(hr)
	if err != nil {
		return &abi.HTTPResponse{Error: err.Error()}
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, DefaultHTTPBodyMax))
	out := &abi.HTTPResponse{Status: res.StatusCode, Body: body, Headers: map[string]string{}}
	for k := range res.Header {
		out.Headers[k] = res.Header.Get(k)
	}
	if err != nil {
		out.Error = fmt.Sprintf("reading body: %v", err)
	}
	return out
}

// hostAllowed matches u's host[:port] against allowedHosts entries: "h",
// "h:port" or "*.domain" (any subdomain, any port unless given).
func hostAllowed(allowed []string, u *url.URL) bool {
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	host = strings.ToLower(host)
	for _, a := range allowed {
		a = strings.ToLower(a)
		ah, ap, err := net.SplitHostPort(a)
		if err != nil {
			ah, ap = a, ""
		}
		if ap != "" && ap != port {
			continue
		}
		if ah == host || (strings.HasPrefix(ah, "*.") && strings.HasSuffix(host, ah[1:])) {
			return true
		}
	}
	return false
}

// NewMemoryKV returns an in-memory KV (the default).
func NewMemoryKV() KV { return &memoryKV{m: map[string][]byte{}} }

type memoryKV struct {
	mu sync.RWMutex
	m  map[string][]byte
}

// Get implements KV.
func (s *memoryKV) Get(plugin, key string) ([]byte, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.m[plugin+"\x00"+key]
	return v, ok
}

// Set implements KV.
func (s *memoryKV) Set(plugin, key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[plugin+"\x00"+key] = append([]byte(nil), value...)
	return nil
}

// Delete implements KV.
func (s *memoryKV) Delete(plugin, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, plugin+"\x00"+key)
	return nil
}
