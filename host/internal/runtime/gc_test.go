package runtime

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	apitest "k8s.io/cri-api/pkg/apis/testing"
)

// TestManager_GarbageCollect_createdReplacement: a container restarted
// after an exit is created before it is started. A GC that lists the pod in
// between must keep the exited instance — the pod's last termination state
// comes from it — and not count the created one as the dead one to keep.
func TestManager_GarbageCollect_createdReplacement(t *testing.T) {
	m, f := newTestManager(t)
	pod := testPod("u9", v1.RestartPolicyOnFailure, "a")
	st, _ := syncOnce(t, m, pod, NewBackOff())
	if len(st.Containers) != 1 {
		t.Fatalf("%d containers after the first sync, want 1", len(st.Containers))
	}
	old := st.Containers[0].ID
	f.RuntimeService.Lock()
	oc := f.RuntimeService.Containers[old]
	oc.State = runtimeapi.ContainerState_CONTAINER_EXITED
	oc.ExitCode = 3
	next := &apitest.FakeContainer{SandboxID: oc.SandboxID, ContainerStatus: runtimeapi.ContainerStatus{
		Id: old + "-next", Metadata: oc.Metadata, Image: oc.Image, ImageRef: oc.ImageRef,
		State: runtimeapi.ContainerState_CONTAINER_CREATED, CreatedAt: oc.CreatedAt + 1, Labels: oc.Labels, Annotations: oc.Annotations}}
	f.RuntimeService.Containers[next.Id] = next
	f.RuntimeService.Unlock()

	pods, err := m.GetPods(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.GarbageCollect(context.Background(), pods, func(types.UID) bool { return true }); err != nil {
		t.Fatal(err)
	}
	f.RuntimeService.Lock()
	_, kept := f.RuntimeService.Containers[old]
	f.RuntimeService.Unlock()
	if !kept {
		t.Fatal("GC removed the exited instance while its replacement was only created")
	}
}

// TestManager_GetPods_overMessageLimit: nine sandboxes carrying 2 MiB of
// annotations each make a listing over the 16 MiB CRI message limit; the
// relist still sees every pod, its sandbox and its container.
func TestManager_GetPods_overMessageLimit(t *testing.T) {
	m, f := newTestManager(t)
	big := strings.Repeat("x", 2<<20)
	var sbs []*apitest.FakePodSandbox
	var cs []*apitest.FakeContainer
	for i := range 9 {
		uid := fmt.Sprintf("uid-%d", i)
		labels := map[string]string{LabelManaged: "true", LabelPodUID: uid, LabelPodName: "p" + uid, LabelPodNamespace: "default"}
		sbs = append(sbs, &apitest.FakePodSandbox{PodSandboxStatus: runtimeapi.PodSandboxStatus{
			Id: "sb-" + uid, State: runtimeapi.PodSandboxState_SANDBOX_READY,
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "p" + uid, Namespace: "default", Uid: uid},
			Labels:   labels, Annotations: map[string]string{"big": big},
		}})
		cl := map[string]string{LabelContainerName: "c"}
		for k, v := range labels {
			cl[k] = v
		}
		cs = append(cs, &apitest.FakeContainer{SandboxID: "sb-" + uid, ContainerStatus: runtimeapi.ContainerStatus{
			Id: "c-" + uid, State: runtimeapi.ContainerState_CONTAINER_RUNNING,
			Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Labels: cl,
		}})
	}
	f.RuntimeService.SetFakeSandboxes(sbs)
	f.RuntimeService.SetFakeContainers(cs)
	pods, err := m.GetPods(context.Background())
	if err != nil {
		t.Fatalf("GetPods over the message limit: %v", err)
	}
	if len(pods) != 9 {
		t.Fatalf("%d pods, want 9", len(pods))
	}
	for _, p := range pods {
		var sandboxes, containers int
		for _, o := range p.Objects {
			if o.Sandbox {
				sandboxes++
			} else {
				containers++
			}
		}
		if sandboxes != 1 || containers != 1 {
			t.Errorf("pod %s: %d sandboxes, %d containers; want 1 and 1", p.UID, sandboxes, containers)
		}
	}
}
