package runtime

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmlet/wasmlet/host/internal/container"
	"github.com/wasmlet/wasmlet/host/internal/qos"
)

// calls is the order of the resize's runtime and pod cgroup calls.
type calls struct{ log []string }

// resizeRuntime records UpdateContainerResources and answers
// ContainerStats with a memory usage per container ID.
type resizeRuntime struct {
	cri.RuntimeService
	calls *calls
	usage map[string]uint64
}

func (r resizeRuntime) UpdateContainerResources(_ context.Context, id string, res *runtimeapi.ContainerResources) error {
	r.calls.log = append(r.calls.log, fmt.Sprintf("update %s mem=%d quota=%d", id, res.Linux.MemoryLimitInBytes, res.Linux.CpuQuota))
	return nil
}

func (r resizeRuntime) ContainerStats(_ context.Context, id string) (*runtimeapi.ContainerStats, error) {
	return &runtimeapi.ContainerStats{Memory: &runtimeapi.MemoryUsage{UsageBytes: &runtimeapi.UInt64Value{Value: r.usage[id]}}}, nil
}

type resizeCgroups struct {
	*fakeCgroups
	calls *calls
}

func (c resizeCgroups) Resize(pod *v1.Pod, r v1.ResourceName) error {
	pc := qos.ForPodCgroup(pod)
	if r == v1.ResourceMemory {
		c.calls.log = append(c.calls.log, fmt.Sprintf("pod cgroup mem=%d", *pc.MemoryLimit))
	} else {
		c.calls.log = append(c.calls.log, fmt.Sprintf("pod cgroup quota=%d", *pc.CPUQuota))
	}
	return nil
}

func (c resizeCgroups) MemoryUsage(*v1.Pod) (int64, error) { return 0, nil }

// resizeHooks records the PreUpdate point in the same order as the
// runtime's calls and refuses the update of the container named refuse.
type resizeHooks struct {
	container.Hooks
	calls  *calls
	refuse string
}

func (h resizeHooks) PreUpdate(_ context.Context, _ *v1.Pod, c *v1.Container, r *runtimeapi.LinuxContainerResources) error {
	h.calls.log = append(h.calls.log, fmt.Sprintf("PreUpdate %s mem=%d quota=%d", c.Name, r.MemoryLimitInBytes, r.CpuQuota))
	if c.Name == h.refuse {
		return fmt.Errorf("refused by the test hook")
	}
	return nil
}

type actuation map[string]v1.ResourceRequirements

func (a actuation) Actuated(_ types.UID, name string) (v1.ResourceRequirements, bool) {
	r, ok := a[name]
	return r, ok
}

func (a actuation) SetActuated(_ types.UID, name string, r v1.ResourceRequirements) error {
	a[name] = r
	return nil
}

func guaranteed(cpu, mem string) v1.ResourceRequirements {
	r := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}
	return v1.ResourceRequirements{Requests: r, Limits: r.DeepCopy()}
}

// An in-place resize runs in the kubelet's order: memory then cpu; for
// each, a growing pod cgroup before the containers and a shrinking one
// after them, the containers whose resource decreases first; a memory
// limit below the container's usage stops the resize before its update;
// the sync hooks' PreUpdate sees each update's resources before the
// runtime does, and its refusal stops that update.
func TestManager_resizePod(t *testing.T) {
	const mi = 1 << 20
	tests := []struct {
		name    string
		usage   map[string]uint64
		refuse  string
		want    []string
		wantErr string
	}{
		{
			name: "memory grows, cpu shrinks",
			want: []string{
				fmt.Sprintf("pod cgroup mem=%d", 400*mi),
				fmt.Sprintf("PreUpdate a mem=%d quota=%d", 100*mi, 50000),
				fmt.Sprintf("update id-a mem=%d quota=%d", 100*mi, 50000), // a's memory decreases: first
				fmt.Sprintf("PreUpdate b mem=%d quota=%d", 300*mi, 100000),
				fmt.Sprintf("update id-b mem=%d quota=%d", 300*mi, 100000),
				fmt.Sprintf("PreUpdate b mem=%d quota=%d", 300*mi, 25000),
				fmt.Sprintf("update id-b mem=%d quota=%d", 300*mi, 25000), // b's cpu decreases: first
				fmt.Sprintf("PreUpdate a mem=%d quota=%d", 100*mi, 100000),
				fmt.Sprintf("update id-a mem=%d quota=%d", 100*mi, 100000),
				"pod cgroup quota=125000",
			},
		},
		{
			name:   "a hook refuses the update",
			refuse: "a",
			want: []string{
				fmt.Sprintf("pod cgroup mem=%d", 400*mi),
				fmt.Sprintf("PreUpdate a mem=%d quota=%d", 100*mi, 50000),
			},
			wantErr: "container a: PreUpdate hook: refused by the test hook",
		},
		{
			name:    "memory limit below usage",
			usage:   map[string]uint64{"id-a": 150 * mi},
			want:    []string{fmt.Sprintf("pod cgroup mem=%d", 400*mi)},
			wantErr: fmt.Sprintf("container a: memory limit %d would be below its memory usage %d", 100*mi, 150*mi),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &calls{}
			act := actuation{"a": guaranteed("500m", "200Mi"), "b": guaranteed("1", "100Mi")}
			m := &Manager{cfg: Config{Cgroups: resizeCgroups{fakeCgroups: &fakeCgroups{}, calls: c}, Actuation: act, Hooks: resizeHooks{calls: c, refuse: tt.refuse}},
				rs: resizeRuntime{calls: c, usage: tt.usage}}
			pod := testPod("u1", v1.RestartPolicyAlways, "a", "b")
			pod.Spec.Containers[0].Resources = guaranteed("1", "100Mi")
			pod.Spec.Containers[1].Resources = guaranteed("250m", "300Mi")
			st := &container.PodStatus{Containers: []*container.ContainerStatus{
				{ID: "id-a", Name: "a", State: container.StateRunning}, {ID: "id-b", Name: "b", State: container.StateRunning}}}
			a := podActions{ContainersToKill: map[string]killInfo{}}
			targets := m.computeResize(pod, st, &a)
			if len(targets) != 2 || len(a.ContainersToKill) != 0 {
				t.Fatalf("targets %d, kills %d: want 2 in place, none killed", len(targets), len(a.ContainersToKill))
			}
			err := m.resizePod(context.Background(), pod, targets)
			if got := fmt.Sprint(err); (tt.wantErr == "" && err != nil) || (tt.wantErr != "" && got != tt.wantErr) {
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
			if strings.Join(c.log, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(c.log, "\n"), strings.Join(tt.want, "\n"))
			}
			if tt.wantErr == "" {
				for i, name := range []string{"a", "b"} {
					if r := act[name]; r.Limits.Cpu().Cmp(*pod.Spec.Containers[i].Resources.Limits.Cpu()) != 0 || r.Limits.Memory().Cmp(*pod.Spec.Containers[i].Resources.Limits.Memory()) != 0 {
						t.Errorf("actuated %s: %v, want its allocation", name, r.Limits)
					}
				}
			}
		})
	}
}

// A changed resource whose resizePolicy is RestartContainer restarts the
// container instead: it is killed and started again with its allocation,
// an app container among the containers to start, a sidecar among the
// sidecars to restart.
func TestManager_computeResize(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	for _, sidecar := range []bool{false, true} {
		t.Run(fmt.Sprintf("sidecar=%v", sidecar), func(t *testing.T) {
			m := &Manager{cfg: Config{Actuation: actuation{"a": guaranteed("500m", "100Mi")}}}
			pod := testPod("u1", v1.RestartPolicyAlways, "a")
			pod.Spec.Containers[0].Resources = guaranteed("500m", "200Mi")
			pod.Spec.Containers[0].ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}}
			if sidecar {
				pod.Spec.InitContainers = []v1.Container{pod.Spec.Containers[0]}
				pod.Spec.InitContainers[0].RestartPolicy = &always
				pod.Spec.Containers[0].Name = "main"
			}
			st := &container.PodStatus{Containers: []*container.ContainerStatus{{ID: "id-a", Name: "a", State: container.StateRunning}}}
			a := podActions{ContainersToKill: map[string]killInfo{}}
			if targets := m.computeResize(pod, st, &a); len(targets) != 0 {
				t.Errorf("%d in place, want none", len(targets))
			}
			restarted := len(a.ContainersToStart) == 1
			if sidecar {
				restarted = len(a.SidecarsToRestart) == 1 && a.SidecarsToRestart[0].Name == "a"
			}
			if k, ok := a.ContainersToKill["id-a"]; !ok || k.message != "Container a resize requires restart" || !restarted {
				t.Errorf("kills %+v starts %v sidecars %d, want a restarted", a.ContainersToKill, a.ContainersToStart, len(a.SidecarsToRestart))
			}
		})
	}
}
