// Package pluginhost is wasmlet's plugin host: it loads plugins (ABI v1 on
// raw wazero, or Extism PDK modules through the Extism go-sdk) and runs their
// calls in a sandbox: no filesystem, no environment, no network except the
// http_request import to the manifest's allowed hosts, a memory cap, and a
// per-call deadline.
//
// Load loads one plugin (a manifest, or a bare .wasm whose manifest is derived
// from its exports); Manager keeps a whole plugin directory loaded and
// hot-reloads it. A Plugin is safe for concurrent use: each call borrows an
// instance from a bounded pool, and an instance never serves two goroutines at
// once.
//
// The agent uses it directly (host/agent, host/internal/extension); code
// outside host/ (wasmlet's tools, plugintest) goes through the public facade
// host/plugin, which wraps Load and a plugin's calls.
package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmlet/wasmlet/abi"
)

// Errors a load or a call can wrap; test them with errors.Is. Every error
// returned by this package also names the plugin (or file) concerned.
var (
	// ErrManifest: the manifest cannot be read, parsed or validated.
	ErrManifest = errors.New("bad manifest")
	// ErrSHA256: the .wasm file does not match the manifest's sha256.
	ErrSHA256 = errors.New("sha256 mismatch")
	// ErrCompile: the module is not valid WebAssembly or failed to compile.
	ErrCompile = errors.New("compile error")
	// ErrABIVersion: the module has no version marker, or one of another ABI
	// version.
	ErrABIVersion = errors.New("wrong ABI version")
	// ErrMissingExport: a required export (alloc, a declared kind) is absent
	// or has the wrong signature.
	ErrMissingExport = errors.New("missing export")
	// ErrNoKind: the plugin does not implement the kind that was called.
	ErrNoKind = errors.New("kind not implemented")
	// ErrTrap: the guest trapped or exited (a Go panic, unreachable, …).
	ErrTrap = errors.New("guest trapped")
	// ErrTimeout: the call exceeded its deadline and was stopped.
	ErrTimeout = errors.New("deadline exceeded")
	// ErrMemoryLimit: the guest tried to grow its memory past its cap.
	ErrMemoryLimit = errors.New("memory limit exceeded")
	// ErrBadResult: the guest returned pointer 0, an out-of-bounds result, or
	// JSON that does not decode.
	ErrBadResult = errors.New("bad result")
	// ErrPluginFailed: the guest answered with its error field set.
	ErrPluginFailed = errors.New("plugin reported an error")
	// ErrClosed: the plugin was closed (unloaded or replaced).
	ErrClosed = errors.New("plugin closed")
	// ErrConfigRefused: the module's wasmlet_check_config export refused
	// the config it would run with; the error carries its message.
	ErrConfigRefused = errors.New("config refused by the plugin")
)

// Defaults used when a Config field is zero.
const (
	DefaultTimeout      = time.Second
	DefaultMemoryPages  = 2048 // 128 MiB
	DefaultRecycleAfter = 10000
	DefaultGuestLogMax  = 64 << 10
	DefaultRescan       = 10 * time.Second
	DefaultHTTPBodyMax  = 1 << 20
	DefaultIdleTimeout  = 10 * time.Second
)

// DeadlineMode selects how a call's deadline is enforced; see RATIONALE.md
// ("A metered module instead of `WithCloseOnContextDone`") for the
// measurements behind the default.
type DeadlineMode string

const (
	// DeadlineAuto meters the module when it can be instrumented and falls
	// back to DeadlineCloseOnDone otherwise. The default.
	DeadlineAuto DeadlineMode = ""
	// DeadlineMeter rewrites the module so that function entries and loop
	// back-edges decrement a counter and call the host every few thousand
	// ticks; the host stops the call once its deadline has passed. Loading
	// fails if the module cannot be instrumented.
	DeadlineMeter DeadlineMode = "meter"
	// DeadlineCloseOnDone uses wazero's WithCloseOnContextDone: a check on
	// every loop back-edge that calls into Go (4–9x slower guest code).
	DeadlineCloseOnDone DeadlineMode = "close-on-done"
	// DeadlineNone does not enforce deadlines inside guest code (only at host
	// calls). For benchmarks and trusted plugins only: a runaway guest then
	// spins forever.
	DeadlineNone DeadlineMode = "none"
)

// KV is the key-value store behind the kv_* imports. Keys are scoped to one
// plugin by the host (the store receives the plugin name).
type KV interface {
	// Get returns the value and whether it exists.
	Get(plugin, key string) ([]byte, bool)
	// Set stores a value.
	Set(plugin, key string, value []byte) error
	// Delete removes a key; deleting a missing key is not an error.
	Delete(plugin, key string) error
}

// Config is the host side of every plugin: where host imports get their data,
// the sandbox defaults and the pool sizes. The zero value works (in-memory KV,
// no network, no node info, in-memory compilation cache).
type Config struct {
	// Dir is the plugin directory (Manager only).
	Dir string
	// LowerDir is a second plugin directory of lower precedence (Manager
	// only; may be empty or missing): a plugin named in both serves from
	// Dir, and the LowerDir file is refused while Dir's serves.
	LowerDir string
	// Rescan is the Manager's periodic rescan interval besides fsnotify;
	// default DefaultRescan.
	Rescan time.Duration
	// CacheDir holds wazero's file compilation cache; empty keeps the cache
	// in memory only.
	CacheDir string
	// Logger receives host logs and, under "plugin.<name>", the guests' log
	// import and their stdout/stderr.
	Logger hclog.Logger
	// KV backs the kv_* imports; nil means an in-memory store.
	KV KV
	// HTTPClient serves the http_request import; nil means http.DefaultClient.
	// Requests are refused unless the host is in the manifest's allowedHosts.
	HTTPClient *http.Client
	// NodeInfo serves the node_info import; nil answers ErrnoNotFound.
	NodeInfo func(ctx context.Context) (abi.NodeInfo, error)
	// Timeout is the per-call deadline when the manifest sets none; default
	// DefaultTimeout.
	Timeout time.Duration
	// MemoryPages caps a plugin's memory when the manifest sets none (64 KiB
	// pages); default DefaultMemoryPages.
	MemoryPages uint32
	// PoolSize bounds the live instances per plugin; default GOMAXPROCS.
	PoolSize int
	// RecycleAfter replaces an instance after this many calls; default
	// DefaultRecycleAfter.
	RecycleAfter int
	// IdleTimeout: a plugin not called for this long gives back its
	// instances and its compiled code, which its next call reloads from the
	// compilation cache (see RATIONALE.md, "Idle plugins hold no memory");
	// default DefaultIdleTimeout, negative keeps them for as long as the
	// plugin is loaded. Extism plugins keep theirs.
	IdleTimeout time.Duration
	// GuestLogMax caps, per plugin, the bytes of guest stdout/stderr and log
	// import output forwarded to Logger per minute; default DefaultGuestLogMax.
	GuestLogMax int
	// Deadline selects the deadline mechanism; default DeadlineAuto.
	Deadline DeadlineMode
	// Resolver brings the plugins of reference manifests (image: in the
	// manifest); nil refuses such manifests.
	Resolver Resolver
	// Registerer, when set, receives a Manager's collector of per-plugin
	// metrics (Manager only; a lone Plugin has Stats).
	Registerer prometheus.Registerer
}

func (c Config) withDefaults() Config {
	if c.Rescan <= 0 {
		c.Rescan = DefaultRescan
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.KV == nil {
		c.KV = NewMemoryKV()
	}
	if c.HTTPClient == nil {
		c.HTTPClient = http.DefaultClient
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MemoryPages == 0 {
		c.MemoryPages = DefaultMemoryPages
	}
	if c.PoolSize <= 0 {
		c.PoolSize = runtime.GOMAXPROCS(0)
	}
	if c.RecycleAfter <= 0 {
		c.RecycleAfter = DefaultRecycleAfter
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.GuestLogMax <= 0 {
		c.GuestLogMax = DefaultGuestLogMax
	}
	return c
}

// LoadConfig says which plugin Load loads.
type LoadConfig struct {
	// Path is a manifest (*.plugin.yaml) or a bare .wasm file. A bare module
	// gets a manifest derived from its exports: its name from the file name,
	// the kinds whose exports are present, the computed sha256 and defaults.
	Path string
	// PluginConfig entries are merged over the manifest's config.
	PluginConfig map[string]string
	// Config is the host side (logger, KV, HTTP, defaults).
	Config Config
}

// Load loads one plugin with its own wazero runtime (closed by Plugin.Close).
// Use a Manager to load a directory with one shared runtime.
func Load(ctx context.Context, lc LoadConfig) (*Plugin, error) {
	e, err := newEngine(ctx, lc.Config.withDefaults())
	if err != nil {
		return nil, err
	}
	p, err := e.load(ctx, lc.Path, lc.PluginConfig, e.cfg.Resolver)
	if err != nil {
		e.close(ctx)
		return nil, err
	}
	p.ownEngine = true
	return p, nil
}

// call names the plugin in err and keeps the sentinel for errors.Is.
func pluginError(name string, sentinel error, format string, args ...any) error {
	return fmt.Errorf("plugin %q: %w: %s", name, sentinel, fmt.Sprintf(format, args...))
}
