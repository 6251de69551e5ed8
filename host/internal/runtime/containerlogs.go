package runtime

import (
	"context"
	"fmt"

	"github.com/wasmlet/wasmlet/host/internal/container"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RunningContainerLogs lists the log files of the managed running
// containers (from each one's status, as the kubelet's log manager reads
// them). A container that is gone by the time its status is asked is left
// out.
func (m *Manager) RunningContainerLogs(ctx context.Context) ([]container.ContainerLog, error) {
	cs, err := m.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{LabelManaged: "true"},
	})
	if err != nil {
		return nil, fmt.Errorf("runtime: list running containers: %w", err)
	}
	var out []container.ContainerLog
	for _, c := range cs {
		st, err := m.rs.ContainerStatus(ctx, c.Id, false)
		if err != nil || st.GetStatus() == nil {
			continue
		}
		if p := st.Status.GetLogPath(); p != "" && st.Status.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			out = append(out, container.ContainerLog{ID: c.Id, Path: p})
		}
	}
	return out, nil
}

// ReopenContainerLog asks the runtime to reopen a container's log file
// (after it was renamed away by rotation).
func (m *Manager) ReopenContainerLog(ctx context.Context, id string) error {
	if err := m.rs.ReopenContainerLog(ctx, id); err != nil {
		return fmt.Errorf("runtime: reopen the log of container %s: %w", id, err)
	}
	return nil
}
