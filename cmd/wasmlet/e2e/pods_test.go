//go:build e2e

package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

// Label keys the kubelet sets on CRI objects (kubelet-conventions.md).
const (
	labelPodName       = "io.kubernetes.pod.name"
	labelPodNamespace  = "io.kubernetes.pod.namespace"
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"
)

// newPod is a static pod manifest in namespace default.
func newPod(name string, restart v1.RestartPolicy, containers ...v1.Container) *v1.Pod {
	grace := int64(5)
	return &v1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
		Spec: v1.PodSpec{
			RestartPolicy:                 restart,
			Containers:                    containers,
			TerminationGracePeriodSeconds: &grace,
		},
	}
}

// hostNet puts p in the node's network namespace.
func hostNet(p *v1.Pod) *v1.Pod { p.Spec.HostNetwork = true; return p }

// box is a testbox container; args are its steps (see
// examples/workloads/testbox), the same on both runtimes.
func box(name string, args ...string) v1.Container {
	return v1.Container{Name: name, Image: flags.Image, ImagePullPolicy: v1.PullIfNotPresent, Args: args}
}

// podContainers lists the runtime's containers of a static pod, oldest first.
func podContainers(t testing.TB, name string) []*runtimeapi.Container {
	t.Helper()
	ctx, cancel := withTimeout(30 * time.Second)
	defer cancel()
	cs, err := rt.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{labelPodName: staticName(name)}})
	if err != nil {
		t.Fatalf("ListContainers: %v", err)
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].CreatedAt < cs[j].CreatedAt })
	return cs
}

// podSandboxes lists the runtime's sandboxes of a static pod.
func podSandboxes(t testing.TB, name string) []*runtimeapi.PodSandbox {
	t.Helper()
	ctx, cancel := withTimeout(30 * time.Second)
	defer cancel()
	sbs, err := rt.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{labelPodName: staticName(name)}})
	if err != nil {
		t.Fatalf("ListPodSandbox: %v", err)
	}
	return sbs
}

// containerStatus returns the runtime's status of a container (verbose off).
func containerStatus(t testing.TB, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	ctx, cancel := withTimeout(30 * time.Second)
	defer cancel()
	resp, err := rt.Runtime.ContainerStatus(ctx, id, false)
	if err != nil {
		t.Fatalf("ContainerStatus %s: %v", id, err)
	}
	return resp.Status
}

// runtimeSnapshot maps container ID → "state attempt" for every container
// of the named pods, to compare before and after an event.
func runtimeSnapshot(t testing.TB, names []string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	for _, n := range names {
		for _, c := range podContainers(t, n) {
			snap[c.Id] = fmt.Sprintf("%s %s attempt=%d", staticName(n), c.State, c.GetMetadata().GetAttempt())
		}
	}
	return snap
}

// checkSnapshot fails t unless snap holds exactly want running containers:
// the runtime's view must agree with /pods before a comparison means
// anything.
func checkSnapshot(t testing.TB, snap map[string]string, want int) {
	t.Helper()
	running := 0
	for _, s := range snap {
		if strings.Contains(s, runtimeapi.ContainerState_CONTAINER_RUNNING.String()) {
			running++
		}
	}
	if running != want || len(snap) != want {
		t.Fatalf("runtime holds %d containers (%d running) of the pods, want %d running: %v", len(snap), running, want, snap)
	}
}

func diffSnapshots(before, after map[string]string) string {
	var d []string
	for id, s := range before {
		if after[id] != s {
			d = append(d, fmt.Sprintf("%.13s: %q → %q", id, s, after[id]))
		}
	}
	for id, s := range after {
		if _, ok := before[id]; !ok {
			d = append(d, fmt.Sprintf("%.13s: new %q", id, s))
		}
	}
	sort.Strings(d)
	return strings.Join(d, "; ")
}

// waitRuntimeGone waits until the runtime holds no container and no
// sandbox of the pod.
func waitRuntimeGone(t testing.TB, name string, timeout time.Duration) {
	t.Helper()
	harness.Eventually(t, timeout, fmt.Sprintf("pod %s: containers and sandboxes removed from the runtime", staticName(name)), func() (bool, string) {
		cs, sbs := podContainers(t, name), podSandboxes(t, name)
		return len(cs) == 0 && len(sbs) == 0, fmt.Sprintf("%d containers, %d sandboxes", len(cs), len(sbs))
	})
}

// waitRuntimeStopped waits until no container of the pod runs and no
// sandbox of it is ready.
func waitRuntimeStopped(t testing.TB, name string, timeout time.Duration) {
	t.Helper()
	harness.Eventually(t, timeout, fmt.Sprintf("pod %s: nothing running in the runtime", staticName(name)), func() (bool, string) {
		var live []string
		for _, c := range podContainers(t, name) {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING || c.State == runtimeapi.ContainerState_CONTAINER_CREATED {
				live = append(live, fmt.Sprintf("container %.13s %s", c.Id, c.State))
			}
		}
		for _, sb := range podSandboxes(t, name) {
			if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				live = append(live, fmt.Sprintf("sandbox %.13s ready", sb.Id))
			}
		}
		return len(live) == 0, strings.Join(live, ", ")
	})
}

// condition returns a pod condition's status ("" when absent).
func condition(p *v1.Pod, c v1.PodConditionType) v1.ConditionStatus {
	for _, pc := range p.Status.Conditions {
		if pc.Type == c {
			return pc.Status
		}
	}
	return ""
}

// status returns the named container's status in p (app or init).
func status(p *v1.Pod, container string) *v1.ContainerStatus {
	for _, set := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for i := range set {
			if set[i].Name == container {
				return &set[i]
			}
		}
	}
	return nil
}
