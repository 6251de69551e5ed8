package pluginhost

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/wasmlet/wasmlet/abi"
)

// BenchmarkManager_ScanCold is the agent's start with the example plugin
// directory (build/plugins, from `make plugins`) and an empty compilation
// cache: the first Scan of a new Manager, which reads, meters, compiles and
// instantiates every plugin. Each round scans twice, loading one file after
// another (as scans did before they loaded in parallel) and GOMAXPROCS files
// at a time (as the agent does), in turns (reversed every other round), so
// the load of other jobs falls on both. It reports each one's wall time per
// scan (s/scan-loaders-<n>) and the process's CPU time per scan
// (cpu-s/scan-loaders-<n>: compiling is the same work either way).
//
//	go test -run '^$' -bench Manager_ScanCold -benchtime 3x ./host/internal/pluginhost/
func BenchmarkManager_ScanCold(b *testing.B) {
	dir := filepath.Join("..", "..", "..", "build", "plugins")
	manifests, _ := filepath.Glob(filepath.Join(dir, "*"+abi.ManifestSuffix))
	if len(manifests) == 0 {
		b.Fatal("no plugins in build/plugins: run make plugins")
	}
	loaders := []int{1, runtime.GOMAXPROCS(0)}
	wall := make([]time.Duration, len(loaders))
	cpu := make([]time.Duration, len(loaders))
	for i := 0; i < b.N; i++ {
		for k := range loaders {
			j := k
			if i%2 == 1 {
				j = len(loaders) - 1 - k
			}
			w, c := scanCold(b, dir, loaders[j], len(manifests))
			wall[j] += w
			cpu[j] += c
		}
	}
	for j, n := range loaders {
		b.ReportMetric(wall[j].Seconds()/float64(b.N), fmt.Sprintf("s/scan-loaders-%d", n))
		b.ReportMetric(cpu[j].Seconds()/float64(b.N), fmt.Sprintf("cpu-s/scan-loaders-%d", n))
	}
}

// scanCold scans dir with a new Manager loading n files at a time and an
// empty compilation cache, checks that its want plugins loaded, and returns
// the scan's wall and process CPU time.
func scanCold(b *testing.B, dir string, n, want int) (wall, cpu time.Duration) {
	ctx := context.Background()
	cache, err := os.MkdirTemp("", "wasmlet-scan-cache-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(cache)
	m, err := NewManager(Config{Dir: dir, CacheDir: cache, IdleTimeout: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(ctx)
	m.loaders = n
	runtime.GC()
	start, before := time.Now(), processCPU()
	m.Scan(ctx)
	wall, cpu = time.Since(start), processCPU()-before
	for _, in := range m.Plugins() {
		if in.State != StateLoaded {
			b.Fatalf("%s: %s", in.Path, in.Error)
		}
	}
	if got := len(m.Plugins()); got != want {
		b.Fatalf("%d plugins loaded, want %d", got, want)
	}
	return wall, cpu
}

// processCPU is the process's CPU time so far (user + system, every
// thread), or 0 if it cannot be read.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
