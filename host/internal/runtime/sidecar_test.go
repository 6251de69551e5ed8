package runtime

import (
	"testing"

	"github.com/wasmlet/wasmlet/host/internal/container"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestComputePodActions_Sidecars(t *testing.T) {
	pod := testPod("sidecar", v1.RestartPolicyNever, "app")
	pod.Spec.InitContainers = []v1.Container{
		{Name: "proxy", Image: "i", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)},
		{Name: "setup", Image: "i"},
	}
	sandbox := []*container.SandboxStatus{{ID: "sb", Ready: true}}
	st := func(cs ...*container.ContainerStatus) *container.PodStatus {
		return &container.PodStatus{Sandboxes: sandbox, Containers: cs}
	}
	running := func(name string) *container.ContainerStatus {
		return &container.ContainerStatus{ID: name + "-1", Name: name, State: container.StateRunning}
	}
	exited := func(name string, code int32) *container.ContainerStatus {
		return &container.ContainerStatus{ID: name + "-1", Name: name, State: container.StateExited, ExitCode: code}
	}
	started := func(ok bool) container.Started {
		return func(*v1.Container, *container.ContainerStatus) bool { return ok }
	}

	next := func(a podActions) string {
		if a.NextInitContainerToStart == nil {
			return ""
		}
		return a.NextInitContainerToStart.Name
	}
	if a := computePodActions(pod, st(), nil); next(a) != "proxy" {
		t.Errorf("nothing yet: next %q, want the sidecar", next(a))
	}
	if a := computePodActions(pod, st(running("proxy")), started(false)); next(a) != "" || len(a.ContainersToStart) != 0 {
		t.Errorf("sidecar not started yet: next %q, start %v; want to wait", next(a), a.ContainersToStart)
	}
	if a := computePodActions(pod, st(running("proxy")), started(true)); next(a) != "setup" {
		t.Errorf("sidecar started: next %q, want the next init container without waiting for it to exit", next(a))
	}
	if a := computePodActions(pod, st(running("proxy"), exited("setup", 0)), started(true)); next(a) != "" || len(a.ContainersToStart) != 1 {
		t.Errorf("init done: next %q, start %v; want the app container", next(a), a.ContainersToStart)
	}
	a := computePodActions(pod, st(exited("proxy", 1), exited("setup", 0), running("app")), started(true))
	if len(a.SidecarsToRestart) != 1 || a.SidecarsToRestart[0].Name != "proxy" || a.KillPod {
		t.Errorf("sidecar exited beside a running app: restart %v, kill pod %v; want the sidecar restarted", a.SidecarsToRestart, a.KillPod)
	}
	if a := computePodActions(pod, st(running("proxy"), exited("setup", 0), exited("app", 0)), started(true)); !a.KillPod {
		t.Error("app done under restartPolicy Never: the sidecar is not stopped")
	}
	// A running sidecar whose image changed is killed and restarted; one
	// whose spec is what it runs is left alone.
	current := running("proxy")
	current.Hash = HashContainer(&pod.Spec.InitContainers[0])
	app := running("app")
	app.Hash = HashContainer(&pod.Spec.Containers[0])
	if a := computePodActions(pod, st(current, exited("setup", 0), app), started(true)); len(a.SidecarsToRestart) != 0 || len(a.ContainersToKill) != 0 {
		t.Errorf("unchanged sidecar: restart %v, kill %v; want nothing", a.SidecarsToRestart, a.ContainersToKill)
	}
	stale := running("proxy")
	stale.Hash = "0ld"
	a = computePodActions(pod, st(stale, exited("setup", 0), app), started(true))
	if _, killed := a.ContainersToKill["proxy-1"]; !killed || len(a.SidecarsToRestart) != 1 || a.KillPod {
		t.Errorf("sidecar with a new image: kill %v, restart %v, kill pod %v; want it killed and restarted", a.ContainersToKill, a.SidecarsToRestart, a.KillPod)
	}
	// While a later init container still runs, a started sidecar whose
	// image changed is restarted too (restartPolicy Never included), and
	// the running init container is left alone.
	a = computePodActions(pod, st(stale, running("setup")), started(true))
	if _, killed := a.ContainersToKill["proxy-1"]; !killed || len(a.SidecarsToRestart) != 1 || a.KillPod || next(a) != "" || len(a.ContainersToKill) != 1 {
		t.Errorf("sidecar with a new image while initializing: kill %v, restart %v, next %q, kill pod %v; want only it killed and restarted", a.ContainersToKill, a.SidecarsToRestart, next(a), a.KillPod)
	}
	if a := computePodActions(pod, st(current, running("setup")), started(true)); len(a.SidecarsToRestart) != 0 || len(a.ContainersToKill) != 0 {
		t.Errorf("unchanged sidecar while initializing: restart %v, kill %v; want nothing", a.SidecarsToRestart, a.ContainersToKill)
	}
	if a := computePodActions(pod, st(stale, exited("setup", 1)), started(true)); !a.KillPod || len(a.SidecarsToRestart) != 0 {
		t.Errorf("init container failed under restartPolicy Never: kill pod %v, restart %v; want the pod killed, no sidecar restarted", a.KillPod, a.SidecarsToRestart)
	}
	if !container.ShouldRestart(&pod.Spec.InitContainers[0], pod, st(exited("proxy", 0))) {
		t.Error("a sidecar that exited 0 under restartPolicy Never is not restarted")
	}
}
