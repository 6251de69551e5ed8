package wasiruntime

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"path"
	"runtime"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmlet/wasmlet/host/internal/meter"
)

// Exit codes the runtime reports for ends the module did not choose, in the
// convention of a shell (128 + signal).
const (
	exitKilled = 137 // stopped by StopContainer, or OOMKilled (SIGKILL)
	exitTrap   = 134 // the module trapped (SIGABRT)
	exitFailed = 128 // the module could not be instantiated
)

// start runs a created container's module in its own goroutine.
func (r *Runtime) start(ctx context.Context, c *container) error {
	r.mu.Lock()
	sb, ok := r.sandboxes[c.SandboxID]
	ready := ok && sb.State == runtimeapi.PodSandboxState_SANDBOX_READY
	hostname := ""
	if ok {
		hostname = sb.Hostname
	}
	r.mu.Unlock()
	if !ready {
		return status.Errorf(codes.FailedPrecondition, "start container %s: sandbox %s is not ready", c.ID, c.SandboxID)
	}
	img, err := r.images.Resolve(c.ImageRef)
	if err != nil {
		return status.Errorf(codes.FailedPrecondition, "start container %s: %v", c.ID, err)
	}
	cm, err := r.modules.get(ctx, img, c.Image)
	if err != nil {
		return status.Errorf(codes.FailedPrecondition, "start container %s: %v", c.ID, err)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		return status.Errorf(codes.FailedPrecondition, "start container %s: it is %s, not created", c.ID, c.State)
	}
	var out, errOut io.Writer = io.Discard, io.Discard
	var stdout, stderr *logStream
	if c.LogPath != "" {
		lf, err := openLogFile(c.LogPath)
		if err != nil {
			return status.Errorf(codes.Internal, "start container %s: log: %v", c.ID, err)
		}
		c.logs = lf
		stdout, stderr = &logStream{file: lf, stream: "stdout"}, &logStream{file: lf, stream: "stderr"}
		out, errOut = stdout, stderr
	}
	runCtx, cancel := context.WithCancel(context.Background())
	mc := r.moduleConfig(runCtx, c, hostname).WithStdout(out).WithStderr(errOut)
	var limit *memCap
	instCtx := runCtx
	if c.MemoryLimit > 0 {
		limit = &memCap{limit: uint64(c.MemoryLimit)}
		instCtx = experimental.WithMemoryAllocator(runCtx, limit)
	}
	c.State = runtimeapi.ContainerState_CONTAINER_RUNNING
	c.StartedAt = time.Now().UnixNano()
	c.cancel = cancel
	c.done = make(chan struct{})
	c.stopping = false
	r.saveContainer(c)
	done := c.done
	r.metrics.starts.Inc()
	r.metrics.running.Inc()
	go func() {
		defer close(done)
		code, reason, msg := r.execute(instCtx, c, cm, mc, limit)
		if stdout != nil {
			stdout.flush()
			stderr.flush()
		}
		c.mu.Lock()
		if c.stopping && reason != "OOMKilled" && code != 0 {
			code, reason, msg = exitKilled, "Error", "stopped by the runtime"
		}
		c.State = runtimeapi.ContainerState_CONTAINER_EXITED
		c.FinishedAt = time.Now().UnixNano()
		c.ExitCode, c.Reason, c.Message = int32(code), reason, msg
		c.cancel, c.force = nil, nil
		if c.logs != nil {
			c.logs.close()
		}
		r.saveContainer(c)
		c.mu.Unlock()
		cancel()
		r.metrics.running.Dec()
		r.metrics.exits.WithLabelValues(reason).Inc()
		r.log.Debug("container exited", "container", c.ID, "name", c.Metadata.GetName(), "exit_code", code, "reason", reason)
	}()
	r.log.Debug("container started", "container", c.ID, "name", c.Metadata.GetName(), "argv", c.Argv)
	return nil
}

// moduleConfig is what the module sees: its argv and env, the wall clock,
// and as file system only its own scratch root and its mounts.
func (r *Runtime) moduleConfig(ctx context.Context, c *container, hostname string) wazero.ModuleConfig {
	fs := wazero.NewFSConfig().WithDirMount(r.rootfs(c.ID), "/")
	for _, m := range c.Mounts {
		if m.Readonly {
			fs = fs.WithReadOnlyDirMount(m.HostPath, m.ContainerPath)
		} else {
			fs = fs.WithDirMount(m.HostPath, m.ContainerPath)
		}
	}
	mc := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions().
		WithArgs(c.Argv...).
		WithFSConfig(fs).
		WithStdin(eofReader{}).
		WithSysWalltime().
		WithSysNanotime().
		WithRandSource(rand.Reader).
		WithOsyield(runtime.Gosched).
		// A sleeping module wakes when it is stopped, to be closed at once.
		WithNanosleep(func(ns int64) {
			t := time.NewTimer(time.Duration(ns))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		})
	// The container's own variables win: a guest sees the first of two.
	set := map[string]bool{}
	for _, kv := range c.Env {
		k, v, _ := strings.Cut(kv, "=")
		mc = mc.WithEnv(k, v)
		set[k] = true
	}
	if hostname != "" && !set["HOSTNAME"] {
		mc = mc.WithEnv("HOSTNAME", hostname)
	}
	if c.WorkingDir != "" && !set["PWD"] {
		// WASI has no working directory; Go and wasi-libc take it from PWD.
		mc = mc.WithEnv("PWD", path.Clean("/"+c.WorkingDir))
	}
	return mc
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// execute instantiates the module and runs _start; it returns the exit code,
// the CRI reason and a message.
func (r *Runtime) execute(ctx context.Context, c *container, cm *compiled, mc wazero.ModuleConfig, limit *memCap) (int, string, string) {
	if limit != nil && cm.minBytes > limit.limit {
		return exitKilled, "OOMKilled", fmt.Sprintf("the module's initial memory (%d bytes) exceeds the memory limit (%d bytes)", cm.minBytes, limit.limit)
	}
	if cm.metered {
		// The meter's tick ends the module once ctx (cancelled by a stop)
		// is done.
		call := &meter.Call{}
		call.Arm(ctx, 0)
		ctx = meter.WithCall(ctx, call)
	}
	tid, cpu, unlock := lockThread()
	defer unlock()
	mod, err := cm.rt.InstantiateModule(ctx, cm.mod, mc)
	if err != nil {
		return exitFailed, "Error", fmt.Sprintf("instantiate: %v", err)
	}
	c.mu.Lock()
	c.force = func() { mod.CloseWithExitCode(context.Background(), exitKilled) }
	c.usage = &usage{tid: tid, baseCPU: cpu, mod: mod}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.usage = nil
		c.mu.Unlock()
	}()
	_, err = mod.ExportedFunction("_start").Call(ctx)
	mod.Close(context.Background())
	code, msg := 0, ""
	var exit *sys.ExitError
	switch {
	case err == nil:
	case errors.Is(err, meter.ErrStopped):
		code, msg = exitKilled, "stopped by the runtime"
	case errors.As(err, &exit):
		code = int(exit.ExitCode())
		if code == int(sys.ExitCodeContextCanceled) || code == int(sys.ExitCodeDeadlineExceeded) {
			code, msg = exitKilled, "stopped by the runtime"
		}
	default:
		code, msg = exitTrap, err.Error()
	}
	switch {
	case limit != nil && limit.hit.Load() && code != 0:
		return exitKilled, "OOMKilled", fmt.Sprintf("memory limit of %d bytes reached (exit code %d)", limit.limit, code)
	case code == 0:
		return 0, "Completed", ""
	}
	return code, "Error", msg
}

// errStuck is returned when a module outlives even its forced close.
var errStuck = errors.New("the module did not end after being closed")

// stopContainer ends a running container: its context is cancelled (a
// metered module ends at the meter's next tick, within 4096 function entries
// or loop iterations; an unmetered one at its next function call or loop
// iteration; a sleep wakes first), and after timeout (at least a second) the
// module is closed outright. It returns when the container has exited.
func (r *Runtime) stopContainer(c *container, timeout time.Duration) error {
	c.mu.Lock()
	if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING || c.cancel == nil {
		done := c.done
		c.mu.Unlock()
		if done != nil {
			<-done // a stop racing with the exit waits for the record
		}
		return nil
	}
	c.stopping = true
	cancel, done := c.cancel, c.done
	c.mu.Unlock()
	cancel()
	if timeout < time.Second {
		timeout = time.Second
	}
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
	}
	c.mu.Lock()
	force := c.force
	c.mu.Unlock()
	if force != nil {
		r.log.Warn("container did not stop when cancelled: closing it", "container", c.ID)
		force()
	}
	select {
	case <-done:
		return nil
	case <-time.After(5 * time.Second):
		r.log.Error("container did not stop", "container", c.ID)
		return errStuck
	}
}
