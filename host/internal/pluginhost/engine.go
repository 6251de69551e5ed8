package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/meter"
)

// engine owns the wazero runtimes of one host (one per deadline mode that is
// in use, all sharing one compilation cache) and the host module.
type engine struct {
	cfg       Config
	cache     wazero.CompilationCache
	meter     meter.Config // rewrites modules (cached in CacheDir); its tick stops calls
	compiling compiling

	mu       sync.Mutex
	runtimes map[bool]wazero.Runtime // key: WithCloseOnContextDone
	plugins  map[*Plugin]struct{}    // the loaded v1 plugins, for the reaper
	lastLoad atomic.Int64            // mono() when the last load ended
	stop     chan struct{}           // closed by close: ends the reaper
}

func newEngine(ctx context.Context, cfg Config) (*engine, error) {
	e := &engine{cfg: cfg, runtimes: map[bool]wazero.Runtime{}, plugins: map[*Plugin]struct{}{}, stop: make(chan struct{})}
	e.meter = meter.Config{CacheDir: cfg.CacheDir, Call: meterCall}
	if cfg.CacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("compilation cache %s: %w", cfg.CacheDir, err)
		}
		e.cache = c
	} else {
		e.cache = wazero.NewCompilationCache()
	}
	if cfg.IdleTimeout > 0 {
		go e.reapIdle(cfg.IdleTimeout)
	}
	return e, nil
}

// reapIdle makes the plugins idle for longer than idle give back their
// instances and compiled code, checking every idle/4 until close.
func (e *engine) reapIdle(idle time.Duration) {
	t := time.NewTicker(max(idle/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
		}
		// A directory being loaded (at start, one plugin after another,
		// seconds each with a cold cache) is not idle: its first plugins
		// would be unloaded before the agent has asked them anything.
		if mono()-time.Duration(e.lastLoad.Load()) < idle {
			continue
		}
		e.mu.Lock()
		ps := make([]*Plugin, 0, len(e.plugins))
		for p := range e.plugins {
			ps = append(ps, p)
		}
		e.mu.Unlock()
		unloaded := false
		for _, p := range ps {
			unloaded = p.reap() || unloaded
		}
		if unloaded {
			// wazero unmaps compiled code from a finalizer, and the module's
			// decoded form is garbage: collect now and give the pages back
			// rather than when the next GC and the scavenger get to it.
			debug.FreeOSMemory()
		}
	}
}

// track adds p to the plugins the reaper looks at, or removes it.
func (e *engine) track(p *Plugin, on bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if on {
		e.plugins[p] = struct{}{}
	} else {
		delete(e.plugins, p)
	}
}

// runtime returns the runtime for a deadline mechanism, creating it (with
// WASI and the wasmlet host module) on first use.
func (e *engine) runtime(ctx context.Context, closeOnDone bool) (wazero.Runtime, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.runtimes[closeOnDone]; ok {
		return r, nil
	}
	rc := wazero.NewRuntimeConfigCompiler().
		WithCompilationCache(e.cache).
		WithCloseOnContextDone(closeOnDone)
	r := wazero.NewRuntimeWithConfig(ctx, rc)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, r); err != nil {
		r.Close(ctx)
		return nil, fmt.Errorf("instantiate WASI: %w", err)
	}
	if err := instantiateHostModule(ctx, r); err != nil {
		r.Close(ctx)
		return nil, fmt.Errorf("instantiate host module: %w", err)
	}
	if err := e.meter.Instantiate(ctx, r); err != nil {
		r.Close(ctx)
		return nil, fmt.Errorf("instantiate meter module: %w", err)
	}
	e.runtimes[closeOnDone] = r
	return r, nil
}

func (e *engine) close(ctx context.Context) {
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-e.stop:
	default:
		close(e.stop)
	}
	for k, r := range e.runtimes {
		r.Close(ctx)
		delete(e.runtimes, k)
	}
	e.cache.Close(ctx)
}

// load reads, verifies, compiles and checks one plugin; resolver resolves
// a reference manifest.
func (e *engine) load(ctx context.Context, path string, overrides map[string]string, resolver Resolver) (*Plugin, error) {
	src, err := readSource(ctx, path, resolver)
	if err != nil {
		return nil, err
	}
	name := src.manifest.Name
	if src.manifest.ABI == abi.Extism || (src.synthesized && importsExtism(src.wasm)) {
		return e.loadExtism(ctx, src, overrides)
	}
	p := &Plugin{e: e, src: src, manifest: src.manifest}
	p.compiled = codeSlot[wazero.CompiledModule]{p: p, compile: p.recompile}
	p.manifest.Config = mergeConfig(src.manifest.Config, overrides)
	wasm, mode, err := e.prepare(src)
	if err != nil {
		return nil, err
	}
	p.deadline = mode
	r, err := e.runtime(ctx, mode == DeadlineCloseOnDone)
	if err != nil {
		return nil, fmt.Errorf("plugin %q: %w", name, err)
	}
	p.rt = r
	compiled, err := e.compile(ctx, r, wasm, src.sha256, mode)
	if err != nil {
		return nil, pluginError(name, ErrCompile, "%s: %v", src.wasmPath, err)
	}
	p.compiled.set(compiled)
	if err := p.checkV1(compiled); err != nil {
		compiled.Close(ctx)
		return nil, err
	}
	if err := p.init(); err != nil {
		compiled.Close(ctx)
		return nil, err
	}
	// Instantiate one instance now: a module that traps in _initialize or
	// needs more memory than its cap fails at load, not at its first call.
	inst, err := p.pool.get(ctx)
	if err != nil {
		p.Close(ctx)
		return nil, err
	}
	if p.reads, err = inst.reads(ctx); err == nil {
		err = inst.checkConfig(ctx)
	}
	if err != nil {
		p.pool.put(inst, false)
		p.Close(ctx)
		return nil, err
	}
	p.pool.put(inst, true)
	// The module's bytes are not kept: a reload after the plugin was idle
	// reads them again (and checks their sha256).
	src.wasm = nil
	p.stats.touch(mono())
	e.lastLoad.Store(int64(mono()))
	e.track(p, true)
	return p, nil
}

// prepare picks the deadline mechanism for a module and meters it when that
// is the one.
func (e *engine) prepare(src *source) ([]byte, DeadlineMode, error) {
	mode := e.cfg.Deadline
	if mode != DeadlineAuto && mode != DeadlineMeter {
		return src.wasm, mode, nil
	}
	metered, err := e.meter.Rewrite(src.wasm, src.sha256)
	switch {
	case err == nil:
		return metered, DeadlineMeter, nil
	case mode == DeadlineMeter:
		return nil, "", pluginError(src.manifest.Name, ErrCompile, "%s: cannot instrument for deadlines: %v", src.wasmPath, err)
	}
	e.cfg.Logger.Debug("module not metered, using close-on-context-done", "plugin", src.manifest.Name, "file", src.wasmPath, "reason", err)
	return src.wasm, DeadlineCloseOnDone, nil
}

// checkV1 verifies the version marker, the exports' signatures, and derives
// the kinds of a bare module.
func (p *Plugin) checkV1(compiled wazero.CompiledModule) error {
	name, file := p.manifest.Name, p.src.wasmPath
	exports := compiled.ExportedFunctions()
	var other []string
	for n := range exports {
		if strings.HasPrefix(n, abi.ExportVersionPrefix) && n != abi.ExportVersionV1 {
			other = append(other, n)
		}
	}
	marker, ok := exports[abi.ExportVersionV1]
	if !ok {
		if len(other) > 0 {
			return pluginError(name, ErrABIVersion, "%s exports %s; this host speaks %s", file, strings.Join(other, ", "), abi.ExportVersionV1)
		}
		return pluginError(name, ErrABIVersion, "%s has no version marker export %s", file, abi.ExportVersionV1)
	}
	if !sig(marker, nil, nil) {
		return pluginError(name, ErrABIVersion, "%s: %s must take and return nothing", file, abi.ExportVersionV1)
	}
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	if f, ok := exports[abi.ExportAlloc]; !ok {
		return pluginError(name, ErrMissingExport, "%s does not export %s", file, abi.ExportAlloc)
	} else if !sig(f, []api.ValueType{i32}, []api.ValueType{i32}) {
		return pluginError(name, ErrMissingExport, "%s: %s must be (i32) -> i32", file, abi.ExportAlloc)
	}
	if f, ok := exports[abi.ExportReads]; ok && !sig(f, nil, []api.ValueType{i32}) {
		return pluginError(name, ErrMissingExport, "%s: %s must be () -> i32", file, abi.ExportReads)
	}
	if f, ok := exports[abi.ExportCheckConfig]; ok && !sig(f, nil, []api.ValueType{i64}) {
		return pluginError(name, ErrMissingExport, "%s: %s must be () -> i64", file, abi.ExportCheckConfig)
	}
	if f, ok := exports[abi.ExportInitialize]; ok && !sig(f, nil, nil) {
		return pluginError(name, ErrMissingExport, "%s: %s must take and return nothing", file, abi.ExportInitialize)
	}
	var found []abi.Kind
	for _, k := range abi.Kinds {
		f, ok := exports[abi.ExportForKind(k)]
		if !ok {
			continue
		}
		if !sig(f, []api.ValueType{i32, i32}, []api.ValueType{i64}) {
			return pluginError(name, ErrMissingExport, "%s: %s must be (i32, i32) -> i64", file, abi.ExportForKind(k))
		}
		found = append(found, k)
	}
	if p.src.synthesized {
		if len(found) == 0 {
			return pluginError(name, ErrMissingExport, "%s exports none of %s, %s, %s", file, abi.ExportAdmit, abi.ExportSource, abi.ExportHook)
		}
		p.manifest.ABI = abi.V1
		p.manifest.Kinds = found
		if err := p.manifest.Validate(); err != nil {
			return pluginError(name, ErrManifest, "derived from %s: %v", file, err)
		}
		return nil
	}
	for _, k := range p.manifest.Kinds {
		if _, ok := exports[abi.ExportForKind(k)]; !ok {
			return pluginError(name, ErrMissingExport, "manifest declares kind %s but %s does not export %s", k, file, abi.ExportForKind(k))
		}
	}
	return nil
}

// meterCall finds the meter.Call of the instance a tick runs for.
func meterCall(ctx context.Context) *meter.Call {
	switch v := ctx.Value(callKey{}).(type) {
	case *instance:
		return &v.Call
	case *extismInstance:
		return &v.Call
	}
	return nil
}

func sig(f api.FunctionDefinition, params, results []api.ValueType) bool {
	return string(f.ParamTypes()) == string(params) && string(f.ResultTypes()) == string(results)
}

// importsExtism reports whether a module imports Extism's kernel. It is a
// cheap byte search: a false positive only routes the module to the Extism
// loader, which then fails with a clear error.
func importsExtism(wasm []byte) bool {
	return strings.Contains(string(wasm), extismImportModule)
}

var errNoMemory = errors.New("module exports no memory")
