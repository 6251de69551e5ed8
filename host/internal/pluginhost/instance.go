package pluginhost

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/meter"
)

// initTimeoutMin is the least time _initialize gets (a Go runtime starts in
// tens of milliseconds, more on a loaded machine).
const initTimeoutMin = 10 * time.Second

// stderrTail is how much of a call's guest output (its beginning, where a Go
// panic message is) is kept for error messages.
const stderrTail = 1024

// instance is one instantiated module. It serves one goroutine at a time (the
// pool guarantees it) and is discarded after any failure.
type instance struct {
	p     *Plugin
	mod   api.Module
	mem   api.Memory
	alloc api.Function
	fns   [3]api.Function // by kind index
	calls int
	stack []uint64

	meter.Call        // what the meter's tick checks during a call
	pending    []byte // result_read buffer (per call)

	memory    cappedMemory
	memDenied atomic.Bool
	out       guestOutput
}

type callKey struct{}

// instanceFrom returns the instance a host function is running for.
func instanceFrom(ctx context.Context) *instance {
	i, _ := ctx.Value(callKey{}).(*instance)
	return i
}

func kindIndex(k abi.Kind) int {
	switch k {
	case abi.KindSource:
		return 0
	case abi.KindAdmission:
		return 1
	}
	return 2
}

func (p *Plugin) newInstance(ctx context.Context) (inst *instance, err error) {
	inst = &instance{p: p, stack: make([]uint64, 2)}
	inst.memory = cappedMemory{max: p.memoryBytes(), denied: &inst.memDenied}
	inst.out = guestOutput{p: p}
	mc := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions().
		WithStdout(&inst.out).
		WithStderr(&inst.out).
		WithSysWalltime().
		WithSysNanotime().
		WithRandSource(rand.Reader)
	ictx := experimental.WithMemoryAllocator(ctx, experimental.MemoryAllocatorFunc(inst.memory.allocate))
	defer func() {
		if r := recover(); r != nil { // wazero panics if even the minimum memory is refused
			err = pluginError(p.manifest.Name, ErrMemoryLimit, "instantiate: %v", r)
		}
	}()
	compiled, err := p.compiled.get(ctx)
	if err != nil {
		return nil, err
	}
	mod, err := p.rt.InstantiateModule(ictx, compiled, mc)
	if err != nil {
		if inst.memDenied.Load() {
			return nil, pluginError(p.manifest.Name, ErrMemoryLimit, "instantiate: memory cap %d pages: %v", p.memoryPages, err)
		}
		return nil, pluginError(p.manifest.Name, ErrTrap, "instantiate: %v", err)
	}
	inst.mod = mod
	inst.mem = mod.Memory()
	if inst.mem == nil {
		mod.Close(ctx)
		return nil, pluginError(p.manifest.Name, ErrMissingExport, "%v", errNoMemory)
	}
	inst.alloc = mod.ExportedFunction(abi.ExportAlloc)
	for _, k := range p.manifest.Kinds {
		inst.fns[kindIndex(k)] = mod.ExportedFunction(abi.ExportForKind(k))
	}
	if f := mod.ExportedFunction(abi.ExportInitialize); f != nil {
		t := max(p.timeout, initTimeoutMin)
		cctx, cancel, callCtx := inst.begin(ctx, mono(), t)
		_, err := f.Call(callCtx, nil...)
		cancel()
		if err != nil {
			err = inst.classify(cctx, err, "_initialize")
			inst.close()
			return nil, err
		}
	}
	return inst, nil
}

// reads asks the module which admission request fields it reads
// (abi.ExportReads); every field when it does not say.
func (i *instance) reads(ctx context.Context) (abi.Reads, error) {
	f := i.mod.ExportedFunction(abi.ExportReads)
	if f == nil {
		return abi.ReadsAll, nil
	}
	cctx, cancel, callCtx := i.begin(ctx, mono(), i.p.timeout)
	defer cancel()
	i.stack[0] = 0
	if err := f.CallWithStack(callCtx, i.stack[:1]); err != nil {
		return 0, i.classify(cctx, err, abi.ExportReads)
	}
	return abi.Reads(api.DecodeU32(i.stack[0])), nil
}

// checkConfig asks the module whether it accepts its config
// (abi.ExportCheckConfig): nil when it does or does not say, else an
// ErrConfigRefused error carrying the module's message (its first
// abi.CheckConfigMessageMax bytes).
func (i *instance) checkConfig(ctx context.Context) error {
	f := i.mod.ExportedFunction(abi.ExportCheckConfig)
	if f == nil {
		return nil
	}
	name := i.p.manifest.Name
	cctx, cancel, callCtx := i.begin(ctx, mono(), i.p.timeout)
	defer cancel()
	i.stack[0] = 0
	if err := f.CallWithStack(callCtx, i.stack[:1]); err != nil {
		return i.classify(cctx, err, abi.ExportCheckConfig)
	}
	ptr, n := abi.UnpackResult(i.stack[0])
	if ptr == 0 {
		return nil
	}
	view, ok := i.mem.Read(ptr, n)
	if !ok {
		return pluginError(name, ErrBadResult, "%s returned [%#x, +%d), out of bounds of %d bytes of memory", abi.ExportCheckConfig, ptr, n, i.mem.Size())
	}
	return refused(name, view)
}

// refused is the error of a config refused with msg: its first
// abi.CheckConfigMessageMax bytes, as valid UTF-8.
func refused(name string, msg []byte) error {
	if len(msg) > abi.CheckConfigMessageMax {
		msg = msg[:abi.CheckConfigMessageMax]
	}
	m := strings.ToValidUTF8(string(msg), "\uFFFD")
	if m == "" {
		m = "(no message)"
	}
	return fmt.Errorf("plugin %q: %w: %s", name, ErrConfigRefused, m)
}

// mono is the monotonic clock used for deadlines and latencies (the
// meter's, which the deadlines are compared with).
func mono() time.Duration { return meter.Now() }

// begin prepares a call's context and deadline. cctx is the context whose
// Err reports a caller cancellation; callCtx is what goes to wazero.
func (i *instance) begin(ctx context.Context, start, timeout time.Duration) (cctx context.Context, cancel context.CancelFunc, callCtx context.Context) {
	i.Reset()
	i.pending = nil
	i.out.reset()
	cancel = func() {}
	cctx = ctx
	switch i.p.deadline {
	case DeadlineCloseOnDone:
		cctx, cancel = context.WithTimeout(ctx, timeout)
	case DeadlineMeter:
		i.Arm(ctx, start+timeout)
	}
	return cctx, cancel, context.WithValue(cctx, callKey{}, i)
}

func (i *instance) close() {
	if i.mod != nil {
		i.mod.Close(context.Background())
	}
}

// call runs one export: alloc, write the input, call, bounds-check and copy
// the result.
func (i *instance) call(ctx context.Context, k abi.Kind, input []byte, start time.Duration) ([]byte, error) {
	name := i.p.manifest.Name
	fn := i.fns[kindIndex(k)]
	if fn == nil {
		return nil, pluginError(name, ErrNoKind, "%s", k)
	}
	cctx, cancel, callCtx := i.begin(ctx, start, i.p.timeout)
	defer cancel()
	i.calls++
	i.stack[0] = api.EncodeU32(uint32(len(input)))
	if err := i.alloc.CallWithStack(callCtx, i.stack[:1]); err != nil {
		return nil, i.classify(cctx, err, abi.ExportAlloc)
	}
	ptr := api.DecodeU32(i.stack[0])
	if ptr == 0 && len(input) > 0 {
		return nil, pluginError(name, ErrBadResult, "%s(%d) returned 0", abi.ExportAlloc, len(input))
	}
	if !i.mem.Write(ptr, input) {
		return nil, pluginError(name, ErrBadResult, "%s(%d) returned %#x, out of bounds of %d bytes of memory", abi.ExportAlloc, len(input), ptr, i.mem.Size())
	}
	i.stack[0], i.stack[1] = api.EncodeU32(ptr), api.EncodeU32(uint32(len(input)))
	if err := fn.CallWithStack(callCtx, i.stack[:2]); err != nil {
		return nil, i.classify(cctx, err, abi.ExportForKind(k))
	}
	rptr, rlen := abi.UnpackResult(i.stack[0])
	if rptr == 0 {
		if i.memDenied.Load() {
			return nil, pluginError(name, ErrMemoryLimit, "%s returned pointer 0 after its memory cap of %d pages was reached", abi.ExportForKind(k), i.p.memoryPages)
		}
		return nil, pluginError(name, ErrBadResult, "%s returned pointer 0%s", abi.ExportForKind(k), i.out.tailNote())
	}
	view, ok := i.mem.Read(rptr, rlen)
	if !ok {
		return nil, pluginError(name, ErrBadResult, "%s returned [%#x, +%d), out of bounds of %d bytes of memory", abi.ExportForKind(k), rptr, rlen, i.mem.Size())
	}
	return append([]byte(nil), view...), nil
}

// classify turns a wazero call error into one of the package's errors.
func (i *instance) classify(cctx context.Context, err error, export string) error {
	name := i.p.manifest.Name
	var exit *sys.ExitError
	switch {
	case i.memDenied.Load():
		return pluginError(name, ErrMemoryLimit, "%s: memory cap of %d pages (%d MiB) reached: %v%s", export, i.p.memoryPages, i.p.memoryPages/16, firstLine(err), i.out.tailNote())
	case i.Stopped(), errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeDeadlineExceeded:
		if cerr := cctx.Err(); errors.Is(cerr, context.Canceled) {
			return fmt.Errorf("plugin %q: %s: %w", name, export, cerr)
		}
		return pluginError(name, ErrTimeout, "%s: stopped after %s", export, i.p.timeout)
	case errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeContextCanceled:
		return fmt.Errorf("plugin %q: %s: %w", name, export, context.Canceled)
	case errors.As(err, &exit):
		return pluginError(name, ErrTrap, "%s: guest exited with code %d%s", export, exit.ExitCode(), i.out.tailNote())
	}
	return pluginError(name, ErrTrap, "%s: %s%s", export, firstLine(err), i.out.tailNote())
}

func firstLine(err error) string {
	s := err.Error()
	if n := strings.IndexByte(s, '\n'); n >= 0 {
		s = s[:n]
	}
	return s
}

// pooled is what a pool holds: a v1 instance or an Extism one.
type pooled interface {
	callCount() int
	close()
}

func (i *instance) callCount() int { return i.calls }

// pool is a plugin's bounded set of instances: sem bounds the live ones
// (borrowed or idle), idle holds those ready for a call.
type pool[T pooled] struct {
	name    string
	sem     chan struct{}
	create  func(context.Context) (T, error)
	recycle int
	stats   *stats
	mu      sync.Mutex
	idle    []T
	closed  bool
}

func newPool[T pooled](p *Plugin, create func(context.Context) (T, error)) *pool[T] {
	size := p.e.cfg.PoolSize
	return &pool[T]{name: p.manifest.Name, sem: make(chan struct{}, size), idle: make([]T, 0, size),
		create: create, recycle: p.e.cfg.RecycleAfter, stats: p.stats}
}

// get borrows an instance, instantiating one when none is idle.
func (pl *pool[T]) get(ctx context.Context) (T, error) {
	var zero T
	select {
	case pl.sem <- struct{}{}:
	case <-ctx.Done():
		return zero, fmt.Errorf("plugin %q: waiting for an instance: %w", pl.name, ctx.Err())
	}
	pl.mu.Lock()
	if pl.closed {
		pl.mu.Unlock()
		<-pl.sem
		return zero, fmt.Errorf("plugin %q: %w", pl.name, ErrClosed)
	}
	if n := len(pl.idle); n > 0 {
		inst := pl.idle[n-1]
		pl.idle[n-1] = zero
		pl.idle = pl.idle[:n-1]
		pl.mu.Unlock()
		return inst, nil
	}
	pl.mu.Unlock()
	inst, err := pl.create(ctx)
	if err != nil {
		<-pl.sem
		return zero, err
	}
	pl.stats.instantiated()
	return inst, nil
}

// put returns an instance; a failed or worn-out one is closed instead.
func (pl *pool[T]) put(inst T, ok bool) {
	pl.mu.Lock()
	keep := ok && !pl.closed && inst.callCount() < pl.recycle
	if keep {
		pl.idle = append(pl.idle, inst)
	}
	pl.mu.Unlock()
	if !keep {
		inst.close()
	}
	<-pl.sem
}

// drain closes the idle instances and reports whether none is left: no
// call holds or is creating one.
func (pl *pool[T]) drain() bool {
	pl.mu.Lock()
	idle := pl.idle
	pl.idle = make([]T, 0, cap(idle))
	none := len(pl.sem) == 0
	pl.mu.Unlock()
	for _, inst := range idle {
		inst.close()
	}
	return none
}

func (pl *pool[T]) close() {
	pl.mu.Lock()
	pl.closed = true
	idle := pl.idle
	pl.idle = nil
	pl.mu.Unlock()
	for _, inst := range idle {
		inst.close()
	}
}

// guestOutput receives a guest's stdout and stderr: it keeps the current
// call's first bytes for error messages and forwards lines to the plugin's capped log.
type guestOutput struct {
	p    *Plugin
	tail []byte
	line []byte
}

func (g *guestOutput) reset() { g.tail = g.tail[:0] }

// Write implements io.Writer.
func (g *guestOutput) Write(b []byte) (int, error) {
	if room := stderrTail - len(g.tail); room > 0 {
		g.tail = append(g.tail, b[:min(room, len(b))]...)
	}
	for _, c := range b {
		if c == '\n' {
			g.p.guestLog(abi.LogInfo, "output", g.line)
			g.line = g.line[:0]
			continue
		}
		if len(g.line) < 4096 {
			g.line = append(g.line, c)
		}
	}
	return len(b), nil
}

func (g *guestOutput) tailNote() string {
	t := strings.TrimSpace(string(g.tail))
	if t == "" {
		return ""
	}
	return "; guest output: " + strings.Join(strings.Fields(t), " ")
}
