// Package meter stops compiled WebAssembly code that never calls the host,
// at a fraction of the cost of wazero's WithCloseOnContextDone.
//
// Compiled wazero code never returns to Go by itself: an endless guest loop
// holds its goroutine forever, and only a call into Go can end it. Rewrite
// changes a module, before it is compiled, so that every function entry
// (unless a loop header is reached first, see loopFirst) and every loop
// header runs a probe:
//
//	global.get $fuel; i32.const 1; i32.sub; local.tee $t; global.set $fuel
//	local.get $t; i32.eqz
//	if  i32.const Interval; global.set $fuel; call $tick  end
//
// $fuel is a new mutable i32 global, $t a new i32 local of each function and
// $tick the import ImportModule ImportFunc. A runaway loop thus calls into Go
// every Interval iterations. The tick (Config.Tick, defined in a wazero
// runtime by Config.Instantiate) finds the Call its goroutine is running and
// stops it when the Call's deadline has passed or its context is done, by
// panicking with ErrStopped: wazero turns the panic into the error the
// guest's call returns, and the instance should be discarded. Being a Go
// call, the tick is also a point where the Go scheduler and GC can stop the
// goroutine, which compiled guest code otherwise never offers.
//
// host/internal/pluginhost meters plugins (a deadline per call) and
// host/wasiruntime meters workloads (stopped when their container is).
// RATIONALE.md ("Deadlines", "The embedded runtime") has the measured costs.
package meter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

const (
	// ImportModule and ImportFunc name the function a metered module
	// imports and calls every Interval probes.
	ImportModule = "wasmlet:meter"
	ImportFunc   = "tick"
	// Interval is the number of probes between two ticks.
	Interval = 4096
	// Version names the rewrite in cached metered modules; it changes
	// whenever the rewrite's output changes.
	Version = "3"
)

// ErrStopped is the panic value a tick stops a call with; the error the
// guest's call returns wraps it (errors.Is).
var ErrStopped = errors.New("stopped (wasmlet meter)")

// Config is how a host meters its modules.
type Config struct {
	// CacheDir keeps rewritten modules (wasmlet-meter-<Version>-<sha256>.wasm)
	// so that a restart skips the rewrite as it skips compilation; empty
	// means no cache.
	CacheDir string
	// Call returns the Call running under a tick's context, or nil (the
	// tick then does nothing). nil means FromContext.
	Call func(context.Context) *Call
}

// Call is what a tick checks: the deadline and the context of one guest
// call (or of one long-running module). The zero Call never stops. A Call
// belongs to one goroutine at a time (the one running the guest), except
// that its context may be cancelled from anywhere.
type Call struct {
	ctx      context.Context
	deadline time.Duration
	stopped  bool
}

// Arm starts a metered call that ends when ctx is done (ctx may be nil) or
// when Now passes deadline (0 means no deadline).
func (c *Call) Arm(ctx context.Context, deadline time.Duration) {
	if deadline == 0 {
		deadline = math.MaxInt64
	}
	c.ctx, c.deadline, c.stopped = ctx, deadline, false
}

// Disarm drops the Call's context (so that it is not kept alive) and keeps
// Stopped.
func (c *Call) Disarm() { c.ctx = nil }

// Reset forgets that a tick stopped the Call.
func (c *Call) Reset() { c.stopped = false }

// Deadline is the Call's deadline on Now's clock (math.MaxInt64 if none).
func (c *Call) Deadline() time.Duration { return c.deadline }

// Stopped reports whether a tick stopped the Call since it was armed.
func (c *Call) Stopped() bool { return c.stopped }

// check panics with ErrStopped if the Call must end.
func (c *Call) check() {
	if Now() > c.deadline || (c.ctx != nil && c.ctx.Err() != nil) {
		c.stopped = true
		panic(ErrStopped)
	}
}

type callKey struct{}

// WithCall returns ctx carrying c, for FromContext.
func WithCall(ctx context.Context, c *Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// FromContext returns the Call WithCall put in ctx, or nil.
func FromContext(ctx context.Context) *Call {
	c, _ := ctx.Value(callKey{}).(*Call)
	return c
}

// epoch anchors Now: time.Since on a monotonic reading reads one clock, where
// time.Now reads two (and a clock read can cost ~100 ns on a virtual machine).
var epoch = time.Now()

// Now is the monotonic clock deadlines are on.
func Now() time.Duration { return time.Since(epoch) }

// Tick returns the host function a metered module imports.
func (cfg Config) Tick() api.GoModuleFunc {
	find := cfg.Call
	if find == nil {
		find = FromContext
	}
	return func(ctx context.Context, _ api.Module, _ []uint64) {
		if c := find(ctx); c != nil {
			c.check()
		}
	}
}

// Instantiate defines ImportModule with its tick in r.
func (cfg Config) Instantiate(ctx context.Context, r wazero.Runtime) error {
	_, err := r.NewHostModuleBuilder(ImportModule).NewFunctionBuilder().
		WithGoModuleFunction(cfg.Tick(), nil, nil).Export(ImportFunc).
		Instantiate(ctx)
	return err
}

// Rewrite meters wasm like the package's Rewrite, keeping the result in
// CacheDir. digest is the hex sha256 of wasm if the caller has it, or "".
func (cfg Config) Rewrite(wasm []byte, digest string) ([]byte, error) {
	if cfg.CacheDir == "" {
		return Rewrite(wasm)
	}
	if digest == "" {
		sum := sha256.Sum256(wasm)
		digest = hex.EncodeToString(sum[:])
	}
	path := filepath.Join(cfg.CacheDir, "wasmlet-meter-"+Version+"-"+digest+".wasm")
	if b, err := os.ReadFile(path); err == nil {
		return b, nil
	}
	out, err := Rewrite(wasm)
	if err != nil {
		return nil, err
	}
	// A unique temporary name: another process (wasmlet runtime import)
	// may be writing the same module.
	if f, err := os.CreateTemp(cfg.CacheDir, ".wasmlet-meter-*.tmp"); err == nil {
		_, werr := f.Write(out)
		if cerr := f.Close(); werr == nil && cerr == nil {
			os.Rename(f.Name(), path)
		}
		os.Remove(f.Name()) // after a successful rename, a no-op
	}
	return out, nil
}
