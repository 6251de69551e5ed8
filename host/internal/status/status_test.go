package status

import (
	"strings"
	"testing"
	"time"

	"github.com/wasmlet/wasmlet/host/internal/container"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func pod(policy v1.RestartPolicy, inits []string, containers ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u"}, Spec: v1.PodSpec{RestartPolicy: policy}}
	for _, n := range inits {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: n, Image: "img"})
	}
	for _, n := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n, Image: "img"})
	}
	return p
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func running(name string) *container.ContainerStatus {
	return &container.ContainerStatus{ID: name + "-id", Name: name, State: container.StateRunning, StartedAt: t0, CreatedAt: t0}
}

func exited(name string, code int32, restarts int) *container.ContainerStatus {
	return &container.ContainerStatus{ID: name + "-id", Name: name, State: container.StateExited, ExitCode: code, StartedAt: t0, FinishedAt: t0.Add(time.Second), RestartCount: restarts}
}

func rs(cs ...*container.ContainerStatus) *container.PodStatus {
	return &container.PodStatus{UID: "u", Sandboxes: []*container.SandboxStatus{{ID: "sb", Ready: true, IPs: []string{"10.0.0.5"}}}, IPs: []string{"10.0.0.5"}, Containers: cs}
}

func TestGenerate_Phase(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pod     *v1.Pod
		rs      *container.PodStatus
		waiting string
		want    v1.PodPhase
	}{
		{"nothing yet", pod(v1.RestartPolicyAlways, nil, "a"), nil, "", v1.PodPending},
		{"running", pod(v1.RestartPolicyAlways, nil, "a"), rs(running("a")), "", v1.PodRunning},
		{"one of two running", pod(v1.RestartPolicyAlways, nil, "a", "b"), rs(running("a")), "", v1.PodPending},
		{"always exited 0", pod(v1.RestartPolicyAlways, nil, "a"), rs(exited("a", 0, 0)), "", v1.PodRunning},
		{"always back-off", pod(v1.RestartPolicyAlways, nil, "a"), rs(exited("a", 1, 3)), "CrashLoopBackOff", v1.PodRunning},
		{"never exited 0", pod(v1.RestartPolicyNever, nil, "a"), rs(exited("a", 0, 0)), "", v1.PodSucceeded},
		{"never exited 1", pod(v1.RestartPolicyNever, nil, "a"), rs(exited("a", 1, 0)), "", v1.PodFailed},
		{"onfailure exited 0", pod(v1.RestartPolicyOnFailure, nil, "a"), rs(exited("a", 0, 0)), "", v1.PodSucceeded},
		{"onfailure exited 1", pod(v1.RestartPolicyOnFailure, nil, "a"), rs(exited("a", 1, 0)), "", v1.PodRunning},
		{"init running", pod(v1.RestartPolicyAlways, []string{"i"}, "a"), rs(running("i")), "", v1.PodPending},
		{"init failed never", pod(v1.RestartPolicyNever, []string{"i"}, "a"), rs(exited("i", 2, 0)), "", v1.PodFailed},
		{"init done app running", pod(v1.RestartPolicyAlways, []string{"i"}, "a"), rs(running("a"), exited("i", 0, 0)), "", v1.PodRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Pod: tc.pod, Runtime: tc.rs, RuntimeName: "containerd", Now: t0}
			if tc.waiting != "" {
				in.Waiting = func(types.UID, string) (string, string, bool) { return tc.waiting, "back-off 10s", true }
			}
			s := Generate(in)
			if s.Phase != tc.want {
				t.Fatalf("phase = %s, want %s (%+v)", s.Phase, tc.want, s.ContainerStatuses)
			}
		})
	}
}

func TestGenerate_ContainerStatuses(t *testing.T) {
	p := pod(v1.RestartPolicyAlways, nil, "a")
	cur := running("a")
	cur.RestartCount, cur.ImageRef, cur.Image = 2, "sha256:abc", "img"
	last := exited("a", 1, 1)
	last.ID = "old"
	s := Generate(Input{Pod: p, Runtime: rs(cur, last), RuntimeName: "containerd", HostIPs: []string{"192.168.1.2"}, Now: t0})
	cs := s.ContainerStatuses[0]
	if cs.ContainerID != "containerd://a-id" || cs.RestartCount != 2 || !cs.Ready || cs.State.Running == nil || cs.ImageID != "sha256:abc" {
		t.Errorf("status = %+v", cs)
	}
	if lt := cs.LastTerminationState.Terminated; lt == nil || lt.ExitCode != 1 || lt.Reason != "Error" || lt.ContainerID != "containerd://old" {
		t.Errorf("last state = %+v", cs.LastTerminationState)
	}
	if s.PodIP != "10.0.0.5" || s.HostIP != "192.168.1.2" || s.QOSClass != v1.PodQOSBestEffort || s.StartTime == nil {
		t.Errorf("pod status = %+v", s)
	}
	want := []v1.PodConditionType{v1.PodReadyToStartContainers, v1.PodInitialized, v1.PodReady, v1.ContainersReady, v1.PodScheduled}
	for i, c := range s.Conditions {
		if c.Type != want[i] || c.Status != v1.ConditionTrue {
			t.Errorf("condition %d = %+v", i, c)
		}
	}
	// Back-off shows as Waiting, with the crash as last state.
	cur2 := exited("a", 1, 2)
	s = Generate(Input{Pod: p, Runtime: rs(cur2), Waiting: func(types.UID, string) (string, string, bool) { return "CrashLoopBackOff", "m", true }, Previous: &s, Now: t0.Add(time.Minute)})
	cs = s.ContainerStatuses[0]
	if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" || cs.LastTerminationState.Terminated == nil || cs.Ready {
		t.Errorf("back-off status = %+v", cs)
	}
	if s.Conditions[2].Status != v1.ConditionFalse || s.Conditions[2].Reason != "ContainersNotReady" || !s.Conditions[2].LastTransitionTime.Time.Equal(t0.Add(time.Minute)) {
		t.Errorf("ready condition = %+v", s.Conditions[2])
	}
	if !s.Conditions[4].LastTransitionTime.Time.Equal(t0) || !s.StartTime.Time.Equal(t0) {
		t.Errorf("kept times: scheduled %v start %v", s.Conditions[4].LastTransitionTime, s.StartTime)
	}
}

func TestGenerate_HostNetworkAndTerminal(t *testing.T) {
	p := pod(v1.RestartPolicyNever, nil, "a")
	p.Spec.HostNetwork = true
	s := Generate(Input{Pod: p, Runtime: rs(exited("a", 0, 0)), HostIPs: []string{"192.168.1.2"}})
	if s.Phase != v1.PodSucceeded || s.PodIP != "192.168.1.2" {
		t.Fatalf("status = %s %s", s.Phase, s.PodIP)
	}
	if s.Conditions[2].Reason != "PodCompleted" {
		t.Errorf("ready = %+v", s.Conditions[2])
	}
	// A terminal phase sticks even if the runtime forgets the containers.
	s2 := Generate(Input{Pod: p, Runtime: nil, Previous: &s})
	if s2.Phase != v1.PodSucceeded {
		t.Errorf("phase after GC = %s", s2.Phase)
	}
}

func TestManager_SetPodStatus(t *testing.T) {
	m := NewManager()
	p := pod(v1.RestartPolicyAlways, nil, "a")
	if !m.SetPodStatus(p, v1.PodStatus{Phase: v1.PodPending}) {
		t.Fatal("first status not a change")
	}
	if m.SetPodStatus(p, v1.PodStatus{Phase: v1.PodPending}) {
		t.Error("same status counted as a change")
	}
	if !m.SetPodStatus(p, v1.PodStatus{Phase: v1.PodRunning}) {
		t.Error("new phase not a change")
	}
	if s, ok := m.PodStatus("u"); !ok || s.Phase != v1.PodRunning {
		t.Errorf("PodStatus = %v %v", s.Phase, ok)
	}
	if ps := m.Pods(); len(ps) != 1 || ps[0].Status.Phase != v1.PodRunning {
		t.Errorf("Pods = %+v", ps)
	}
	m.RemovePod("u")
	if len(m.Pods()) != 0 {
		t.Error("pod not removed")
	}
	r := Rejected(p, "OutOfpods", "Node didn't have enough resource: pods")
	if r.Phase != v1.PodFailed || r.Reason != "OutOfpods" {
		t.Errorf("rejected = %+v", r)
	}
}

func TestGenerate_InitAndSidecarStatuses(t *testing.T) {
	p := pod(v1.RestartPolicyAlways, []string{"setup"}, "app")
	always := v1.ContainerRestartPolicyAlways
	p.Spec.InitContainers = append([]v1.Container{{Name: "proxy", Image: "img", RestartPolicy: &always}}, p.Spec.InitContainers...)
	// The sidecar runs, the init container is still running: not initialized.
	s := Generate(Input{Pod: p, Runtime: rs(running("proxy"), running("setup")), Now: t0})
	if s.InitContainerStatuses[1].Ready {
		t.Error("a running init container is ready")
	}
	if s.Phase != v1.PodPending || s.Conditions[1].Status != v1.ConditionFalse {
		t.Errorf("phase %s, initialized %s; want Pending, False", s.Phase, s.Conditions[1].Status)
	}
	// The init container completed, the sidecar runs, the app runs.
	s = Generate(Input{Pod: p, Runtime: rs(running("proxy"), exited("setup", 0, 0), running("app")), Now: t0})
	if !s.InitContainerStatuses[1].Ready || !s.InitContainerStatuses[0].Ready {
		t.Errorf("completed init container ready %v, running sidecar ready %v; want both", s.InitContainerStatuses[1].Ready, s.InitContainerStatuses[0].Ready)
	}
	if s.Phase != v1.PodRunning || s.Conditions[1].Status != v1.ConditionTrue || s.Conditions[2].Status != v1.ConditionTrue {
		t.Errorf("phase %s, initialized %s, ready %s; want Running, True, True", s.Phase, s.Conditions[1].Status, s.Conditions[2].Status)
	}
}

// Every container status carries Started, false until the container runs
// (the upstream e2e framework dereferences it for a container not yet
// created).
func TestGenerate_StartedAlwaysSet(t *testing.T) {
	p := pod(v1.RestartPolicyAlways, []string{"setup"}, "app", "other")
	s := Generate(Input{Pod: p, Runtime: rs(running("setup"), exited("other", 1, 0)), Now: t0})
	for _, cs := range append(s.InitContainerStatuses, s.ContainerStatuses...) {
		want := cs.Name == "setup"
		if cs.Started == nil || *cs.Started != want {
			t.Errorf("%s: Started %v, want %v", cs.Name, cs.Started, want)
		}
	}
}

func TestGenerate_ReadinessGates(t *testing.T) {
	p := pod(v1.RestartPolicyAlways, nil, "a")
	p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/one"}, {ConditionType: "example.com/two"}}
	p.Status.Conditions = []v1.PodCondition{{Type: "example.com/one", Status: v1.ConditionTrue}}
	s := Generate(Input{Pod: p, Runtime: rs(running("a")), Now: t0})
	if s.Conditions[2].Status != v1.ConditionFalse || s.Conditions[2].Reason != "ReadinessGatesNotReady" || !strings.Contains(s.Conditions[2].Message, `"example.com/two" does not exist`) {
		t.Errorf("Ready with a missing gate: %+v", s.Conditions[2])
	}
	if s.Conditions[3].Status != v1.ConditionTrue {
		t.Errorf("ContainersReady follows the containers only: %+v", s.Conditions[3])
	}
	p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: "example.com/two", Status: v1.ConditionTrue})
	if s := Generate(Input{Pod: p, Runtime: rs(running("a")), Now: t0}); s.Conditions[2].Status != v1.ConditionTrue {
		t.Errorf("Ready with both gates True: %+v", s.Conditions[2])
	}
}

// TestGenerate_Terminal: a pod the workers stopped for good is terminal
// whatever its restart policy, as the kubelet's getPhase with
// podIsTerminal and its status manager's TerminatePod make it: Succeeded
// when every container succeeded, else Failed, and a container that never
// ended is ContainerStatusUnknown with exit code 137. Without Terminal the
// same runtime state is Running.
func TestGenerate_Terminal(t *testing.T) {
	stopped := func(cs ...*container.ContainerStatus) *container.PodStatus {
		r := rs(cs...)
		r.Sandboxes[0].Ready, r.IPs = false, nil
		return r
	}
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		rs       *container.PodStatus
		want     v1.PodPhase
		wantCode int32
		reason   string
	}{
		{"always killed", pod(v1.RestartPolicyAlways, nil, "a"), stopped(exited("a", 137, 0)), v1.PodFailed, 137, ""},
		{"onfailure killed", pod(v1.RestartPolicyOnFailure, nil, "a"), stopped(exited("a", 137, 0)), v1.PodFailed, 137, ""},
		{"always all succeeded", pod(v1.RestartPolicyAlways, nil, "a"), stopped(exited("a", 0, 0)), v1.PodSucceeded, 0, ""},
		{"never started", pod(v1.RestartPolicyAlways, nil, "a"), stopped(), v1.PodFailed, 137, "ContainerStatusUnknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if s := Generate(Input{Pod: tc.pod, Runtime: tc.rs, RuntimeName: "containerd", Now: t0}); s.Phase == tc.want {
				t.Fatalf("without Terminal the phase is already %s: the case tests nothing", s.Phase)
			}
			s := Generate(Input{Pod: tc.pod, Runtime: tc.rs, RuntimeName: "containerd", Now: t0, Terminal: true})
			if s.Phase != tc.want {
				t.Fatalf("phase = %s, want %s", s.Phase, tc.want)
			}
			term := s.ContainerStatuses[0].State.Terminated
			if term == nil || term.ExitCode != tc.wantCode || (tc.reason != "" && term.Reason != tc.reason) {
				t.Errorf("container state = %+v, want terminated with %d %s", s.ContainerStatuses[0].State, tc.wantCode, tc.reason)
			}
		})
	}
}

// TestGenerate_KeepsIPsOnceStopped: a pod whose sandbox stopped keeps the
// IPs it had (a terminating pod still shows them); one with a ready
// sandbox shows what the runtime says.
func TestGenerate_KeepsIPsOnceStopped(t *testing.T) {
	p := pod(v1.RestartPolicyNever, nil, "a")
	first := Generate(Input{Pod: p, Runtime: rs(running("a")), Now: t0})
	r := rs(exited("a", 1, 0))
	r.Sandboxes[0].Ready, r.IPs = false, nil
	s := Generate(Input{Pod: p, Runtime: r, Previous: &first, Now: t0})
	if s.PodIP != "10.0.0.5" || len(s.PodIPs) != 1 {
		t.Errorf("stopped pod's IPs = %q %v, want the previous 10.0.0.5", s.PodIP, s.PodIPs)
	}
	fresh := rs(running("a"))
	fresh.Sandboxes[0].IPs, fresh.IPs = []string{"10.0.0.9"}, []string{"10.0.0.9"}
	if s := Generate(Input{Pod: p, Runtime: fresh, Previous: &first, Now: t0}); s.PodIP != "10.0.0.9" {
		t.Errorf("ready sandbox's IP = %q, want 10.0.0.9", s.PodIP)
	}
}

// TestGenerate_ProbeKilled: a container the agent stopped for a failed
// probe restarts whatever its exit code unless the policy is Never, so an
// OnFailure pod whose container exited 0 that way is Running, not
// Succeeded; a Never pod is done.
func TestGenerate_ProbeKilled(t *testing.T) {
	killed := exited("a", 0, 0)
	killed.KilledByProbe = true
	for _, tc := range []struct {
		policy v1.RestartPolicy
		want   v1.PodPhase
	}{
		{v1.RestartPolicyOnFailure, v1.PodRunning},
		{v1.RestartPolicyAlways, v1.PodRunning},
		{v1.RestartPolicyNever, v1.PodSucceeded},
	} {
		p := pod(tc.policy, nil, "a")
		if s := Generate(Input{Pod: p, Runtime: rs(killed), Now: t0}); s.Phase != tc.want {
			t.Errorf("%s: phase %s, want %s", tc.policy, s.Phase, tc.want)
		}
		if got := container.ShouldRestart(&p.Spec.Containers[0], p, rs(killed)); got != (tc.policy != v1.RestartPolicyNever) {
			t.Errorf("%s: ShouldRestart = %v", tc.policy, got)
		}
	}
	// The same exit without the probe: OnFailure is done.
	if s := Generate(Input{Pod: pod(v1.RestartPolicyOnFailure, nil, "a"), Runtime: rs(exited("a", 0, 0)), Now: t0}); s.Phase != v1.PodSucceeded {
		t.Errorf("OnFailure, exit 0 on its own: phase %s, want Succeeded", s.Phase)
	}
}

// TestGenerate_VolumeMounts: every container status lists its volume
// mounts; a read-only one with its recursive read-only mode resolved
// (Enabled where the runtime applies it, else Disabled), a read-write one
// without.
func TestGenerate_VolumeMounts(t *testing.T) {
	p := pod(v1.RestartPolicyAlways, nil, "a")
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		{Name: "rw", MountPath: "/rw"},
		{Name: "ro", MountPath: "/ro", ReadOnly: true},
		{Name: "rro", MountPath: "/rro", ReadOnly: true, RecursiveReadOnly: ptrTo(v1.RecursiveReadOnlyIfPossible)},
	}
	resolve := func(_ *v1.Pod, vm v1.VolumeMount) (bool, error) {
		return vm.RecursiveReadOnly != nil && *vm.RecursiveReadOnly == v1.RecursiveReadOnlyIfPossible, nil
	}
	for _, tc := range []struct {
		name    string
		resolve func(*v1.Pod, v1.VolumeMount) (bool, error)
		rro     v1.RecursiveReadOnlyMode
	}{
		{"runtime supports it", resolve, v1.RecursiveReadOnlyEnabled},
		{"no resolver", nil, v1.RecursiveReadOnlyDisabled},
	} {
		s := Generate(Input{Pod: p, Runtime: rs(running("a")), Now: t0, RecursiveReadOnly: tc.resolve})
		vms := s.ContainerStatuses[0].VolumeMounts
		if len(vms) != 3 || vms[0].RecursiveReadOnly != nil || vms[0].ReadOnly ||
			vms[1].RecursiveReadOnly == nil || *vms[1].RecursiveReadOnly != v1.RecursiveReadOnlyDisabled ||
			vms[2].RecursiveReadOnly == nil || *vms[2].RecursiveReadOnly != tc.rro || vms[2].MountPath != "/rro" {
			t.Errorf("%s: volumeMounts %+v", tc.name, vms)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
