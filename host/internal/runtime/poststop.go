package runtime

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmlet/wasmlet/host/internal/container"
	"github.com/wasmlet/wasmlet/host/internal/podspec"
)

// instances records container instances by ID with when they were
// recorded; entries older than a day are pruned as new ones come.
type instances map[string]time.Time

// add records id and reports whether it was new.
func (s instances) add(id string) bool {
	if _, ok := s[id]; ok {
		return false
	}
	now := time.Now()
	for k, t := range s {
		if now.Sub(t) > 24*time.Hour {
			delete(s, k)
		}
	}
	s[id] = now
	return true
}

// postStopExited calls the PostStop hooks once for each container of
// status that has exited, from the status the sync already has (no CRI
// call). Nothing is done when no hook subscribes to PostStop.
func (m *Manager) postStopExited(ctx context.Context, pod *v1.Pod, status *container.PodStatus) {
	if m.cfg.Hooks == nil || !m.cfg.Hooks.Subscribed(container.HookPostStop) {
		return
	}
	for _, cs := range status.Containers {
		if cs.State != container.StateExited {
			continue
		}
		code := cs.ExitCode
		m.postStop(ctx, pod, podspec.FindContainer(pod, cs.Name), cs.ID, container.Exit{Code: &code, Reason: cs.Reason})
	}
}

// postStopKilled calls the PostStop hooks for the container id just
// stopped, reading its status from the runtime for the exit code; only
// when a hook subscribes to PostStop.
func (m *Manager) postStopKilled(ctx context.Context, pod *v1.Pod, spec *v1.Container, id string) {
	if m.cfg.Hooks == nil || pod == nil || spec == nil || !m.cfg.Hooks.Subscribed(container.HookPostStop) {
		return
	}
	resp, err := m.rs.ContainerStatus(ctx, id, false)
	if err != nil || resp.GetStatus() == nil {
		m.log.Warn("PostStop hook: status of stopped container", "pod", podspec.Name(pod), "container", spec.Name, "id", id, "error", err)
		return
	}
	st := resp.GetStatus()
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		return
	}
	code := st.ExitCode
	m.postStop(ctx, pod, spec, id, container.Exit{Code: &code, Reason: st.Reason})
}

// postStop calls the PostStop hooks for container instance id, once.
func (m *Manager) postStop(ctx context.Context, pod *v1.Pod, c *v1.Container, id string, exit container.Exit) {
	if c == nil {
		return
	}
	m.mu.Lock()
	fresh := m.postStopped.add(id)
	m.mu.Unlock()
	if !fresh {
		return
	}
	if err := m.cfg.Hooks.PostStop(ctx, pod, c, exit); err != nil {
		m.log.Warn("PostStop hook", "pod", podspec.Name(pod), "container", c.Name, "error", err)
	}
}

// PreUpdate calls the PreUpdate hooks before c's resources are changed to
// resources (UpdateContainerResources); an error means the change must not
// be made. Without hooks it does nothing.
func (m *Manager) PreUpdate(ctx context.Context, pod *v1.Pod, c *v1.Container, resources *runtimeapi.LinuxContainerResources) error {
	if m.cfg.Hooks == nil {
		return nil
	}
	return m.cfg.Hooks.PreUpdate(ctx, pod, c, resources)
}
