package wasiruntime

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wasmlet/wasmlet/host/internal/meter"
	"github.com/wasmlet/wasmlet/host/wasiruntime/image"
)

// compiled is one image compiled for the runtime, shared by every container
// of that image.
type compiled struct {
	done     chan struct{}
	mod      wazero.CompiledModule
	rt       wazero.Runtime // where mod was compiled: engines.metered or engines.closing
	metered  bool           // mod is metered: run it under a meter.Call
	minBytes uint64         // the module's initial linear memory
	err      error
}

// moduleCache compiles each image once (the wazero compilation cache on disk
// makes a recompile after a restart cheap) and keeps the result in memory.
type moduleCache struct {
	wz      *engines
	log     hclog.Logger
	observe prometheus.Observer // compile durations; may be nil

	mu sync.Mutex
	m  map[string]*compiled // by image ID
}

func newModuleCache(wz *engines, log hclog.Logger, compile prometheus.Observer) *moduleCache {
	return &moduleCache{wz: wz, log: log, observe: compile, m: map[string]*compiled{}}
}

// get returns the compiled module of img, compiling it the first time; a
// module that is not a WASI command is an error naming the image.
func (mc *moduleCache) get(ctx context.Context, img image.Image, name string) (*compiled, error) {
	mc.mu.Lock()
	c, ok := mc.m[img.ID]
	if !ok {
		c = &compiled{done: make(chan struct{})}
		mc.m[img.ID] = c
		mc.mu.Unlock()
		c.err = mc.compile(c, img, name)
		if c.err != nil {
			mc.mu.Lock()
			delete(mc.m, img.ID) // let a fixed image be retried
			mc.mu.Unlock()
		}
		close(c.done)
	} else {
		mc.mu.Unlock()
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return c, c.err
}

// compile meters and compiles an image into c; a module the meter cannot
// rewrite is compiled as it is, for the close-on-context-done runtime.
func (mc *moduleCache) compile(c *compiled, img image.Image, name string) error {
	b, err := os.ReadFile(img.Path)
	if err != nil {
		return fmt.Errorf("image %s: %w", name, err)
	}
	ctx := context.Background()
	start := time.Now()
	c.rt = mc.wz.closing
	if m, err := mc.wz.meter.Rewrite(b, strings.TrimPrefix(img.ID, "sha256:")); err == nil {
		b, c.rt, c.metered = m, mc.wz.metered, true
	} else {
		mc.log.Info("module not metered: it runs with close-on-context-done (slower)", "image", name, "id", img.ID, "reason", err)
	}
	mod, err := c.rt.CompileModule(ctx, b)
	if mc.observe != nil {
		mc.observe.Observe(time.Since(start).Seconds())
	}
	if err != nil {
		return fmt.Errorf("image %s (%s) is not a valid Wasm module: %w", name, img.ID, err)
	}
	if err := checkWASICommand(mod, c.metered); err != nil {
		mod.Close(ctx)
		return fmt.Errorf("image %s (%s) is not a WASI command module: %w", name, img.ID, err)
	}
	c.mod = mod
	if m, ok := mod.ExportedMemories()["memory"]; ok {
		c.minBytes = uint64(m.Min()) << 16
	}
	mc.log.Debug("compiled image", "image", name, "id", img.ID, "metered", c.metered, "duration", time.Since(start))
	return nil
}

// forget drops the compiled module of an image ID.
func (mc *moduleCache) forget(id string) {
	mc.mu.Lock()
	c, ok := mc.m[id]
	delete(mc.m, id)
	mc.mu.Unlock()
	if ok {
		<-c.done
		if c.mod != nil {
			c.mod.Close(context.Background())
		}
	}
}

// checkWASICommand accepts a module that exports _start and memory and
// imports nothing but WASI preview 1 functions (and, if metered, the
// meter's tick, which the rewrite added).
func checkWASICommand(mod wazero.CompiledModule, metered bool) error {
	if _, ok := mod.ExportedFunctions()["_start"]; !ok {
		return fmt.Errorf("it exports no _start function (a WASI reactor or a library, not a command)")
	}
	if _, ok := mod.ExportedMemories()["memory"]; !ok {
		return fmt.Errorf("it exports no memory")
	}
	var bad []string
	for _, f := range mod.ImportedFunctions() {
		m, n, _ := f.Import()
		if m != wasi_snapshot_preview1.ModuleName && !(metered && m == meter.ImportModule) {
			bad = append(bad, m+"."+n)
		}
	}
	for _, m := range mod.ImportedMemories() {
		mn, n, _ := m.Import()
		bad = append(bad, mn+"."+n+" (memory)")
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		if len(bad) > 5 {
			bad = append(bad[:5], "…")
		}
		return fmt.Errorf("it imports %s, which are not WASI preview 1", strings.Join(bad, ", "))
	}
	return nil
}

// memCap is a wazero memory allocator that refuses to grow a module's linear
// memory past a limit and remembers that it did: that is how
// resources.limits.memory becomes OOMKilled.
type memCap struct {
	limit uint64
	hit   atomic.Bool
}

// Allocate implements experimental.MemoryAllocator.
func (a *memCap) Allocate(capHint, _ uint64) experimental.LinearMemory {
	if capHint > a.limit {
		capHint = a.limit
	}
	return &cappedMemory{a: a, buf: make([]byte, 0, capHint)}
}

type cappedMemory struct {
	a   *memCap
	buf []byte
}

// Reallocate implements experimental.LinearMemory.
func (m *cappedMemory) Reallocate(size uint64) []byte {
	if size > m.a.limit {
		m.a.hit.Store(true)
		return nil
	}
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
		return m.buf
	}
	// append grows the backing array geometrically and zeroes the new tail.
	m.buf = append(m.buf[:cap(m.buf)], make([]byte, size-uint64(cap(m.buf)))...)[:size]
	return m.buf
}

// Free implements experimental.LinearMemory.
func (m *cappedMemory) Free() { m.buf = nil }
