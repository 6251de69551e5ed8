package pluginhost

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/meter"
)

// extismImportModule is the module name of Extism's kernel imports; a bare
// module importing it is loaded as abi: extism.
const extismImportModule = "extism:host/env"

// extismPlugin runs a module built with an Extism PDK through the Extism
// go-sdk. The kinds are the same exports as in v1 (wasmlet_admit, …) with
// Extism's calling convention: no parameters, the JSON request as the
// plugin's input, the JSON response as its output, return code 0, and
// error_set for a plugin-level failure.
type extismPlugin struct {
	p    *Plugin
	pool *pool[*extismInstance]
	// compiled is compiled again from the module's bytes after reap
	// unloaded it: Extism holds them in its manifest, so a file changed on
	// disk since is not picked up here (that is the Manager's reload).
	compiled codeSlot[*extism.CompiledPlugin]
}

type extismInstance struct {
	meter.Call
	x         *extism.Plugin
	calls     int
	memDenied atomic.Bool
	out       guestOutput
}

func (i *extismInstance) callCount() int { return i.calls }
func (i *extismInstance) close()         { i.x.Close(context.Background()) }

func (e *engine) loadExtism(ctx context.Context, src *source, overrides map[string]string) (*Plugin, error) {
	p := &Plugin{e: e, src: src, manifest: src.manifest}
	p.manifest.ABI = abi.Extism
	p.manifest.Config = mergeConfig(src.manifest.Config, overrides)
	name := p.manifest.Name
	// Probe the exports with wazero (compiled through the shared cache) to
	// check the kinds before handing the module to Extism.
	r, err := e.runtime(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("plugin %q: %w", name, err)
	}
	probe, err := e.compile(ctx, r, src.wasm, src.sha256, DeadlineCloseOnDone)
	if err != nil {
		return nil, pluginError(name, ErrCompile, "%s: %v", src.wasmPath, err)
	}
	exports := probe.ExportedFunctions()
	probe.Close(ctx)
	var found []abi.Kind
	for _, k := range abi.Kinds {
		if f, ok := exports[abi.ExportForKind(k)]; ok {
			if len(f.ParamTypes()) != 0 || len(f.ResultTypes()) > 1 {
				return nil, pluginError(name, ErrMissingExport, "%s: Extism export %s must take no parameters", src.wasmPath, abi.ExportForKind(k))
			}
			found = append(found, k)
		}
	}
	if src.synthesized {
		if len(found) == 0 {
			return nil, pluginError(name, ErrMissingExport, "%s exports none of %s, %s, %s", src.wasmPath, abi.ExportAdmit, abi.ExportSource, abi.ExportHook)
		}
		p.manifest.Kinds = found
		if err := p.manifest.Validate(); err != nil {
			return nil, pluginError(name, ErrManifest, "derived from %s: %v", src.wasmPath, err)
		}
	}
	for _, k := range p.manifest.Kinds {
		if _, ok := exports[abi.ExportForKind(k)]; !ok {
			return nil, pluginError(name, ErrMissingExport, "manifest declares kind %s but %s does not export %s", k, src.wasmPath, abi.ExportForKind(k))
		}
	}
	f, checks := exports[abi.ExportCheckConfig]
	if checks && (len(f.ParamTypes()) != 0 || len(f.ResultTypes()) > 1) {
		return nil, pluginError(name, ErrMissingExport, "%s: Extism export %s must take no parameters", src.wasmPath, abi.ExportCheckConfig)
	}
	if err := p.init(); err != nil {
		return nil, err
	}
	wasm, mode, err := e.prepare(src)
	if err != nil {
		return nil, err
	}
	p.deadline = mode
	man := extism.Manifest{
		Wasm:         []extism.Wasm{extism.WasmData{Data: wasm, Name: "main"}},
		Config:       p.manifest.Config,
		AllowedHosts: p.manifest.Permissions.AllowedHosts,
	}
	if mode == DeadlineCloseOnDone {
		// Extism turns WithCloseOnContextDone on when it has a timeout.
		man.Timeout = uint64(p.timeout.Milliseconds())
	}
	meterTick := e.meter.Tick()
	tick := extism.NewHostFunctionWithStack(meter.ImportFunc, func(ctx context.Context, _ *extism.CurrentPlugin, stack []uint64) {
		meterTick(ctx, nil, stack)
	}, nil, nil)
	tick.SetNamespace(meter.ImportModule)
	rc := wazero.NewRuntimeConfigCompiler().WithCompilationCache(e.cache)
	compile := func(ctx context.Context) (*extism.CompiledPlugin, error) {
		defer e.compiling.lock(extismKey)()
		defer e.compiling.lock(moduleKey(src.sha256, mode))()
		cp, err := extism.NewCompiledPlugin(ctx, man, extism.PluginConfig{RuntimeConfig: rc, EnableWasi: true}, []extism.HostFunction{tick})
		if err != nil {
			return nil, pluginError(name, ErrCompile, "%s (extism): %v", src.wasmPath, err)
		}
		return cp, nil
	}
	cp, err := compile(ctx)
	if err != nil {
		return nil, err
	}
	x := &extismPlugin{p: p, compiled: codeSlot[*extism.CompiledPlugin]{p: p, compile: compile}}
	x.compiled.set(cp)
	p.reads = abi.ReadsAll
	x.pool = newPool(p, x.newInstance)
	p.ext = x
	inst, err := x.pool.get(ctx)
	if err != nil {
		p.Close(ctx)
		return nil, err
	}
	if checks {
		if err := x.checkConfig(ctx, inst); err != nil {
			x.pool.put(inst, false)
			p.Close(ctx)
			return nil, err
		}
	}
	x.pool.put(inst, true)
	p.stats.touch(mono())
	e.lastLoad.Store(int64(mono()))
	e.track(p, true)
	return p, nil
}

func mergeConfig(base, overrides map[string]string) map[string]string {
	if len(overrides) == 0 {
		return base
	}
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range overrides {
		out[k] = v
	}
	return out
}

func (x *extismPlugin) newInstance(ctx context.Context) (inst *extismInstance, err error) {
	inst = &extismInstance{out: guestOutput{p: x.p}}
	mc := wazero.NewModuleConfig().
		WithStdout(&inst.out).
		WithStderr(&inst.out).
		WithSysWalltime().
		WithSysNanotime().
		WithRandSource(rand.Reader)
	// Each memory (the Extism kernel's and the plugin's) is capped.
	alloc := experimental.MemoryAllocatorFunc(func(c, m uint64) experimental.LinearMemory {
		cm := &cappedMemory{max: x.p.memoryBytes(), denied: &inst.memDenied}
		return cm.allocate(c, m)
	})
	defer func() {
		if r := recover(); r != nil {
			err = pluginError(x.p.manifest.Name, ErrMemoryLimit, "instantiate: %v", r)
		}
	}()
	compiled, err := x.compiled.get(ctx)
	if err != nil {
		return nil, err
	}
	xi, err := compiled.Instance(experimental.WithMemoryAllocator(ctx, alloc), extism.PluginInstanceConfig{ModuleConfig: mc})
	if err != nil {
		return nil, pluginError(x.p.manifest.Name, ErrTrap, "instantiate (extism): %v", err)
	}
	xi.SetLogger(func(l extism.LogLevel, msg string) {
		x.p.guestLog(extismLevel(l), "log", []byte(msg))
	})
	inst.x = xi
	return inst, nil
}

func extismLevel(l extism.LogLevel) abi.LogLevel {
	switch l {
	case extism.LogLevelTrace, extism.LogLevelDebug:
		return abi.LogDebug
	case extism.LogLevelWarn:
		return abi.LogWarn
	case extism.LogLevelError:
		return abi.LogError
	}
	return abi.LogInfo
}

func (x *extismPlugin) call(ctx context.Context, k abi.Kind, input []byte, resp any, start time.Duration) ([]byte, error) {
	inst, err := x.pool.get(ctx)
	if err != nil {
		return nil, err
	}
	inst.calls++
	inst.out.reset()
	inst.Reset()
	if x.p.deadline == DeadlineMeter {
		inst.Arm(ctx, start+x.p.timeout)
		ctx = context.WithValue(ctx, callKey{}, inst)
	}
	out, err := x.invoke(ctx, inst, k, input)
	inst.Disarm()
	if err == nil && resp != nil {
		err = x.p.decode(k, out, resp)
	}
	x.pool.put(inst, err == nil)
	return out, err
}

// checkConfig calls the module's wasmlet_check_config in Extism's
// convention (ABI v1 §2.5 and §7): no input, an empty output accepts the
// config, an output is the refusal's message; error_set, a trap or the
// deadline fail the load as such.
func (x *extismPlugin) checkConfig(ctx context.Context, inst *extismInstance) error {
	inst.out.reset()
	inst.Reset()
	if x.p.deadline == DeadlineMeter {
		inst.Arm(ctx, mono()+x.p.timeout)
		ctx = context.WithValue(ctx, callKey{}, inst)
	}
	out, err := x.invokeExport(ctx, inst, abi.ExportCheckConfig, nil)
	inst.Disarm()
	if err != nil {
		return err
	}
	if len(out) == 0 {
		return nil
	}
	return refused(x.p.manifest.Name, out)
}

func (x *extismPlugin) invoke(ctx context.Context, inst *extismInstance, k abi.Kind, input []byte) ([]byte, error) {
	return x.invokeExport(ctx, inst, abi.ExportForKind(k), input)
}

// invokeExport calls one export in Extism's convention and classifies its
// failure.
func (x *extismPlugin) invokeExport(ctx context.Context, inst *extismInstance, export string, input []byte) ([]byte, error) {
	name := x.p.manifest.Name
	rc, out, err := inst.x.CallWithContext(ctx, export, input)
	var exit *sys.ExitError
	switch {
	case err == nil && rc == 0:
		return append([]byte(nil), out...), nil
	case inst.memDenied.Load():
		return nil, pluginError(name, ErrMemoryLimit, "%s: memory cap of %d pages reached: %v%s", export, x.p.memoryPages, err, inst.out.tailNote())
	case inst.Stopped(), errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeDeadlineExceeded:
		return nil, pluginError(name, ErrTimeout, "%s: stopped after %s", export, x.p.timeout)
	case errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeContextCanceled:
		return nil, fmt.Errorf("plugin %q: %s: %w", name, export, context.Canceled)
	case err != nil && !strings.Contains(err.Error(), "wasm error") && !errors.As(err, &exit):
		// error_set: the plugin reported a failure.
		return nil, pluginError(name, ErrPluginFailed, "%s: %v", export, err)
	case err != nil:
		return nil, pluginError(name, ErrTrap, "%s: %s%s", export, firstLine(err), inst.out.tailNote())
	}
	return nil, pluginError(name, ErrPluginFailed, "%s returned code %d", export, rc)
}

func (x *extismPlugin) close(ctx context.Context) {
	x.pool.close()
	x.compiled.close(ctx)
}
