package runtime

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/wasmlet/wasmlet/host/internal/container"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// LogFile is the CRI log file of the pod's container: its newest
// instance, or with previous the one before it, as `kubectl logs
// [--previous]` reads them. running tells whether that instance still
// runs (a follow ends when it stops); it asks the runtime each time.
func (m *Manager) LogFile(ctx context.Context, pod *v1.Pod, name string, previous bool) (path string, running func() bool, err error) {
	st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return "", nil, err
	}
	var instances []*container.ContainerStatus
	for _, c := range st.Containers {
		if c.Name == name {
			instances = append(instances, c)
		}
	}
	idx := 0
	if previous {
		// The kubelet's previous is the last terminated instance: the
		// one before a running one, or the newest itself when it has
		// exited and waits to restart (its status's lastState).
		idx = 1
		if len(instances) > 0 && instances[0].State == container.StateExited {
			idx = 0
		}
	}
	if len(instances) <= idx {
		if previous {
			return "", nil, fmt.Errorf("previous terminated container %q in pod %q not found", name, pod.Name)
		}
		if reason, msg, ok := m.WaitingReason(pod.UID, name); ok {
			return "", nil, fmt.Errorf("container %q in pod %q is waiting to start: %s: %s", name, pod.Name, reason, msg)
		}
		return "", nil, fmt.Errorf("container %q in pod %q is waiting to start: ContainerCreating", name, pod.Name)
	}
	c := instances[idx]
	path = filepath.Join(m.PodLogDir(pod.Namespace, pod.Name, pod.UID), name, strconv.Itoa(c.RestartCount)+".log")
	id := c.ID
	running = func() bool {
		if c.State != container.StateRunning {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := m.rs.ContainerStatus(ctx, id, false)
		if err != nil {
			// Unknown: keep following; the client's context ends it.
			return true
		}
		return resp.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING
	}
	return path, running, nil
}
