package wasiruntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BenchmarkRuntime_StartContainer measures what the agent waits for when it
// starts a container of a cached image: CreateContainer + StartContainer
// through the CRI client until the first log line is in the log file.
func BenchmarkRuntime_StartContainer(b *testing.B) {
	h := newHarness(b)
	ctx := context.Background()
	sb, sbCfg := h.sandbox(b, "bench", nil)
	h.stopRemove(b, h.run(b, sb, sbCfg, "warm", []string{"echo", "warm"}, nil)) // compile once
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := "c" + strconv.Itoa(i)
		id := h.run(b, sb, sbCfg, name, []string{"echo", "ready", ";", "sleep", "1h"}, nil)
		waitLog(b, filepath.Join(sbCfg.LogDirectory, name, "0.log"), "ready", 10*time.Second)
		b.StopTimer()
		h.stopRemove(b, id)
		b.StartTimer()
	}
	_ = ctx
}

func (h *harness) stopRemove(b testing.TB, id string) {
	if err := h.rs.StopContainer(context.Background(), id, 0); err != nil {
		b.Fatal(err)
	}
	if err := h.rs.RemoveContainer(context.Background(), id); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRuntime_RSS reports the resident memory each running testbox
// workload (a Go wasip1 module sleeping after its first line) adds to the
// runtime's process.
func BenchmarkRuntime_RSS(b *testing.B) {
	const n = 10
	h := newHarness(b)
	sb, sbCfg := h.sandbox(b, "rss", nil)
	h.stopRemove(b, h.run(b, sb, sbCfg, "warm", []string{"echo", "warm"}, nil))
	var total float64
	for i := 0; i < b.N; i++ {
		before := rss(b)
		var ids []string
		for j := 0; j < n; j++ {
			name := fmt.Sprintf("w%d-%d", i, j)
			ids = append(ids, h.run(b, sb, sbCfg, name, []string{"echo", "ready", ";", "sleep", "1h"}, nil))
			waitLog(b, filepath.Join(sbCfg.LogDirectory, name, "0.log"), "ready", 10*time.Second)
		}
		after := rss(b)
		total += float64(after-before) / n
		b.StopTimer()
		for _, id := range ids {
			h.stopRemove(b, id)
		}
		b.StartTimer()
	}
	b.ReportMetric(total/float64(b.N)/(1<<20), "RSS-MiB/workload")
}

// rss is the process's resident set after returning free memory to the OS.
func rss(b testing.TB) int64 {
	debug.FreeOSMemory()
	s, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		b.Skip("no /proc/self/statm")
	}
	f := strings.Fields(string(s))
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// BenchmarkCloseOnContextDone measures what WithCloseOnContextDone (the only
// way to stop a module that never calls the host) costs guest code: testbox
// touching 16 MiB byte by byte, with and without it.
func BenchmarkCloseOnContextDone(b *testing.B) {
	wasm, err := os.ReadFile(testboxWasm)
	if err != nil {
		b.Fatal(err)
	}
	cache, err := wazero.NewCompilationCacheWithDir(testCache)
	if err != nil {
		b.Fatal(err)
	}
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("on=%v", on), func(b *testing.B) {
			ctx := context.Background()
			r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache).WithCloseOnContextDone(on))
			defer r.Close(ctx)
			wasi_snapshot_preview1.MustInstantiate(ctx, r)
			mod, err := r.CompileModule(ctx, wasm)
			if err != nil {
				b.Fatal(err)
			}
			cfg := wazero.NewModuleConfig().WithName("").WithArgs("testbox", "oom", "16")
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m, err := r.InstantiateModule(ctx, mod, cfg)
				if err != nil && !strings.Contains(err.Error(), "exit_code(0)") {
					b.Fatal(err)
				}
				if m != nil {
					m.Close(ctx)
				}
			}
		})
	}
}

var _ = runtimeapi.ContainerState_CONTAINER_RUNNING
