//go:build e2e_apiserver

package e2eapi

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

// TestResize: in-place pod resize through `kubectl patch --subresource
// resize`, as a user asks for it.
//
// On containerd:
//  1. a resize is applied in place: the cgroup files inside the container
//     and the pod cgroup on the host change, restartCount stays 0;
//  2. a resource whose resizePolicy is RestartContainer restarts the
//     container (restartCount 1) with its new resources;
//  3. a resize that does not fit beside another pod is Deferred until that
//     pod goes, then applied;
//  4. a resize made while the agent is down is applied after its restart;
//  5. the API server refuses a resize above the node's allocatable.
//
// On the embedded runtime, a resize it would have to apply in place is
// PodResizePending Infeasible with a message naming the runtime, and the
// container is left as it was.
func TestResize(t *testing.T) {
	if *kubectlFlag == "" {
		t.Skip("no -kubectl")
	}
	a := newAgent(t)
	a.start(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("wasmlet log tail:\n%s", a.LogTail(80))
		}
		a.Stop(t)
	})
	waitNodeReady(t)
	if flags.Runtime != "containerd" {
		testResizeEmbedded(t)
		return
	}
	for _, c := range []struct {
		name string
		f    func(*testing.T, *agent)
	}{
		{"InPlace", testResizeInPlace},
		{"RestartContainer", testResizeRestart},
		{"Deferred", testResizeDeferred},
		{"WhileAgentDown", testResizeAgentDown},
		{"AboveAllocatable", testResizeAboveAllocatable},
	} {
		if !t.Run(c.name, func(t *testing.T) { c.f(t, a) }) {
			t.Logf("wasmlet log tail after %s:\n%s", c.name, a.LogTail(40))
		}
	}
}

func waitNodeReady(t *testing.T) {
	t.Helper()
	harness.Eventually(t, 90*time.Second, "node Ready", func() (bool, string) {
		ctx, cancel := ctxT(5 * time.Second)
		defer cancel()
		n, err := admin.CoreV1().Nodes().Get(ctx, *nodeFlag, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.Status == v1.ConditionTrue, c.Message
			}
		}
		return false, "no Ready condition"
	})
}

// resizePod is a Guaranteed pod of cpu and mem whose container restarts
// for a memory resize when memRestart is set.
func resizePod(name, cpu, mem string, memRestart bool) *v1.Pod {
	p := newPod(name, "sleep", "inf")
	c := &p.Spec.Containers[0]
	if flags.Runtime == "containerd" {
		c.Image, c.Args, c.Command = *busyboxFlag, nil, []string{"sh", "-c", "sleep 3600"}
	}
	c.Resources = guaranteedResources(cpu, mem)
	memPolicy := v1.NotRequired
	if memRestart {
		memPolicy = v1.RestartContainer
	}
	c.ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: v1.ResourceCPU, RestartPolicy: v1.NotRequired}, {ResourceName: v1.ResourceMemory, RestartPolicy: memPolicy}}
	return p
}

func guaranteedResources(cpu, mem string) v1.ResourceRequirements {
	l := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}
	return v1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}
}

// patchResize asks for a resize with kubectl, as a user does.
func patchResize(t *testing.T, name, cpu, mem string) kubectlResult {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"containers":[{"name":"main","resources":{"requests":{"cpu":%q,"memory":%q},"limits":{"cpu":%q,"memory":%q}}}]}}`, cpu, mem, cpu, mem)
	return kubectl(t, 30*time.Second, "", "patch", "pod", name, "--subresource", "resize", "--type", "strategic", "-p", patch)
}

func mustPatchResize(t *testing.T, name, cpu, mem string) {
	t.Helper()
	if r := patchResize(t, name, cpu, mem); r.code != 0 {
		t.Fatalf("kubectl patch --subresource resize %s: exit %d: %s", name, r.code, r.stderr)
	}
}

// resizedTo reports whether the pod runs at cpu and mem as its status
// shows (resources and allocatedResources) with no resize condition left.
func resizedTo(cpu, mem string) func(*v1.Pod) bool {
	want := guaranteedResources(cpu, mem)
	return func(p *v1.Pod) bool {
		if len(p.Status.ContainerStatuses) != 1 || p.Status.ObservedGeneration != p.Generation {
			return false
		}
		cs := p.Status.ContainerStatuses[0]
		if cs.State.Running == nil || cs.Resources == nil {
			return false
		}
		for _, l := range []struct{ got, want v1.ResourceList }{{cs.Resources.Limits, want.Limits}, {cs.Resources.Requests, want.Requests}, {cs.AllocatedResources, want.Requests}} {
			if l.got.Cpu().Cmp(*l.want.Cpu()) != 0 || l.got.Memory().Cmp(*l.want.Memory()) != 0 {
				return false
			}
		}
		return condition(p, v1.PodResizePending) == "" && condition(p, v1.PodResizeInProgress) == ""
	}
}

func resizeCondition(p *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// cgroupValues are the container's cpu quota and memory limit as its own
// cgroup files show them (v2 cpu.max and memory.max, or v1's files).
func cgroupValues(t *testing.T, pod string) string {
	t.Helper()
	r := kubectl(t, time.Minute, "", "exec", pod, "-c", "main", "--", "sh", "-c",
		`if [ -f /sys/fs/cgroup/cpu.max ]; then cat /sys/fs/cgroup/cpu.max /sys/fs/cgroup/memory.max; else cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/memory/memory.limit_in_bytes; fi`)
	if r.code != 0 {
		t.Fatalf("kubectl exec %s: exit %d: %s", pod, r.code, r.stderr)
	}
	return strings.Join(strings.Fields(r.stdout), " ")
}

// podCgroupValues are the pod cgroup's cpu quota and memory limit on the
// host (a Guaranteed pod's cgroup is kubepods/pod<uid>).
func podCgroupValues(t *testing.T, p *v1.Pod) string {
	t.Helper()
	files := []string{"/sys/fs/cgroup/kubepods/pod" + string(p.UID) + "/cpu.max", "/sys/fs/cgroup/kubepods/pod" + string(p.UID) + "/memory.max"}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
		files = []string{"/sys/fs/cgroup/cpu/kubepods/pod" + string(p.UID) + "/cpu.cfs_quota_us", "/sys/fs/cgroup/memory/kubepods/pod" + string(p.UID) + "/memory.limit_in_bytes"}
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(filepath.Clean(f))
		if err != nil {
			t.Fatalf("pod cgroup: %v", err)
		}
		out = append(out, strings.Fields(string(b))...)
	}
	return strings.Join(out, " ")
}

// quotaAndLimit is what cgroupValues shows for cpu (milli) and mem bytes.
func quotaAndLimit(milli, bytes int64) string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return fmt.Sprintf("%d 100000 %d", milli*100, bytes)
	}
	return fmt.Sprintf("%d %d", milli*100, bytes)
}

func testResizeInPlace(t *testing.T, _ *agent) {
	p := resizePod("rs-inplace", "200m", "64Mi", false)
	createPod(t, p)
	t.Cleanup(func() { deletePod(t, p.Name) })
	before := waitPod(t, "default", p.Name, 90*time.Second, "Running at 200m/64Mi", resizedTo("200m", "64Mi"))
	if got, want := cgroupValues(t, p.Name), quotaAndLimit(200, 64<<20); got != want {
		t.Errorf("container cgroup before the resize %q, want %q", got, want)
	}
	mustPatchResize(t, p.Name, "300m", "96Mi")
	after := waitPod(t, "default", p.Name, 60*time.Second, "resized to 300m/96Mi", resizedTo("300m", "96Mi"))
	cs := after.Status.ContainerStatuses[0]
	if cs.RestartCount != 0 || cs.ContainerID != before.Status.ContainerStatuses[0].ContainerID {
		t.Errorf("restartCount %d, container %s (was %s): want the same container, not restarted", cs.RestartCount, cs.ContainerID, before.Status.ContainerStatuses[0].ContainerID)
	}
	if got, want := cgroupValues(t, p.Name), quotaAndLimit(300, 96<<20); got != want {
		t.Errorf("container cgroup after the resize %q, want %q", got, want)
	}
	if got, want := podCgroupValues(t, after), quotaAndLimit(300, 96<<20); got != want {
		t.Errorf("pod cgroup after the resize %q, want %q", got, want)
	}
}

func testResizeRestart(t *testing.T, _ *agent) {
	p := resizePod("rs-restart", "100m", "64Mi", true)
	createPod(t, p)
	t.Cleanup(func() { deletePod(t, p.Name) })
	waitPod(t, "default", p.Name, 90*time.Second, "Running", resizedTo("100m", "64Mi"))
	mustPatchResize(t, p.Name, "100m", "96Mi")
	after := waitPod(t, "default", p.Name, 90*time.Second, "restarted at 96Mi", func(p *v1.Pod) bool {
		return resizedTo("100m", "96Mi")(p) && p.Status.ContainerStatuses[0].RestartCount == 1
	})
	if got, want := cgroupValues(t, after.Name), quotaAndLimit(100, 96<<20); got != want {
		t.Errorf("container cgroup after the restart %q, want %q", got, want)
	}
}

func testResizeDeferred(t *testing.T, _ *agent) {
	ctx, cancel := ctxT(10 * time.Second)
	defer cancel()
	n, err := admin.CoreV1().Nodes().Get(ctx, *nodeFlag, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alloc := n.Status.Allocatable.Cpu().MilliValue()
	hold := fmt.Sprintf("%dm", alloc/2)
	grow := fmt.Sprintf("%dm", alloc/2+100)
	holder := resizePod("rs-holder", hold, "32Mi", false)
	createPod(t, holder)
	t.Cleanup(func() { // gone already unless the test stopped early
		ctx, cancel := ctxT(30 * time.Second)
		defer cancel()
		admin.CoreV1().Pods("default").Delete(ctx, holder.Name, metav1.DeleteOptions{})
	})
	waitPod(t, "default", holder.Name, 90*time.Second, "Running", harness.Running)
	p := resizePod("rs-deferred", "100m", "32Mi", false)
	createPod(t, p)
	t.Cleanup(func() { deletePod(t, p.Name) })
	waitPod(t, "default", p.Name, 90*time.Second, "Running", resizedTo("100m", "32Mi"))
	mustPatchResize(t, p.Name, grow, "32Mi")
	pending := waitPod(t, "default", p.Name, 60*time.Second, "PodResizePending Deferred", func(p *v1.Pod) bool {
		c := resizeCondition(p, v1.PodResizePending)
		return c != nil && c.Reason == v1.PodReasonDeferred
	})
	t.Logf("deferred: %s", resizeCondition(pending, v1.PodResizePending).Message)
	if cs := pending.Status.ContainerStatuses[0]; cs.Resources == nil || cs.Resources.Limits.Cpu().String() != "100m" {
		t.Errorf("while deferred the container runs at %v, want 100m", cs.Resources)
	}
	deletePod(t, holder.Name)
	after := waitPod(t, "default", p.Name, 120*time.Second, "resized once the holder went", resizedTo(grow, "32Mi"))
	if after.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("restartCount %d, want 0", after.Status.ContainerStatuses[0].RestartCount)
	}
}

func testResizeAgentDown(t *testing.T, a *agent) {
	p := resizePod("rs-down", "100m", "64Mi", false)
	createPod(t, p)
	t.Cleanup(func() { deletePod(t, p.Name) })
	before := waitPod(t, "default", p.Name, 90*time.Second, "Running", resizedTo("100m", "64Mi"))
	a.Stop(t)
	mustPatchResize(t, p.Name, "200m", "64Mi")
	a.start(t)
	after := waitPod(t, "default", p.Name, 90*time.Second, "resized after the agent's restart", resizedTo("200m", "64Mi"))
	cs := after.Status.ContainerStatuses[0]
	if cs.RestartCount != 0 || cs.ContainerID != before.Status.ContainerStatuses[0].ContainerID {
		t.Errorf("restartCount %d, container %s (was %s): want the same container", cs.RestartCount, cs.ContainerID, before.Status.ContainerStatuses[0].ContainerID)
	}
	if got, want := cgroupValues(t, p.Name), quotaAndLimit(200, 64<<20); got != want {
		t.Errorf("container cgroup %q, want %q", got, want)
	}
}

func testResizeAboveAllocatable(t *testing.T, _ *agent) {
	p := resizePod("rs-huge", "100m", "32Mi", false)
	createPod(t, p)
	t.Cleanup(func() { deletePod(t, p.Name) })
	waitPod(t, "default", p.Name, 90*time.Second, "Running", harness.Running)
	r := patchResize(t, p.Name, "1000", "32Mi")
	if r.code == 0 {
		t.Fatalf("a resize to 1000 cpus was accepted by the API server: %s", r.stdout)
	}
	t.Logf("refused: %s", strings.TrimSpace(r.stderr))
	got := waitPod(t, "default", p.Name, 10*time.Second, "Running", harness.Running)
	if got.Spec.Containers[0].Resources.Limits.Cpu().String() != "100m" {
		t.Errorf("spec cpu limit %s after the refusal, want 100m", got.Spec.Containers[0].Resources.Limits.Cpu())
	}
}

func testResizeEmbedded(t *testing.T) {
	p := resizePod("rs-wasi", "100m", "64Mi", false)
	createPod(t, p)
	t.Cleanup(func() { deletePod(t, p.Name) })
	before := waitPod(t, "default", p.Name, 90*time.Second, "Running", resizedTo("100m", "64Mi"))
	mustPatchResize(t, p.Name, "200m", "64Mi")
	pending := waitPod(t, "default", p.Name, 60*time.Second, "PodResizePending Infeasible", func(p *v1.Pod) bool {
		c := resizeCondition(p, v1.PodResizePending)
		return c != nil && c.Reason == v1.PodReasonInfeasible
	})
	c := resizeCondition(pending, v1.PodResizePending)
	if !strings.Contains(c.Message, "embedded WASI runtime") || !strings.Contains(c.Message, "container main: cpu") {
		t.Errorf("Infeasible message %q, want it to name the embedded WASI runtime and container main's cpu", c.Message)
	}
	cs := pending.Status.ContainerStatuses[0]
	if cs.RestartCount != 0 || cs.ContainerID != before.Status.ContainerStatuses[0].ContainerID || cs.Resources == nil || cs.Resources.Limits.Cpu().String() != "100m" {
		t.Errorf("container %s restarts %d resources %v: want it untouched at 100m", cs.ContainerID, cs.RestartCount, cs.Resources)
	}
	if resizeCondition(pending, v1.PodResizeInProgress) != nil {
		t.Errorf("PodResizeInProgress set for an infeasible resize")
	}
}
