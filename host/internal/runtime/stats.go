package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wasmlet/wasmlet/host/internal/container"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Stats lists the managed sandboxes and containers and their CRI stats. A
// runtime that does not implement ListContainerStats (gRPC Unimplemented)
// leaves ContainerStats empty, any other error of it fails the call; an
// error of ListPodSandboxStats leaves SandboxStats nil. A stats call the
// runtime answered Unimplemented once is not asked again.
func (m *Manager) Stats(ctx context.Context) (*container.RuntimeStats, error) {
	sel := map[string]string{LabelManaged: "true"}
	var s container.RuntimeStats
	var err error
	if s.Sandboxes, err = m.rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel}); err != nil {
		return nil, fmt.Errorf("runtime: list sandboxes: %w", err)
	}
	if s.Containers, err = m.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel}); err != nil {
		return nil, fmt.Errorf("runtime: list containers: %w", err)
	}
	var cs []*runtimeapi.ContainerStats
	if !m.lacking("ListContainerStats") {
		cs, err = m.rs.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{LabelSelector: sel})
		if err != nil && !m.unimplemented("ListContainerStats", err) {
			return nil, fmt.Errorf("runtime: container stats: %w", err)
		}
	}
	s.ContainerStats = make(map[string]*runtimeapi.ContainerStats, len(cs))
	for _, c := range cs {
		if c.GetAttributes() != nil {
			s.ContainerStats[c.Attributes.Id] = c
		}
	}
	if m.lacking("ListPodSandboxStats") {
		s.SandboxStatsErr = errors.New("runtime: sandbox stats: the runtime does not implement ListPodSandboxStats")
		return &s, nil
	}
	ss, err := m.rs.ListPodSandboxStats(ctx, &runtimeapi.PodSandboxStatsFilter{LabelSelector: sel})
	if err != nil {
		m.unimplemented("ListPodSandboxStats", err)
		s.SandboxStatsErr = fmt.Errorf("runtime: sandbox stats: %w", err)
	} else {
		s.SandboxStats = make(map[string]*runtimeapi.PodSandboxStats, len(ss))
		for _, x := range ss {
			if x.GetAttributes() != nil {
				s.SandboxStats[x.Attributes.Id] = x
			}
		}
	}
	return &s, nil
}

// lacking reports whether the runtime answered call Unimplemented before.
func (m *Manager) lacking(call string) bool {
	_, ok := m.lacks.Load(call)
	return ok
}

// unimplemented reports whether err is the runtime's Unimplemented; the
// first time for call, it remembers and logs it once, at info level.
func (m *Manager) unimplemented(call string, err error) bool {
	if grpcstatus.Code(err) != codes.Unimplemented {
		return false
	}
	if _, seen := m.lacks.LoadOrStore(call, struct{}{}); !seen {
		m.log.Info("the runtime does not implement a stats call; it is not asked again", "call", call, "runtime", m.name, "error", grpcstatus.Convert(err).Message())
	}
	return true
}

// SandboxPID is the process ID of a sandbox's pause process, from the
// runtime's verbose sandbox status (containerd's "info.pid"); 0 when the
// runtime does not tell it. Its /proc/<pid>/net/dev is the pod's network.
func (m *Manager) SandboxPID(ctx context.Context, sandboxID string) (int, error) {
	resp, err := m.rs.PodSandboxStatus(ctx, sandboxID, true)
	if err != nil {
		return 0, fmt.Errorf("runtime: status of sandbox %s: %w", sandboxID, err)
	}
	raw, ok := resp.GetInfo()["info"]
	if !ok {
		return 0, nil
	}
	var info struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(raw), &info); err != nil {
		return 0, fmt.Errorf("runtime: verbose status of sandbox %s: %w", sandboxID, err)
	}
	return info.PID, nil
}
