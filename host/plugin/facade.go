// Package plugin loads one wasmlet plugin and calls it, for code outside the
// agent: wasmlet's tools for plugin authors and policy teams (`wasmlet
// admit`, `wasmlet plugin`) and plugintest. It is a facade over the host the
// agent itself runs (host/internal/pluginhost): the same sandbox (no
// filesystem, no environment, no network beyond the manifest's allowed
// hosts), ABI checks, per-call deadline and memory cap, so a verdict here is
// the agent's. A plugin directory, its hot reloads and its metrics are the
// agent's business (agent.Config.PluginDir) and not offered here.
package plugin

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/pluginhost"
)

// Errors a load or a call can wrap; test them with errors.Is. Every error
// also names the plugin (or file) concerned.
var (
	// ErrManifest: the manifest cannot be read, parsed or validated.
	ErrManifest = pluginhost.ErrManifest
	// ErrSHA256: the .wasm file does not match the manifest's sha256.
	ErrSHA256 = pluginhost.ErrSHA256
	// ErrCompile: the module is not valid WebAssembly or failed to compile.
	ErrCompile = pluginhost.ErrCompile
	// ErrABIVersion: the module has no version marker, or one of another ABI
	// version.
	ErrABIVersion = pluginhost.ErrABIVersion
	// ErrMissingExport: a required export (alloc, a declared kind) is absent
	// or has the wrong signature.
	ErrMissingExport = pluginhost.ErrMissingExport
	// ErrNoKind: the plugin does not implement the kind that was called.
	ErrNoKind = pluginhost.ErrNoKind
	// ErrTrap: the guest trapped or exited (a Go panic, unreachable, …).
	ErrTrap = pluginhost.ErrTrap
	// ErrTimeout: the call exceeded its deadline and was stopped.
	ErrTimeout = pluginhost.ErrTimeout
	// ErrMemoryLimit: the guest tried to grow its memory past its cap.
	ErrMemoryLimit = pluginhost.ErrMemoryLimit
	// ErrBadResult: the guest returned pointer 0, an out-of-bounds result, or
	// JSON that does not decode.
	ErrBadResult = pluginhost.ErrBadResult
	// ErrPluginFailed: the guest answered with its error field set.
	ErrPluginFailed = pluginhost.ErrPluginFailed
	// ErrClosed: the plugin was closed.
	ErrClosed = pluginhost.ErrClosed
	// ErrConfigRefused: the module's wasmlet_check_config export refused
	// the config it would run with; the error carries its message.
	ErrConfigRefused = pluginhost.ErrConfigRefused
)

// DeadlineMode selects how a call's deadline is enforced inside guest code:
// one of the constants below, the plugin host's own.
type DeadlineMode = pluginhost.DeadlineMode

const (
	// DeadlineAuto, the default, is DeadlineMeter for every module it can
	// rewrite and DeadlineCloseOnDone for the others.
	DeadlineAuto = pluginhost.DeadlineAuto
	// DeadlineMeter: the module, rewritten, calls the host every few
	// thousand steps, which stops it once its deadline has passed; a
	// module that cannot be rewritten does not load.
	DeadlineMeter = pluginhost.DeadlineMeter
	// DeadlineCloseOnDone: wazero checks the call's context on every loop
	// back-edge, which makes guest code 4–9x slower.
	DeadlineCloseOnDone = pluginhost.DeadlineCloseOnDone
	// DeadlineNone: no deadline inside guest code, only at host calls; a
	// runaway guest spins forever. For benchmarks and trusted plugins.
	DeadlineNone = pluginhost.DeadlineNone
)

// Config is the host side of a plugin: what its imports are served from and
// the sandbox's defaults. The zero value works: an in-memory key-value store,
// no network but the manifest's allowed hosts, no node info, an in-memory
// compilation cache, the agent's defaults (a manifest's own timeout and
// memory cap come first).
type Config struct {
	// CacheDir holds the compilation cache, so that the next load of the
	// same module is fast; empty keeps it in memory, for this load only.
	CacheDir string
	// Logger receives host logs and, under "plugin.<name>", the guest's log
	// import and its stdout/stderr; nil discards them.
	Logger hclog.Logger
	// NodeInfo serves the node_info import; nil answers "not found".
	NodeInfo func(ctx context.Context) (abi.NodeInfo, error)
	// Timeout is the per-call deadline when the manifest sets none; zero
	// means one second.
	Timeout time.Duration
	// PoolSize bounds the plugin's live instances, and so its concurrent
	// calls; zero means GOMAXPROCS.
	PoolSize int
	// Deadline selects the deadline mechanism; default DeadlineAuto.
	Deadline DeadlineMode
}

// host is c as the plugin host's Config.
func (c Config) host() pluginhost.Config {
	return pluginhost.Config{
		CacheDir: c.CacheDir,
		Logger:   c.Logger,
		NodeInfo: c.NodeInfo,
		Timeout:  c.Timeout,
		PoolSize: c.PoolSize,
		Deadline: c.Deadline,
	}
}

// LoadConfig says which plugin Load loads, and how.
type LoadConfig struct {
	// Path is a manifest (*.plugin.yaml) or a bare .wasm file. A bare module
	// gets a manifest derived from its exports: its name from the file name,
	// the kinds whose exports are present, the computed sha256 and defaults.
	Path string
	// PluginConfig entries are merged over the manifest's config.
	PluginConfig map[string]string
	// Config is the host side.
	Config Config
}

// Plugin is one loaded plugin. Its methods are safe for concurrent use.
type Plugin struct {
	p *pluginhost.Plugin
}

// Load reads, verifies (sha256, ABI version marker, exports), compiles and
// instantiates one plugin. Close releases it.
func Load(ctx context.Context, lc LoadConfig) (*Plugin, error) {
	p, err := pluginhost.Load(ctx, pluginhost.LoadConfig{Path: lc.Path, PluginConfig: lc.PluginConfig, Config: lc.Config.host()})
	if err != nil {
		return nil, err
	}
	return &Plugin{p: p}, nil
}

// Name is the plugin's name.
func (p *Plugin) Name() string { return p.p.Name() }

// Manifest returns the effective manifest: validated, defaults filled, a
// bare module's derived fields, config overrides applied.
func (p *Plugin) Manifest() abi.Manifest { return p.p.Manifest() }

// DeadlineMode is the deadline mechanism in force for this plugin.
func (p *Plugin) DeadlineMode() DeadlineMode { return p.p.DeadlineMode() }

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

// Exports lists the module's exported functions, sorted by name; nil for an
// Extism plugin.
func (p *Plugin) Exports() []Function { return functions(p.p.Exports()) }

// Imports lists the module's imported functions in file order; nil for an
// Extism plugin.
func (p *Plugin) Imports() []Function { return functions(p.p.Imports()) }

func functions(fs []pluginhost.Function) []Function {
	if fs == nil {
		return nil
	}
	out := make([]Function, len(fs))
	for i, f := range fs {
		out[i] = Function(f)
	}
	return out
}

// Admit asks an admission plugin about a pod. A non-nil error means the call
// failed (trap, timeout, bad result, or the response's Error field set — the
// response is then returned too); the caller applies the failure policy.
func (p *Plugin) Admit(ctx context.Context, req *abi.AdmitRequest) (*abi.AdmitResponse, error) {
	return p.p.Admit(ctx, req)
}

// Source polls a source plugin. Errors as for Admit.
func (p *Plugin) Source(ctx context.Context, req *abi.SourceRequest) (*abi.SourceResponse, error) {
	return p.p.Source(ctx, req)
}

// Hook calls a hook plugin at a lifecycle point. Errors as for Admit.
func (p *Plugin) Hook(ctx context.Context, req *abi.HookRequest) (*abi.HookResponse, error) {
	return p.p.Hook(ctx, req)
}

// Call runs a kind's export with raw JSON input and returns the raw result:
// the path Admit, Source and Hook take, without their encoding and decoding.
func (p *Plugin) Call(ctx context.Context, k abi.Kind, input []byte) ([]byte, error) {
	return p.p.Call(ctx, k, input)
}

// Close releases the plugin's instances and compiled code. Calls in flight
// finish; later calls fail with ErrClosed.
func (p *Plugin) Close(ctx context.Context) error { return p.p.Close(ctx) }
