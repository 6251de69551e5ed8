package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/wasmlet/wasmlet/host/internal/container"
	"github.com/wasmlet/wasmlet/host/internal/podspec"
	v1 "k8s.io/api/core/v1"
)

// MinimumGracePeriod is the shortest grace a container gets: the kubelet
// never waits less than 2 s on a kill.
const MinimumGracePeriod int64 = 2

// DefaultGracePeriod applies when neither the pod nor the container's
// annotations say (the API default).
const DefaultGracePeriod int64 = 30

// KillPod stops the pod's running containers, each with its grace period
// (PreStop first), then its ready sandboxes, then — if it stopped
// anything — calls the PodTerminated hook. Every container's PreStop runs
// at once; the regular containers then stop in parallel, and the
// sidecars (restartable init containers) after them in reverse order,
// each within what is left of its grace period (see termination). pod may
// be nil for a pod known only to the runtime; gracePeriodOverride, when
// set, replaces every grace period.
func (m *Manager) KillPod(ctx context.Context, pod *v1.Pod, status *container.PodStatus, gracePeriodOverride *int64) error {
	if status == nil {
		return nil
	}
	if pod != nil {
		// A container that exited since the last sync is reported here
		// when the pod goes straight to termination.
		m.postStopExited(ctx, pod, status)
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		errs    []error
		stopped bool // something was running: PodTerminated is due
	)
	var live []*container.ContainerStatus
	for _, cs := range status.Containers {
		if cs.State == container.StateRunning || cs.State == container.StateCreated || cs.State == container.StateUnknown {
			live = append(live, cs)
		}
	}
	var order *termination
	if pod != nil {
		order = newTermination(pod, live)
	}
	for _, cs := range live {
		var spec *v1.Container
		if pod != nil {
			spec = podspec.FindContainer(pod, cs.Name)
		}
		stopped = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.killContainerStatus(ctx, pod, spec, cs, "Stopping container "+cs.Name, gracePeriodOverride, order); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, sb := range status.Sandboxes {
		if !sb.Ready {
			continue
		}
		stopped = true
		if err := m.rs.StopPodSandbox(ctx, sb.ID); err != nil {
			errs = append(errs, fmt.Errorf("stop sandbox %s of pod %s/%s: %w", sb.ID, status.Namespace, status.Name, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if stopped && pod != nil && m.cfg.Hooks != nil {
		if _, err := m.cfg.Hooks.Hook(ctx, container.HookPodTerminated, pod, nil); err != nil {
			m.log.Warn("PodTerminated hook", "pod", pod.Namespace+"/"+pod.Name, "error", err)
		}
	}
	return nil
}

// gracePeriod is the kubelet's: the pod's deletion grace, else its
// termination grace, else what the container's annotations recorded.
func gracePeriod(pod *v1.Pod, cs *container.ContainerStatus) int64 {
	switch {
	case pod != nil && pod.DeletionGracePeriodSeconds != nil:
		return *pod.DeletionGracePeriodSeconds
	case pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil:
		return *pod.Spec.TerminationGracePeriodSeconds
	case cs != nil && cs.GracePeriod != nil:
		return *cs.GracePeriod
	}
	return DefaultGracePeriod
}

func (m *Manager) killContainer(ctx context.Context, pod *v1.Pod, spec *v1.Container, id, message string, override *int64) error {
	cs := &container.ContainerStatus{ID: id}
	if spec != nil {
		cs.Name = spec.Name
	}
	return m.killContainerStatus(ctx, pod, spec, cs, message, override, nil)
}

// killContainerStatus runs the PreStop hooks within the grace period
// (override, when set, replaces it), waits for the container's turn in
// order (nil: no wait), then stops the container with what is left of the
// grace period (at least 2 s), as the kubelet's killContainer.
func (m *Manager) killContainerStatus(ctx context.Context, pod *v1.Pod, spec *v1.Container, cs *container.ContainerStatus, message string, override *int64, order *termination) error {
	grace := gracePeriod(pod, cs)
	if override != nil {
		grace = *override
	}
	if grace > 0 && pod != nil && spec != nil {
		start := time.Now()
		m.preStop(ctx, pod, spec, cs.ID, grace)
		grace -= int64(time.Since(start).Seconds())
	}
	if order != nil {
		defer order.stopped(cs.Name)
		if grace > 0 {
			grace -= int64(order.waitTurn(ctx, cs.Name, time.Duration(grace)*time.Second).Seconds())
		}
	}
	if grace < MinimumGracePeriod {
		grace = MinimumGracePeriod
	}
	who := cs.Name
	if pod != nil {
		who = pod.Namespace + "/" + pod.Name + "/" + cs.Name
	}
	m.log.Debug("killing container", "container", who, "id", cs.ID, "grace", grace, "reason", message)
	if err := m.rs.StopContainer(ctx, cs.ID, grace); err != nil {
		return fmt.Errorf("stop container %s (%s): %w", who, cs.ID, err)
	}
	m.postStopKilled(ctx, pod, spec, cs.ID)
	return nil
}

// preStop runs the PreStop hook plugins and the container's preStop
// handler (exec, httpGet or sleep), bounded by the grace period.
func (m *Manager) preStop(ctx context.Context, pod *v1.Pod, c *v1.Container, id string, grace int64) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(grace)*time.Second)
	defer cancel()
	if m.cfg.Hooks != nil {
		if _, err := m.cfg.Hooks.Hook(ctx, container.HookPreStop, pod, c); err != nil {
			m.log.Warn("PreStop hook", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "error", err)
		}
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		return
	}
	// The wait for the handler ends with the grace period; an exec handler
	// is not cut short there, as the kubelet runs it without a timeout: it
	// ends with the container, at the stop's SIGKILL (grace plus the 2 s
	// minimum).
	hctx := ctx
	if c.Lifecycle.PreStop.Exec != nil {
		hctx = context.WithoutCancel(ctx)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if out, err := m.runHandler(hctx, pod, c, id, c.Lifecycle.PreStop, nil); err != nil {
			m.log.Warn("preStop hook failed", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "error", err, "output", out)
		}
	}()
	select {
	case <-done:
	case <-ctx.Done():
		m.log.Info("preStop hook not done within the grace period", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "grace", grace)
	}
}
