package runtime

import (
	"errors"
	"strings"
	"testing"

	"github.com/wasmlet/wasmlet/host/internal/container"
	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// classes is a RuntimeClasses over a map, as runtimeclass.Manager answers:
// a name not in it is the NotFound error of the RuntimeClass lister.
type classes map[string]string

func (c classes) Handler(pod *v1.Pod) (string, error) {
	if pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName == "" {
		return "", nil
	}
	h, ok := c[*pod.Spec.RuntimeClassName]
	if !ok {
		return "", apierrors.NewNotFound(nodev1.Resource("runtimeclass"), *pod.Spec.RuntimeClassName)
	}
	return h, nil
}

// sandboxHandlers are the runtime handlers of the fake runtime's sandboxes
// of pod.
func sandboxHandlers(t *testing.T, m *Manager, pod *v1.Pod) []string {
	t.Helper()
	var hs []string
	for _, sb := range m.mustStatus(t, pod).Sandboxes {
		hs = append(hs, sb.RuntimeHandler)
	}
	return hs
}

func TestManager_SyncPod_RuntimeClass(t *testing.T) {
	cls := classes{"fast": "runc2"}
	m, f := newTestManagerWith(t, func(c *Config) { c.RuntimeClasses = cls })

	plain := testPod("rc0", v1.RestartPolicyAlways, "a")
	if _, r := syncOnce(t, m, plain, NewBackOff()); r.Error() != nil {
		t.Fatal(r.Error())
	}
	if hs := sandboxHandlers(t, m, plain); len(hs) != 1 || hs[0] != "" {
		t.Errorf("pod without a RuntimeClass: sandbox handlers %q, want the default \"\"", hs)
	}

	fast := testPod("rc1", v1.RestartPolicyAlways, "a")
	name := "fast"
	fast.Spec.RuntimeClassName = &name
	if _, r := syncOnce(t, m, fast, NewBackOff()); r.Error() != nil {
		t.Fatal(r.Error())
	}
	if hs := sandboxHandlers(t, m, fast); len(hs) != 1 || hs[0] != "runc2" {
		t.Errorf("pod of RuntimeClass fast: sandbox handlers %q, want [runc2]", hs)
	}

	// An unknown RuntimeClass fails the sandbox as the kubelet reports it,
	// calls no RunPodSandbox, and a retry after the class appears succeeds.
	late := testPod("rc2", v1.RestartPolicyAlways, "a")
	lateName := "late"
	late.Spec.RuntimeClassName = &lateName
	before := strings.Count(strings.Join(f.RuntimeService.GetCalls(), ","), "RunPodSandbox")
	_, r := syncOnce(t, m, late, NewBackOff())
	err := r.Error()
	if !errors.Is(err, container.ErrCreateSandbox) {
		t.Fatalf("sync error %v, want %v", err, container.ErrCreateSandbox)
	}
	if len(r.Steps) != 1 || r.Steps[0].Action != "CreatePodSandbox" || r.Steps[0].Message != `runtimeclass.node.k8s.io "late" not found` {
		t.Errorf("steps = %+v, want one failed CreatePodSandbox with the NotFound message", r.Steps)
	}
	if n := strings.Count(strings.Join(f.RuntimeService.GetCalls(), ","), "RunPodSandbox"); n != before {
		t.Errorf("RunPodSandbox called %d times for an unknown RuntimeClass", n-before)
	}
	cls["late"] = "runc"
	st, r := syncOnce(t, m, late, NewBackOff())
	if r.Error() != nil || st.FindContainer("a") == nil {
		t.Fatalf("retry after the RuntimeClass appeared: %v", r.Error())
	}
	if hs := sandboxHandlers(t, m, late); len(hs) != 1 || hs[0] != "runc" {
		t.Errorf("sandbox handlers %q, want [runc]", hs)
	}
}

// Without a RuntimeClass resolver a pod naming one fails, naming the pod and
// the field; it never silently runs on the default handler.
func TestManager_SyncPod_RuntimeClassWithoutResolver(t *testing.T) {
	m, _ := newTestManager(t)
	pod := testPod("rc3", v1.RestartPolicyAlways, "a")
	name := "gvisor"
	pod.Spec.RuntimeClassName = &name
	_, r := syncOnce(t, m, pod, NewBackOff())
	if !errors.Is(r.Error(), container.ErrCreateSandbox) {
		t.Fatalf("sync error %v, want %v", r.Error(), container.ErrCreateSandbox)
	}
	for _, want := range []string{"default/web-rc3", "spec.runtimeClassName", `"gvisor"`} {
		if !strings.Contains(r.Error().Error(), want) {
			t.Errorf("error %q does not name %s", r.Error(), want)
		}
	}
}
