package pluginhost

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmlet/wasmlet/abi"
)

// BenchmarkPluginMemory is the per-plugin memory table of the example
// plugin directory (build/plugins, from `make plugins`): for each plugin,
// loaded on its own into a runtime with a warm compilation cache and called
// once per kind with a 4 KB pod,
//
//   - code-KiB: its compiled code, the growth of the process's resident
//     anonymous executable mappings;
//
//   - heap-KiB: the Go heap it holds (wazero's form of the module, the
//     instance's structures; linear memories are mapped outside the heap);
//
//   - instances: the instances it keeps (idle) after the call;
//
//   - linear-KiB, resident-KiB: their linear memory, and how much of it is
//     resident;
//
//   - after-idle-KiB: the code and heap still held once it gave them back
//     as an idle plugin does (Config.IdleTimeout).
//
//     go test -run '^$' -bench PluginMemory -benchtime 1x ./host/internal/pluginhost/
func BenchmarkPluginMemory(b *testing.B) {
	manifests, _ := filepath.Glob(filepath.Join("..", "..", "..", "build", "plugins", "*"+abi.ManifestSuffix))
	if len(manifests) == 0 {
		b.Fatal("no plugins in build/plugins: run make plugins")
	}
	ctx := context.Background()
	e, err := newEngine(ctx, Config{CacheDir: testCacheDir(b), IdleTimeout: -1}.withDefaults())
	if err != nil {
		b.Fatal(err)
	}
	defer e.close(ctx)
	if _, err := e.runtime(ctx, false); err != nil { // shared by every plugin: not counted
		b.Fatal(err)
	}
	pod := pod4K()
	var areq abi.AdmitRequest
	if err := json.Unmarshal(pod, &areq); err != nil {
		b.Fatal(err)
	}
	for _, mf := range manifests {
		name := strings.TrimSuffix(filepath.Base(mf), abi.ManifestSuffix)
		b.Run(name, func(b *testing.B) {
			var code, heap, idleCode, idleHeap int64
			var m Memory
			for i := 0; i < b.N; i++ {
				code0, heap0 := execRSS(b), heapInUse()
				p, err := e.load(ctx, mf, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				for _, k := range p.Manifest().Kinds {
					switch k { // answers (and failures: url-source has no URL) do not matter here
					case abi.KindAdmission:
						_, _ = p.Admit(ctx, &areq)
					case abi.KindHook:
						_, _ = p.Hook(ctx, &abi.HookRequest{Point: abi.HookPreCreate, Pod: areq.Pod, Container: []byte(`{"name":"web"}`)})
					case abi.KindSource:
						_, _ = p.Source(ctx, &abi.SourceRequest{Seq: 1})
					}
				}
				m = p.Memory()
				code, heap = execRSS(b)-code0, heapInUse()-heap0
				p.stats.touch(0)
				p.e.cfg.IdleTimeout = 1 // what the reaper does to an idle plugin
				p.reap()
				p.e.cfg.IdleTimeout = -1
				idleCode, idleHeap = settled(b, code0), heapInUse()-heap0
				p.Close(ctx)
				runtime.GC() // wazero unmaps code from a finalizer
			}
			b.ReportMetric(float64(code)/1024, "code-KiB")
			b.ReportMetric(float64(heap)/1024, "heap-KiB")
			b.ReportMetric(float64(m.Idle), "instances")
			b.ReportMetric(float64(m.LinearBytes)/1024, "linear-KiB")
			b.ReportMetric(float64(m.ResidentBytes)/1024, "resident-KiB")
			b.ReportMetric(float64(idleCode+idleHeap)/1024, "after-idle-KiB")
		})
	}
}

// execRSS sums the resident size of the process's anonymous executable
// mappings (where wazero puts compiled code), from /proc/self/smaps.
func execRSS(tb testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		tb.Fatal(err)
	}
	var total int64
	exec := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && len(f[1]) == 4:
			exec = f[1][2] == 'x' && f[4] == "0" && len(f) == 5 // anonymous, no path
		case exec && len(f) == 3 && f[0] == "Rss:":
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			total += kb * 1024
		}
	}
	return total
}

// settled is execRSS minus base once wazero's finalizers, which unmap
// unloaded code after a collection, have run (or after a second).
func settled(tb testing.TB, base int64) int64 {
	d := execRSS(tb) - base
	for i := 0; i < 100 && d > 0; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		d = execRSS(tb) - base
	}
	return d
}

// heapInUse is the Go heap in use after a collection.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}
