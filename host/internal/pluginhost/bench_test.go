package pluginhost

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/internal/metertest"
)

var benchModes = []DeadlineMode{DeadlineNone, DeadlineMeter, DeadlineCloseOnDone}

// pod4K is an admission request for a pod of about 4 KB of JSON.
func pod4K() []byte {
	var env []map[string]string
	for i := 0; len(env) < 40; i++ {
		env = append(env, map[string]string{"name": "VAR_" + strconv.Itoa(i), "value": strings.Repeat("v", 40)})
	}
	pod := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "web-0", "namespace": "default", "uid": "2f7c1e9a-0000-4000-8000-000000000001",
			"labels": map[string]string{"app": "web", "tier": "frontend"}},
		"spec": map[string]any{"containers": []any{map[string]any{
			"name": "web", "image": "registry.example.com/web:1.2.3", "env": env,
			"securityContext": map[string]any{"privileged": false},
			"resources":       map[string]any{"limits": map[string]string{"cpu": "500m", "memory": "256Mi"}},
		}}},
	}
	b, _ := json.Marshal(pod)
	req, _ := json.Marshal(abi.AdmitRequest{Pod: b})
	return req
}

// On a machine shared with other builds, wall-clock ns/op swings 2x between
// runs; the benchmarks below run under metertest.Loop, which also reports
// cpu-ns/op, the benchmark thread's own CPU time per op.

// BenchmarkPlugin_Call measures the host's overhead per call: an export that
// returns a constant at once (ok.wasm's source), raw bytes in and out.
func BenchmarkPlugin_Call(b *testing.B) {
	in := []byte(`{"seq":1}`)
	for _, mode := range benchModes {
		b.Run("empty/"+string(mode), func(b *testing.B) {
			p := load(b, "testdata/wat/ok.wasm", Config{Deadline: mode})
			ctx := context.Background()
			b.ReportAllocs()
			metertest.Loop(b, func() error { _, err := p.Call(ctx, abi.KindSource, in); return err })
		})
	}
}

// BenchmarkDeadline measures what each deadline mechanism costs guest code:
// a tight WAT loop of 2^20 iterations (the worst case for per-back-edge
// checks) and a standard-Go guest decoding a 4 KB pod.
func BenchmarkDeadline(b *testing.B) {
	ctx := context.Background()
	pod := pod4K()
	for _, mode := range benchModes {
		b.Run("wat-loop/"+string(mode), func(b *testing.B) {
			p := load(b, "testdata/wat/work.wasm", Config{Deadline: mode})
			metertest.Loop(b, func() error { _, err := p.Call(ctx, abi.KindAdmission, pod); return err })
		})
	}
	for _, mode := range benchModes {
		b.Run("go-json/"+string(mode), func(b *testing.B) {
			p := load(b, goGuest(b), Config{Deadline: mode, CacheDir: testCacheDir(b)})
			if _, err := p.Call(ctx, abi.KindAdmission, pod); err != nil {
				b.Fatal(err)
			}
			metertest.Loop(b, func() error { _, err := p.Call(ctx, abi.KindAdmission, pod); return err })
		})
	}
	// wazero's interpreter, for comparison (raw wazero, same loop).
	for _, closeOnDone := range []bool{false, true} {
		b.Run(fmt.Sprintf("wat-loop/interpreter-close-on-done=%v", closeOnDone), func(b *testing.B) {
			wasm, err := os.ReadFile("testdata/wat/work.wasm")
			if err != nil {
				b.Fatal(err)
			}
			r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCloseOnContextDone(closeOnDone))
			defer r.Close(ctx)
			mod, err := r.Instantiate(ctx, wasm)
			if err != nil {
				b.Fatal(err)
			}
			f := mod.ExportedFunction(abi.ExportAdmit)
			metertest.Loop(b, func() error {
				cctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				_, err := f.Call(cctx, api.EncodeU32(1024), 0)
				return err
			})
		})
	}
}

// BenchmarkLoad measures loading the Go guest (≈3 MB): cold (empty
// compilation cache directory) and from a warm file cache, each with a fresh
// runtime as after a restart. The time covers read, sha256, meter, compile,
// one instantiation and _initialize. cpu-ns/op counts the loading thread only
// (a cold compile also runs on other threads).
func BenchmarkLoad(b *testing.B) {
	wasm := goGuest(b)
	ctx := context.Background()
	b.Run("go/cold", func(b *testing.B) {
		metertest.Loop(b, func() error {
			p, err := Load(ctx, LoadConfig{Path: wasm, Config: Config{CacheDir: filepath.Join(b.TempDir(), "cache")}})
			if err != nil {
				return err
			}
			return p.Close(ctx)
		})
	})
	b.Run("go/cached", func(b *testing.B) {
		cache := filepath.Join(b.TempDir(), "cache")
		p, err := Load(ctx, LoadConfig{Path: wasm, Config: Config{CacheDir: cache}})
		if err != nil {
			b.Fatal(err)
		}
		p.Close(ctx)
		metertest.Loop(b, func() error {
			p, err := Load(ctx, LoadConfig{Path: wasm, Config: Config{CacheDir: cache}})
			if err != nil {
				return err
			}
			return p.Close(ctx)
		})
	})
}

// BenchmarkInstanceRSS reports the resident memory one more pooled instance
// costs (RSS growth over 16 instances, divided by 16), for a Go guest and a
// WAT one.
func BenchmarkInstanceRSS(b *testing.B) {
	const n = 16
	ctx := context.Background()
	for _, c := range []struct{ name, path string }{{"go", ""}, {"wat", "testdata/wat/ok.wasm"}} {
		b.Run(c.name, func(b *testing.B) {
			path := c.path
			if path == "" {
				path = goGuest(b)
			}
			p := load(b, path, Config{PoolSize: n, CacheDir: testCacheDir(b)})
			pod := pod4K()
			var perInstance float64
			for i := 0; i < b.N; i++ {
				debug.FreeOSMemory() // return freed pages so RSS only grows by what the instances hold
				before := rss(b)
				var insts []*instance
				for j := 0; j < n; j++ {
					inst, err := p.pool.get(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if p.manifest.HasKind(abi.KindAdmission) {
						if _, err := inst.call(ctx, abi.KindAdmission, pod, mono()); err != nil {
							b.Fatal(err)
						}
					}
					insts = append(insts, inst)
				}
				perInstance = float64(rss(b)-before) / n
				for _, inst := range insts {
					p.pool.put(inst, false)
				}
			}
			b.ReportMetric(perInstance, "RSS-bytes/instance")
		})
	}
}

// rss reads the process's resident set size from /proc/self/statm.
func rss(tb testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		tb.Skip("no /proc/self/statm:", err)
	}
	f := strings.Fields(string(b))
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// BenchmarkExtism measures an Extism-ABI admission (extism.wat, which reads
// its input byte by byte through the kernel) per deadline mechanism.
func BenchmarkExtism(b *testing.B) {
	ctx := context.Background()
	in := []byte(`{"pod":{"metadata":{"name":"web"}}}`)
	for _, mode := range benchModes {
		b.Run(string(mode), func(b *testing.B) {
			p := load(b, "testdata/wat/extism.wasm", Config{Deadline: mode})
			b.ReportAllocs()
			metertest.Loop(b, func() error { _, err := p.Call(ctx, abi.KindAdmission, in); return err })
		})
	}
}
