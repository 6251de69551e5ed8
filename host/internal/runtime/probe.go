package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wasmlet/wasmlet/host/internal/podspec"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	criclient "k8s.io/cri-client/pkg"
	utilexec "k8s.io/utils/exec"
)

// ExecSync runs cmd in the container (by runtime ID) within timeout and
// returns its stdout and stderr together and its exit code; a non-zero
// exit is not an error, a timeout is one that wraps
// context.DeadlineExceeded. It is what exec probes run.
func (m *Manager) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, int, error) {
	stdout, stderr, err := m.rs.ExecSync(ctx, containerID, cmd, timeout)
	out := append(stdout, stderr...)
	var exit utilexec.CodeExitError
	if errors.As(err, &exit) {
		return out, exit.Code, nil
	}
	if errors.Is(err, criclient.ErrCommandTimedOut) {
		// Timed out: a failed probe, as the kubelet counts it.
		return out, -1, fmt.Errorf("%w: %v", context.DeadlineExceeded, err)
	}
	if err != nil {
		return out, -1, err
	}
	return out, 0, nil
}

// KillContainer stops one container of pod gracefully (its PreStop hooks
// within the grace period, or gracePeriod when not nil), as a failed
// liveness or startup probe asks; the next sync restarts it as the
// restart policy says. While it runs, SyncPod does nothing for the pod (a
// sidecar that exits meanwhile is not restarted during the container's
// PreStop hook), as the kubelet, which kills such a container within the
// pod's sync.
func (m *Manager) KillContainer(ctx context.Context, pod *v1.Pod, container, containerID, message string, gracePeriod *int64) error {
	m.markProbeKilled(containerID)
	m.probeKillStarts(pod.UID)
	defer m.probeKillEnds(pod.UID)
	return m.killContainer(ctx, pod, podspec.FindContainer(pod, container), containerID, message, gracePeriod)
}

// probeKillStarts records that a kill for a failed probe runs for the pod.
func (m *Manager) probeKillStarts(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.probeKills[uid]++
}

// probeKillEnds records that a kill probeKillStarts recorded is over.
func (m *Manager) probeKillEnds(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.probeKills[uid]--; m.probeKills[uid] <= 0 {
		delete(m.probeKills, uid)
	}
}

// probeKillRunning reports whether a kill for a failed probe runs for the
// pod.
func (m *Manager) probeKillRunning(uid types.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.probeKills[uid] > 0
}

// markProbeKilled records that the container instance is being stopped for
// a failed probe (container.ContainerStatus.KilledByProbe).
func (m *Manager) markProbeKilled(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.probeKilled.add(id)
}

// killedByProbe reports whether the container instance was stopped for a
// failed probe.
func (m *Manager) killedByProbe(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.probeKilled[id]
	return ok
}
