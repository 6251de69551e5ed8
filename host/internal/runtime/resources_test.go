package runtime

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type fakeCgroups struct{ ensured []types.UID }

func (f *fakeCgroups) Parent(pod *v1.Pod) string { return "/kubepods/burstable/pod" + string(pod.UID) }
func (f *fakeCgroups) Ensure(pod *v1.Pod) error  { f.ensured = append(f.ensured, pod.UID); return nil }
func (f *fakeCgroups) Remove(types.UID) error    { return nil }
func (f *fakeCgroups) Pods() []types.UID         { return nil }
func (f *fakeCgroups) Resize(*v1.Pod, v1.ResourceName) error {
	return nil
}
func (f *fakeCgroups) MemoryUsage(*v1.Pod) (int64, error) { return 0, nil }

// The sandbox and container configs carry what the kubelet sends for the
// pod's resources: the pod cgroup as parent, the summed sandbox
// resources, the runtime-default seccomp profile of the sandbox, an empty
// sysctl map, cpu/memory per container and the OOM score of the QoS class.
func TestResourcesInConfigs(t *testing.T) {
	q := resource.MustParse
	m := &Manager{cfg: Config{Cgroups: &fakeCgroups{}, MemoryCapacity: 10 << 30}}
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "p", "default", "u1"
	pod.Spec.Containers = []v1.Container{
		{Name: "a", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: q("250m"), v1.ResourceMemory: q("1Gi")},
			Limits: v1.ResourceList{v1.ResourceCPU: q("500m"), v1.ResourceMemory: q("2Gi")}}},
		{Name: "b"},
	}
	sb := m.sandboxConfig(pod, 0)
	if sb.Linux.CgroupParent != "/kubepods/burstable/podu1" {
		t.Errorf("cgroup parent %q", sb.Linux.CgroupParent)
	}
	if sb.Linux.SecurityContext.Seccomp.GetProfileType() != runtimeapi.SecurityProfile_RuntimeDefault {
		t.Errorf("sandbox seccomp %v, want RuntimeDefault", sb.Linux.SecurityContext.Seccomp)
	}
	if sb.Linux.Sysctls == nil || len(sb.Linux.Sysctls) != 0 {
		t.Errorf("sysctls %v, want an empty map", sb.Linux.Sysctls)
	}
	if r := sb.Linux.Resources; r.CpuShares != 256 || r.CpuPeriod != 100000 || r.CpuQuota != 50000 || r.MemoryLimitInBytes != 2<<30 {
		t.Errorf("sandbox resources %+v: want the summed requests and limits (shares 256, quota 50000, 2 GiB)", r)
	}
	a := m.resources(pod, &pod.Spec.Containers[0])
	if a.CpuShares != 256 || a.CpuQuota != 50000 || a.MemoryLimitInBytes != 2<<30 || a.OomScoreAdj != 900 {
		t.Errorf("container a %+v", a)
	}
	b := m.resources(pod, &pod.Spec.Containers[1])
	if b.CpuShares != 2 || b.CpuPeriod != 100000 || b.OomScoreAdj != 999 {
		t.Errorf("container b %+v: want 2 shares and 999 (Burstable, no request)", b)
	}
	pod.Spec.Containers = pod.Spec.Containers[1:]
	if be := m.resources(pod, &pod.Spec.Containers[0]); be.OomScoreAdj != 1000 {
		t.Errorf("BestEffort container: oom_score_adj %d, want 1000", be.OomScoreAdj)
	}
}
