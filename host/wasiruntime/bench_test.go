package wasiruntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/sys"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmlet/wasmlet/host/internal/meter"
	"github.com/wasmlet/wasmlet/internal/metertest"
)

// BenchmarkRuntime_StartContainer measures what the agent waits for when it
// starts a container of a cached image: CreateContainer + StartContainer
// through the CRI client until the first log line is in the log file.
func BenchmarkRuntime_StartContainer(b *testing.B) {
	h := newHarness(b)
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

// BenchmarkStop measures what each way of making a workload stoppable costs
// its code, in one run: testbox touching 16 MiB byte by byte (Go's runtime
// start included), run as the runtime runs it (_start under a cancellable
// context), with no stop mechanism ("none": the module could not be
// stopped), metered (the default: the meter's tick ends it), and with
// WithCloseOnContextDone (the fallback for modules the meter refuses).
// The machine is shared and loaded, so besides wall-clock ns/op it reports
// cpu-ns/op (metertest.Loop): the CPU time of the benchmark's own thread,
// where the guest runs.
func BenchmarkStop(b *testing.B) {
	ctx := context.Background()
	orig, err := os.ReadFile(testboxWasm)
	if err != nil {
		b.Fatal(err)
	}
	wz, err := newEngines(ctx, testCache)
	if err != nil {
		b.Fatal(err)
	}
	defer wz.close(ctx)
	metered, err := wz.meter.Rewrite(orig, "")
	if err != nil {
		b.Fatal(err)
	}
	modes := []struct {
		name    string
		rt      wazero.Runtime
		wasm    []byte
		metered bool
	}{
		{"none", wz.metered, orig, false}, // no checks compiled in, no probes
		{"meter", wz.metered, metered, true},
		{"close-on-done", wz.closing, orig, false},
	}
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			mod, err := m.rt.CompileModule(ctx, m.wasm)
			if err != nil {
				b.Fatal(err)
			}
			defer mod.Close(ctx)
			cfg := wazero.NewModuleConfig().WithName("").WithStartFunctions().WithArgs("testbox", "oom", "16")
			metertest.Loop(b, func() error {
				runCtx, cancel := context.WithCancel(ctx)
				defer cancel()
				callCtx := runCtx
				if m.metered {
					call := &meter.Call{}
					call.Arm(runCtx, 0)
					callCtx = meter.WithCall(runCtx, call)
				}
				inst, err := m.rt.InstantiateModule(callCtx, mod, cfg)
				if err != nil {
					return err
				}
				defer inst.Close(ctx)
				_, err = inst.ExportedFunction("_start").Call(callCtx)
				if exit := (*sys.ExitError)(nil); errors.As(err, &exit) && exit.ExitCode() == 0 {
					return nil
				}
				return err
			})
		})
	}
}

var _ = runtimeapi.ContainerState_CONTAINER_RUNNING
