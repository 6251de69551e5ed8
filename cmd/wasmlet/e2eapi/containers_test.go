//go:build e2e_apiserver

package e2eapi

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

// An ephemeral container added to a running pod (what `kubectl debug`
// does through the ephemeralcontainers subresource) runs beside the
// others, its status and log reported, the pod's containers untouched.
func testEphemeralContainer(t *testing.T, a *agent) {
	p := newPod("debugme", "log", "1s", "main")
	createPod(t, p)
	t.Cleanup(func() { deletePod(t, p.Name) })
	running := waitPod(t, "default", p.Name, 120*time.Second, "Running", harness.Running)

	running.Spec.EphemeralContainers = append(running.Spec.EphemeralContainers, v1.EphemeralContainer{
		EphemeralContainerCommon: v1.EphemeralContainerCommon{
			Name: "debugger", Image: flags.Image, ImagePullPolicy: v1.PullNever,
			Args:                     []string{"echo", "debug-hello", ";", "sleep", "inf"},
			TerminationMessagePolicy: v1.TerminationMessageReadFile,
		},
	})
	ctx, cancel := ctxT(30 * time.Second)
	defer cancel()
	if _, err := admin.CoreV1().Pods("default").UpdateEphemeralContainers(ctx, p.Name, running, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("add ephemeral container: %v", err)
	}
	got := waitPod(t, "default", p.Name, 120*time.Second, "ephemeral container running", func(p *v1.Pod) bool {
		for _, s := range p.Status.EphemeralContainerStatuses {
			if s.Name == "debugger" && s.State.Running != nil {
				return true
			}
		}
		return false
	})
	waitLog(t, a, got, "debugger", "debug-hello", 60*time.Second)
	if cs := got.Status.ContainerStatuses; len(cs) != 1 || cs[0].RestartCount != 0 || cs[0].State.Running == nil {
		t.Errorf("the pod's container after the ephemeral one was added: %+v", cs)
	}
	if condition(got, v1.PodReady) != v1.ConditionTrue {
		t.Errorf("pod Ready %s after adding an ephemeral container, want True", condition(got, v1.PodReady))
	}
}

// A liveness probe that fails restarts the container, with the kubelet's
// events: Unhealthy ("Liveness probe failed: ...") and Killing ("Container
// main failed liveness probe, will be restarted").
func testLivenessEvents(t *testing.T, _ *agent) {
	p := newPod("unhealthy", "sleep", "inf")
	p.Spec.Containers[0].LivenessProbe = &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"/testbox", "exit", "3"}}},
		PeriodSeconds: 1, FailureThreshold: 2, TimeoutSeconds: 5,
	}
	createPod(t, p)
	t.Cleanup(func() { deletePod(t, p.Name) })
	waitPod(t, "default", p.Name, 120*time.Second, "container restarted by its liveness probe", func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
	})
	var reasons []string
	harness.Eventually(t, 60*time.Second, "Unhealthy and Killing events of the pod", func() (bool, string) {
		ctx, cancel := ctxT(10 * time.Second)
		defer cancel()
		evs, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", p.Name).String()})
		if err != nil {
			return false, err.Error()
		}
		unhealthy, killing := false, false
		reasons = reasons[:0]
		for _, e := range evs.Items {
			reasons = append(reasons, e.Reason+": "+e.Message)
			switch {
			case e.Reason == "Unhealthy" && e.Type == v1.EventTypeWarning && strings.HasPrefix(e.Message, "Liveness probe failed"):
				unhealthy = true
			case e.Reason == "Killing" && e.Message == "Container main failed liveness probe, will be restarted":
				killing = true
			}
		}
		return unhealthy && killing, strings.Join(reasons, " | ")
	})
}
