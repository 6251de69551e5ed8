package runtime

import (
	"context"
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
