package pluginhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"

	"github.com/tetratelabs/wazero"
)

// reap gives back an idle plugin's memory, either ABI: once no call has
// started for Config.IdleTimeout (when positive), its idle instances are
// closed and, when no call holds an instance, its compiled code too. The
// next call compiles the code again (codeSlot.get) and instantiates afresh.
// It reports whether the code was unloaded.
func (p *Plugin) reap() bool {
	idle := p.e.cfg.IdleTimeout
	if idle <= 0 || p.closed.Load() || mono()-p.stats.lastCall() < idle {
		return false
	}
	if p.ext != nil {
		return p.ext.compiled.unload(p.ext.pool.drain)
	}
	return p.compiled.unload(p.pool.drain)
}

// recompile compiles a v1 module again after reap unloaded it: the module
// file is read again and must still have the sha256 it was loaded with (a
// changed file is the Manager's business: it loads the new version as a
// plugin of its own), then metered and compiled, which the compilation
// cache makes a lookup.
func (p *Plugin) recompile(ctx context.Context) (wazero.CompiledModule, error) {
	name, path := p.manifest.Name, p.src.wasmPath
	wasm, err := os.ReadFile(path)
	if err != nil {
		return nil, pluginError(name, ErrCompile, "reload %s: %v", path, err)
	}
	sum := sha256.Sum256(wasm)
	if got := hex.EncodeToString(sum[:]); got != p.src.sha256 {
		return nil, pluginError(name, ErrSHA256, "reload %s: sha256 is now %s, was %s when loaded", path, got, p.src.sha256)
	}
	if p.deadline == DeadlineMeter {
		if wasm, err = p.e.meter.Rewrite(wasm, p.src.sha256); err != nil {
			return nil, pluginError(name, ErrCompile, "reload %s: %v", path, err)
		}
	}
	compiled, err := p.e.compile(ctx, p.rt, wasm, p.src.sha256, p.deadline)
	if err != nil {
		return nil, pluginError(name, ErrCompile, "reload %s: %v", path, err)
	}
	return compiled, nil
}

// definitions returns the compiled module for its definitions (exports,
// imports), reloading it if needed; nil for an Extism plugin or when the
// reload fails.
func (p *Plugin) definitions() wazero.CompiledModule {
	if p.pool == nil {
		return nil
	}
	c, err := p.compiled.get(context.Background())
	if err != nil {
		return nil
	}
	return c
}

// Memory is what a plugin holds at a moment.
type Memory struct {
	// CodeLoaded is true while the compiled code is loaded.
	CodeLoaded bool
	// Idle counts the instances waiting for a call; calls in flight hold
	// others.
	Idle int
	// LinearBytes is the size of the idle instances' linear memories, and
	// ResidentBytes how much of it is resident (its size where that cannot
	// be told).
	LinearBytes, ResidentBytes uint64
}

// Memory reports what the plugin holds now (an Extism plugin reports
// CodeLoaded and Idle: its memories are the Extism kernel's).
func (p *Plugin) Memory() Memory {
	if p.ext != nil {
		p.ext.pool.mu.Lock()
		defer p.ext.pool.mu.Unlock()
		return Memory{CodeLoaded: p.codeLoaded.Load(), Idle: len(p.ext.pool.idle)}
	}
	if p.pool == nil {
		return Memory{CodeLoaded: true}
	}
	m := Memory{CodeLoaded: p.codeLoaded.Load()}
	p.pool.mu.Lock()
	defer p.pool.mu.Unlock()
	m.Idle = len(p.pool.idle)
	for _, inst := range p.pool.idle {
		m.LinearBytes += uint64(inst.mem.Size())
		m.ResidentBytes += inst.memory.resident(uint64(inst.mem.Size()))
	}
	return m
}
