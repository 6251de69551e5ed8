package qos

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

var q = resource.MustParse

func podWith(res ...v1.ResourceRequirements) *v1.Pod {
	p := &v1.Pod{}
	for i, r := range res {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: string(rune('a' + i)), Resources: r})
	}
	return p
}

func TestClass(t *testing.T) {
	cpuMem := func(c, m string) v1.ResourceList {
		return v1.ResourceList{v1.ResourceCPU: q(c), v1.ResourceMemory: q(m)}
	}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want v1.PodQOSClass
	}{
		{"nothing", podWith(v1.ResourceRequirements{}), v1.PodQOSBestEffort},
		{"only other resources", podWith(v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceEphemeralStorage: q("1Gi")}}), v1.PodQOSBestEffort},
		{"zero request", podWith(v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: q("0")}}), v1.PodQOSBestEffort},
		{"cpu request", podWith(v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: q("100m")}}), v1.PodQOSBurstable},
		{"limits only", podWith(v1.ResourceRequirements{Limits: cpuMem("1", "1Gi")}), v1.PodQOSBurstable},
		{"limits equal requests", podWith(v1.ResourceRequirements{Limits: cpuMem("1", "1Gi"), Requests: cpuMem("1000m", "1024Mi")}), v1.PodQOSGuaranteed},
		{"request below limit", podWith(v1.ResourceRequirements{Limits: cpuMem("1", "1Gi"), Requests: cpuMem("500m", "1Gi")}), v1.PodQOSBurstable},
		{"one container without memory limit", podWith(
			v1.ResourceRequirements{Limits: cpuMem("1", "1Gi"), Requests: cpuMem("1", "1Gi")},
			v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: q("1")}, Requests: v1.ResourceList{v1.ResourceCPU: q("1")}}), v1.PodQOSBurstable},
		{"pod-level resources", &v1.Pod{Spec: v1.PodSpec{Resources: &v1.ResourceRequirements{Limits: cpuMem("2", "2Gi"), Requests: cpuMem("2", "2Gi")},
			Containers: []v1.Container{{Name: "a"}}}}, v1.PodQOSGuaranteed},
	} {
		if got := Class(tc.pod); got != tc.want {
			t.Errorf("%s: Class = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestOOMScoreAdjust(t *testing.T) {
	const capacity = 10 << 30 // 10 GiB
	lim := v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("1Gi")}
	guaranteed := podWith(v1.ResourceRequirements{Limits: lim, Requests: lim})
	burstable := func(mem string) *v1.Pod {
		return podWith(v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: q(mem)}})
	}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want int64
	}{
		{"best effort", podWith(v1.ResourceRequirements{}), 1000},
		{"guaranteed", guaranteed, -997},
		{"burstable, 10% of memory", burstable("1Gi"), 900},
		{"burstable, tiny request", burstable("1Ki"), 999},
		{"burstable, more than the node", burstable("20Gi"), 3},
	} {
		if got := OOMScoreAdjust(tc.pod, &tc.pod.Spec.Containers[0], capacity); got != tc.want {
			t.Errorf("%s: OOMScoreAdjust = %d, want %d", tc.name, got, tc.want)
		}
	}
	// A node-critical static pod is treated as Guaranteed.
	p := burstable("1Gi")
	p.Spec.PriorityClassName = "system-node-critical"
	p.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	if got := OOMScoreAdjust(p, &p.Spec.Containers[0], capacity); got != -997 {
		t.Errorf("node-critical static pod: %d, want -997", got)
	}
	// A sidecar gets no more than the smallest regular container.
	always := v1.ContainerRestartPolicyAlways
	p = burstable("2Gi")
	p.Spec.InitContainers = []v1.Container{{Name: "side", RestartPolicy: &always, Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: q("1Gi")}}}}
	if got := OOMScoreAdjust(p, &p.Spec.InitContainers[0], capacity); got != 800 {
		t.Errorf("sidecar: %d, want 800 (the regular container's)", got)
	}
}

func TestSharesQuota(t *testing.T) {
	for _, tc := range []struct{ milli, shares, quota int64 }{
		{0, 2, 0}, {1, 2, 1000}, {100, 102, 10000}, {1000, 1024, 100000}, {1000000, 262144, 100000000},
	} {
		if s := Shares(tc.milli); s != tc.shares {
			t.Errorf("Shares(%d) = %d, want %d", tc.milli, s, tc.shares)
		}
		if qu := Quota(tc.milli); qu != tc.quota {
			t.Errorf("Quota(%d) = %d, want %d", tc.milli, qu, tc.quota)
		}
	}
}

func TestContainerAndSandbox(t *testing.T) {
	p := podWith(
		v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: q("250m")}, Limits: v1.ResourceList{v1.ResourceCPU: q("500m"), v1.ResourceMemory: q("64Mi")}},
		v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: q("100m")}},
	)
	if got, want := Container(p, &p.Spec.Containers[0]), (Resources{CPUShares: 256, CPUPeriod: 100000, CPUQuota: 50000, MemoryLimit: 64 << 20}); got != want {
		t.Errorf("container 0: %+v, want %+v", got, want)
	}
	// No request: shares from the limit.
	if got, want := Container(p, &p.Spec.Containers[1]), (Resources{CPUShares: 102, CPUPeriod: 100000, CPUQuota: 10000}); got != want {
		t.Errorf("container 1: %+v, want %+v", got, want)
	}
	// Nothing at all: minimal shares, the period, no quota or limit.
	empty := podWith(v1.ResourceRequirements{})
	if got, want := Container(empty, &empty.Spec.Containers[0]), (Resources{CPUShares: 2, CPUPeriod: 100000}); got != want {
		t.Errorf("empty container: %+v, want %+v", got, want)
	}
	if got, want := Sandbox(p), (Resources{CPUShares: 256, CPUPeriod: 100000, CPUQuota: 60000, MemoryLimit: 64 << 20}); got != want {
		t.Errorf("sandbox: %+v, want %+v", got, want)
	}
}

func TestForPodCgroup(t *testing.T) {
	// Burstable with every container limiting cpu but not memory: quota, no memory limit.
	p := podWith(
		v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: q("250m")}, Limits: v1.ResourceList{v1.ResourceCPU: q("500m")}},
		v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: q("100m"), v1.ResourceMemory: q("10Mi")}},
	)
	c := ForPodCgroup(p)
	if c.CPUShares != Shares(250) || c.CPUQuota == nil || *c.CPUQuota != 60000 || c.MemoryLimit != nil {
		t.Errorf("burstable: %+v", c)
	}
	be := ForPodCgroup(podWith(v1.ResourceRequirements{}))
	if be.CPUShares != MinShares || be.CPUQuota != nil || be.MemoryLimit != nil {
		t.Errorf("best effort: %+v", be)
	}
	lim := v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("1Gi")}
	g := podWith(v1.ResourceRequirements{Limits: lim, Requests: lim})
	gc := ForPodCgroup(g)
	if gc.CPUShares != 1024 || gc.CPUQuota == nil || *gc.CPUQuota != 100000 || gc.MemoryLimit == nil || *gc.MemoryLimit != 1<<30 {
		t.Errorf("guaranteed: %+v", gc)
	}
}
