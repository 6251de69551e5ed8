package pluginhost

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/meter"
)

// Plugin is one loaded plugin. Its methods are safe for concurrent use.
type Plugin struct {
	e         *engine
	src       *source
	manifest  abi.Manifest // validated, defaults filled, config overrides applied
	ownEngine bool

	rt          wazero.Runtime
	compiled    codeSlot[wazero.CompiledModule] // abi: v1
	codeLoaded  atomic.Bool                     // the compiled code is loaded (either ABI), for Memory
	deadline    DeadlineMode
	timeout     time.Duration
	memoryPages uint32
	reads       abi.Reads        // the admission request fields the module reads
	pool        *pool[*instance] // abi: v1
	ext         *extismPlugin    // abi: extism
	stats       *stats
	log         hclog.Logger
	logBudget   logBudget

	closeOnce sync.Once
	closed    atomic.Bool
}

// init fills the settings shared by both ABIs once the manifest is final.
func (p *Plugin) init() error {
	m := &p.manifest
	p.timeout = m.Permissions.Timeout.Duration
	if p.timeout <= 0 {
		p.timeout = p.e.cfg.Timeout
	}
	p.memoryPages = m.Permissions.MemoryPages
	if p.memoryPages == 0 {
		p.memoryPages = p.e.cfg.MemoryPages
	}
	p.log = p.e.cfg.Logger.Named("plugin." + m.Name)
	p.logBudget = logBudget{max: p.e.cfg.GuestLogMax}
	p.stats = newStats()
	if compiled, ok := p.compiled.peek(); ok {
		p.pool = newPool(p, p.newInstance)
		for n, md := range compiled.ExportedMemories() {
			if md.Min() > p.memoryPages {
				return pluginError(m.Name, ErrMemoryLimit, "memory %q needs %d pages at start, cap is %d", n, md.Min(), p.memoryPages)
			}
		}
	}
	return nil
}

func (p *Plugin) memoryBytes() uint64 { return uint64(p.memoryPages) * 65536 }

// Name is the plugin's name.
func (p *Plugin) Name() string { return p.manifest.Name }

// Manifest returns the effective manifest: validated, defaults filled, a
// bare module's derived fields, config overrides applied.
func (p *Plugin) Manifest() abi.Manifest { return p.manifest }

// Path is the file the plugin was loaded from (its manifest, or the .wasm).
func (p *Plugin) Path() string {
	if p.src.manifestPath != "" {
		return p.src.manifestPath
	}
	return p.src.wasmPath
}

// WasmPath is the module file.
func (p *Plugin) WasmPath() string { return p.src.wasmPath }

// SHA256 is the hex sha256 of the module file.
func (p *Plugin) SHA256() string { return p.src.sha256 }

// Reads is what the module declared it reads of an admission request
// beyond the pod (abi.ExportReads); abi.ReadsAll when it declared nothing.
func (p *Plugin) Reads() abi.Reads { return p.reads }

// Timeout is the effective per-call deadline.
func (p *Plugin) Timeout() time.Duration { return p.timeout }

// DeadlineMode is the deadline mechanism in force for this plugin.
func (p *Plugin) DeadlineMode() DeadlineMode { return p.deadline }

// Function describes a function a module exports or imports, in
// WebAssembly's own terms.
type Function struct {
	// Module is the module an import comes from; empty for an export.
	Module string
	// Name is the export's name, or the import's name within Module.
	Name string
	// Params and Results are the value types: "i32", "i64", "f32", "f64",
	// "v128", "externref" or "funcref".
	Params, Results []string
}

// function describes d under the name name (an export's name, or an
// import's within module).
func function(module, name string, d api.FunctionDefinition) Function {
	types := func(ts []api.ValueType) []string {
		out := make([]string, len(ts))
		for i, t := range ts {
			out[i] = api.ValueTypeName(t)
		}
		return out
	}
	return Function{Module: module, Name: name, Params: types(d.ParamTypes()), Results: types(d.ResultTypes())}
}

// Exports lists the module's exported functions, sorted by name (a function
// exported under two names is listed under each); nil for an Extism plugin.
func (p *Plugin) Exports() []Function {
	compiled := p.definitions()
	if compiled == nil {
		return nil
	}
	var out []Function
	for name, d := range compiled.ExportedFunctions() {
		out = append(out, function("", name, d))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Imports lists the module's imported functions in file order (the deadline
// instrumentation's own import excluded); nil for an Extism plugin.
func (p *Plugin) Imports() []Function {
	compiled := p.definitions()
	if compiled == nil {
		return nil
	}
	var out []Function
	for _, d := range compiled.ImportedFunctions() {
		mod, name, _ := d.Import()
		if mod == meter.ImportModule {
			continue
		}
		out = append(out, function(mod, name, d))
	}
	return out
}

// Close releases the plugin's instances and compiled code. Calls in flight
// finish; later calls fail with ErrClosed.
func (p *Plugin) Close(ctx context.Context) error {
	p.closeOnce.Do(func() {
		p.closed.Store(true)
		p.e.track(p, false)
		if p.pool != nil {
			p.pool.close()
		}
		if p.ext != nil {
			p.ext.close(ctx)
		}
		p.compiled.close(ctx)
		if p.ownEngine {
			p.e.close(ctx)
		}
	})
	return nil
}

// Call runs a kind's export with raw JSON input and returns the raw result,
// copied out of guest memory. It is the path Admit, Source and Hook use, and
// the one benchmarks measure.
func (p *Plugin) Call(ctx context.Context, k abi.Kind, input []byte) ([]byte, error) {
	return p.call(ctx, k, input, nil)
}

// call runs one call and, when resp is not nil, decodes the result into it
// before the instance goes back to the pool: an instance that answered
// garbage is discarded like one that trapped.
func (p *Plugin) call(ctx context.Context, k abi.Kind, input []byte, resp any) ([]byte, error) {
	if p.closed.Load() {
		return nil, fmt.Errorf("plugin %q: %w", p.manifest.Name, ErrClosed)
	}
	if !p.manifest.HasKind(k) {
		return nil, pluginError(p.manifest.Name, ErrNoKind, "%s (it implements %v)", k, p.manifest.Kinds)
	}
	start := mono()
	var out []byte
	var err error
	if p.ext != nil {
		out, err = p.ext.call(ctx, k, input, resp, start)
	} else {
		out, err = p.callV1(ctx, k, input, resp, start)
	}
	p.stats.record(start, mono(), err)
	p.reportLogDrops()
	return out, err
}

func (p *Plugin) callV1(ctx context.Context, k abi.Kind, input []byte, resp any, start time.Duration) ([]byte, error) {
	inst, err := p.pool.get(ctx)
	if err != nil {
		return nil, err
	}
	if inst.calls == 0 {
		// A fresh instance: the deadline covers the guest's code, not the
		// instantiation (nor the reload of an idle plugin's code), which
		// have their own limits.
		start = mono()
	}
	out, err := inst.call(ctx, k, input, start)
	if err == nil && resp != nil {
		err = p.decode(k, out, resp)
	}
	p.pool.put(inst, err == nil)
	return out, err
}

func (p *Plugin) decode(k abi.Kind, out []byte, resp any) error {
	if err := decodeResult(out, resp); err != nil {
		return pluginError(p.manifest.Name, ErrBadResult, "%s result: %v", k, err)
	}
	return nil
}

// Admit asks an admission plugin about a pod. A non-nil error means the call
// failed (trap, timeout, bad result, or the response's Error field set — the
// response is then returned too); the caller applies the failure policy.
func (p *Plugin) Admit(ctx context.Context, req *abi.AdmitRequest) (*abi.AdmitResponse, error) {
	resp := &abi.AdmitResponse{}
	return ask(ctx, p, abi.KindAdmission, req, resp, &resp.Error)
}

// Source polls a source plugin. Errors as for Admit.
func (p *Plugin) Source(ctx context.Context, req *abi.SourceRequest) (*abi.SourceResponse, error) {
	resp := &abi.SourceResponse{}
	return ask(ctx, p, abi.KindSource, req, resp, &resp.Error)
}

// Hook calls a hook plugin at a lifecycle point. Errors as for Admit.
func (p *Plugin) Hook(ctx context.Context, req *abi.HookRequest) (*abi.HookResponse, error) {
	resp := &abi.HookResponse{}
	return ask(ctx, p, abi.KindHook, req, resp, &resp.Error)
}

// ask is Admit, Source and Hook: one round trip decoded into resp, whose
// Error field (errField) becomes the error.
func ask[R any](ctx context.Context, p *Plugin, k abi.Kind, req any, resp *R, errField *string) (*R, error) {
	if err := p.roundTrip(ctx, k, req, resp); err != nil {
		return nil, err
	}
	return resp, p.failed(*errField)
}

// failed turns a response's Error field into an error (counted as one).
func (p *Plugin) failed(msg string) error {
	if msg == "" {
		return nil
	}
	p.stats.countError()
	return pluginError(p.manifest.Name, ErrPluginFailed, "%s", msg)
}

func (p *Plugin) roundTrip(ctx context.Context, k abi.Kind, req, resp any) error {
	var in []byte
	if ar, ok := req.(*abi.AdmitRequest); ok {
		// The hot path: splice the already-encoded pod instead of letting
		// encoding/json re-scan it, leaving out what the module does not
		// read.
		ar = ar.Omit(p.reads)
		in = ar.AppendJSON(make([]byte, 0, admitRequestSize(ar)))
	} else {
		var err error
		if in, err = json.Marshal(req); err != nil {
			return fmt.Errorf("plugin %q: encode %s request: %w", p.manifest.Name, k, err)
		}
	}
	_, err := p.call(ctx, k, in, resp)
	return err
}

// admitRequestSize is the encoded size of an AdmitRequest, give or take the
// punctuation, so AppendJSON allocates once.
func admitRequestSize(r *abi.AdmitRequest) int {
	n := 64 + len(r.Pod) + len(r.Node)
	for _, p := range r.PodsOnNode {
		n += len(p) + 1
	}
	return n
}

// decodeResult decodes a guest's JSON result: exactly one JSON value that
// fits the response type.
func decodeResult(out []byte, v any) error {
	if len(out) == 0 {
		return fmt.Errorf("empty result")
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("invalid JSON (%d bytes): %v", len(out), err)
	}
	return nil
}
