//go:build e2e_apiserver

package e2eapi

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/cri"
	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

// A pod's spec.runtimeClassName picks the CRI handler its sandbox runs
// with, through the RuntimeClass the agent reads from the API server.
//
// On containerd (hack/containerd configures runc and runc2, the same runc
// under a second name): a RuntimeClass naming runc2 runs the pod, and
// containerd reports runc2 as its sandbox's handler. A pod whose
// RuntimeClass is gone when it reaches the node stays Pending with the
// kubelet's FailedCreatePodSandBox event, and runs once the RuntimeClass
// is created again.
//
// On the embedded WASI runtime, which has only its default handler, a
// RuntimeClass naming runc leaves the pod Pending with the runtime's
// refusal in the event.
func testRuntimeClass(t *testing.T, a *agent) {
	if flags.Runtime == "embedded" {
		createRuntimeClass(t, "e2e-wasi-runc", "runc")
		p := newPod("rc-wasi", "sleep", "inf")
		p.Spec.RuntimeClassName = ptr.To("e2e-wasi-runc")
		createPod(t, p)
		t.Cleanup(func() { deletePod(t, p.Name) })
		waitSandboxEvent(t, p.Name, `runtime handler "runc" is not known`)
		if got := getPod(t, p.Name); got.Status.Phase != v1.PodPending {
			t.Errorf("pod with an unknown handler: %s, want Pending", harness.PodSummary(got))
		}
		return
	}

	createRuntimeClass(t, "e2e-runc2", "runc2")
	p := newPod("rc-runc2", "sleep", "inf")
	p.Spec.RuntimeClassName = ptr.To("e2e-runc2")
	createPod(t, p)
	t.Cleanup(func() { deletePod(t, p.Name) })
	running := waitPod(t, "default", p.Name, 120*time.Second, "Running", harness.Running)
	if h := sandboxHandler(t, running); h != "runc2" {
		t.Errorf("containerd's sandbox of pod %s has runtime handler %q, want runc2", p.Name, h)
	}

	// The pod reaches the node after its RuntimeClass was deleted (the API
	// server admits a pod only while its RuntimeClass exists). The agent is
	// stopped meanwhile, so its RuntimeClass cache starts from a list
	// without it: no race with the watch.
	createRuntimeClass(t, "e2e-late", "runc")
	a.Stop(t)
	late := newPod("rc-late", "sleep", "inf")
	late.Spec.RuntimeClassName = ptr.To("e2e-late")
	createPod(t, late)
	t.Cleanup(func() { deletePod(t, late.Name) })
	deleteRuntimeClass(t, "e2e-late")
	a.start(t)
	waitSandboxEvent(t, late.Name, `Failed to create pod sandbox: runtimeclass.node.k8s.io "e2e-late" not found`)
	if got := getPod(t, late.Name); got.Status.Phase != v1.PodPending {
		t.Errorf("pod with a missing RuntimeClass: %s, want Pending", harness.PodSummary(got))
	}
	createRuntimeClass(t, "e2e-late", "runc")
	// The failed sync is retried with the pod worker's back-off (at most
	// 10 s), as the kubelet's is.
	running = waitPod(t, "default", late.Name, 120*time.Second, "Running once its RuntimeClass exists", harness.Running)
	if h := sandboxHandler(t, running); h != "runc" {
		t.Errorf("containerd's sandbox of pod %s has runtime handler %q, want runc", late.Name, h)
	}
}

// createRuntimeClass creates a RuntimeClass, deleted when the test ends.
func createRuntimeClass(t *testing.T, name, handler string) {
	t.Helper()
	ctx, cancel := ctxT(30 * time.Second)
	defer cancel()
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: handler}
	if _, err := admin.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create RuntimeClass %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := ctxT(30 * time.Second)
		defer cancel()
		if err := admin.NodeV1().RuntimeClasses().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete RuntimeClass %s: %v", name, err)
		}
	})
}

// deleteRuntimeClass deletes a RuntimeClass and waits until the API server
// no longer has it.
func deleteRuntimeClass(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := ctxT(30 * time.Second)
	defer cancel()
	if err := admin.NodeV1().RuntimeClasses().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete RuntimeClass %s: %v", name, err)
	}
	harness.Eventually(t, 30*time.Second, "RuntimeClass "+name+" gone", func() (bool, string) {
		ctx, cancel := ctxT(5 * time.Second)
		defer cancel()
		_, err := admin.NodeV1().RuntimeClasses().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), "get: " + errString(err)
	})
}

func errString(err error) string {
	if err == nil {
		return "still there"
	}
	return err.Error()
}

func getPod(t *testing.T, name string) *v1.Pod {
	t.Helper()
	ctx, cancel := ctxT(30 * time.Second)
	defer cancel()
	p, err := admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// waitSandboxEvent waits for the pod's Warning FailedCreatePodSandBox event
// whose message contains want.
func waitSandboxEvent(t *testing.T, pod, want string) {
	t.Helper()
	harness.Eventually(t, 120*time.Second, "FailedCreatePodSandBox event of pod "+pod, func() (bool, string) {
		ctx, cancel := ctxT(10 * time.Second)
		defer cancel()
		sel := fields.Set{"involvedObject.name": pod, "reason": "FailedCreatePodSandBox"}.AsSelector().String()
		evs, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Type == v1.EventTypeWarning && strings.Contains(e.Message, want) {
				return true, ""
			}
			seen = append(seen, e.Type+" "+e.Message)
		}
		return false, "events: " + strings.Join(seen, " | ")
	})
}

// sandboxHandler is the runtime handler containerd reports for the pod's
// ready sandbox (CRI PodSandboxStatus), read with a bare CRI client.
func sandboxHandler(t *testing.T, p *v1.Pod) string {
	t.Helper()
	ctx, cancel := ctxT(30 * time.Second)
	defer cancel()
	c, err := cri.Connect(ctx, flags.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sbs, err := c.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(p.UID)},
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	})
	if err != nil || len(sbs) != 1 {
		t.Fatalf("ready sandboxes of pod %s: %d, %v; want 1", p.Name, len(sbs), err)
	}
	st, err := c.Runtime.PodSandboxStatus(ctx, sbs[0].Id, false)
	if err != nil {
		t.Fatal(err)
	}
	if sbs[0].RuntimeHandler != st.GetStatus().GetRuntimeHandler() {
		t.Errorf("sandbox %s: ListPodSandbox says handler %q, PodSandboxStatus %q", sbs[0].Id, sbs[0].RuntimeHandler, st.GetStatus().GetRuntimeHandler())
	}
	return st.GetStatus().GetRuntimeHandler()
}
