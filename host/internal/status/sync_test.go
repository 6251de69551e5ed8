package status

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func syncPod(uid string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: types.UID(uid)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "i"}}}}
}

func actions(c *fake.Clientset, verb string) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == verb {
			n++
		}
	}
	return n
}

func TestSyncer_PassPushesChangedStatusOnce(t *testing.T) {
	p := syncPod("u1")
	other := v1.PodCondition{Type: "example.com/Gate", Status: v1.ConditionTrue}
	onServer := p.DeepCopy()
	onServer.Status.Conditions = []v1.PodCondition{other}
	client := fake.NewClientset(onServer)
	m := NewManager()
	s := NewSyncer(SyncerConfig{Client: client, Statuses: m, APIPod: func(*v1.Pod) (*v1.Pod, bool) {
		got, err := client.CoreV1().Pods("default").Get(context.Background(), "p", metav1.GetOptions{})
		return got, err == nil
	}})
	st := v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.7",
		Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Now())}}}
	m.SetPodStatus(p, st)
	s.pass(context.Background(), false)
	got, err := client.CoreV1().Pods("default").Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != v1.PodRunning || got.Status.PodIP != "10.0.0.7" {
		t.Errorf("status on the server %+v, want Running with the pod IP", got.Status)
	}
	kept := false
	for _, c := range got.Status.Conditions {
		kept = kept || c.Type == other.Type
	}
	if !kept {
		t.Errorf("conditions %v: another writer's condition was dropped", got.Status.Conditions)
	}
	patches := actions(client, "patch")
	if patches != 1 {
		t.Fatalf("%d patches, want 1", patches)
	}
	// Nothing changed: neither a pass nor a resync patches again.
	s.pass(context.Background(), false)
	s.pass(context.Background(), true)
	if n := actions(client, "patch"); n != patches {
		t.Errorf("%d patches after an unchanged pass and resync, want %d", n, patches)
	}
}

func TestSyncer_DeletesTerminatedPodWithUIDPrecondition(t *testing.T) {
	p := syncPod("u1")
	now := metav1.Now()
	p.DeletionTimestamp = &now
	client := fake.NewClientset(p.DeepCopy())
	m := NewManager()
	s := NewSyncer(SyncerConfig{Client: client, Statuses: m, APIPod: func(*v1.Pod) (*v1.Pod, bool) { return p, true }})
	m.SetPodStatus(p, v1.PodStatus{Phase: v1.PodRunning})
	s.pass(context.Background(), false)
	if n := actions(client, "delete"); n != 0 {
		t.Fatalf("%d deletes before termination, want 0", n)
	}
	s.PodTerminated(p.UID)
	s.pass(context.Background(), false)
	var del []k8stesting.DeleteAction
	for _, a := range client.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok {
			del = append(del, d)
		}
	}
	if len(del) != 1 {
		t.Fatalf("%d deletes after termination, want 1", len(del))
	}
	o := del[0].GetDeleteOptions()
	if o.GracePeriodSeconds == nil || *o.GracePeriodSeconds != 0 || o.Preconditions == nil || o.Preconditions.UID == nil || *o.Preconditions.UID != p.UID {
		t.Errorf("delete options %+v: want grace 0 and the UID precondition", o)
	}
	s.pass(context.Background(), false)
	if n := actions(client, "delete"); n != 1 {
		t.Errorf("%d deletes after another pass, want still 1", n)
	}
}

func TestSyncer_NoAPIPodNoRequest(t *testing.T) {
	client := fake.NewClientset()
	m := NewManager()
	s := NewSyncer(SyncerConfig{Client: client, Statuses: m, APIPod: func(*v1.Pod) (*v1.Pod, bool) { return nil, false }})
	m.SetPodStatus(syncPod("u1"), v1.PodStatus{Phase: v1.PodRunning})
	s.pass(context.Background(), true)
	if n := len(client.Actions()); n != 0 {
		t.Errorf("%d requests for a pod with no API object, want 0", n)
	}
}

func TestSameStatus(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 678, time.UTC)
	ready := v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}
	readBack := ready
	readBack.LastTransitionTime = metav1.NewTime(at.Truncate(time.Second))
	foreign := v1.PodCondition{Type: "example.com/Gate", Status: v1.ConditionFalse}
	for _, c := range []struct {
		name         string
		theirs, ours v1.PodStatus
		want         bool
	}{
		{"equal", v1.PodStatus{Phase: v1.PodRunning}, v1.PodStatus{Phase: v1.PodRunning}, true},
		{"phase differs", v1.PodStatus{Phase: v1.PodPending}, v1.PodStatus{Phase: v1.PodRunning}, false},
		{"sub-second times", v1.PodStatus{Conditions: []v1.PodCondition{readBack}}, v1.PodStatus{Conditions: []v1.PodCondition{ready}}, true},
		{"foreign condition ignored", v1.PodStatus{Conditions: []v1.PodCondition{readBack, foreign}}, v1.PodStatus{Conditions: []v1.PodCondition{ready}}, true},
		{"our condition missing", v1.PodStatus{}, v1.PodStatus{Conditions: []v1.PodCondition{ready}}, false},
	} {
		if got := sameStatus(c.theirs, c.ours); got != c.want {
			t.Errorf("%s: sameStatus = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestStatusPatch(t *testing.T) {
	api := syncPod("u1")
	api.Status = v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{
		{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [c]"},
		{Type: "example.com/Gate", Status: v1.ConditionTrue},
		// A resize done: the agent's status has no such condition any
		// more, and the patch takes it off.
		{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue},
	}}
	ours := v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}}
	patch, err := statusPatch(api, ours)
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(api.DeepCopy())
	got, err := client.CoreV1().Pods("default").Patch(context.Background(), "p", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != v1.PodRunning || len(got.Status.Conditions) != 2 {
		t.Fatalf("patched status %+v: want Running with Ready and the foreign condition, PodResizeInProgress gone", got.Status)
	}
	for _, c := range got.Status.Conditions {
		if c.Type == v1.PodReady && (c.Status != v1.ConditionTrue || c.Reason != "" || c.Message != "") {
			t.Errorf("Ready condition %+v: want True with the old reason and message removed", c)
		}
	}
	// The UID is a precondition: the patch carries metadata.uid, which a
	// pod of the same name and another UID cannot take.
	var meta struct {
		Metadata struct {
			UID types.UID `json:"uid"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(patch, &meta); err != nil || meta.Metadata.UID != api.UID {
		t.Errorf("patch %s: want metadata.uid %s (%v)", patch, api.UID, err)
	}
}

// runningStatus is a realistic status: five conditions, one container.
func runningStatus(at time.Time) v1.PodStatus {
	t := metav1.NewTime(at)
	var conds []v1.PodCondition
	for _, c := range []v1.PodConditionType{"PodReadyToStartContainers", v1.PodInitialized, v1.PodReady, v1.ContainersReady, v1.PodScheduled} {
		conds = append(conds, v1.PodCondition{Type: c, Status: v1.ConditionTrue, LastTransitionTime: t})
	}
	return v1.PodStatus{Phase: v1.PodRunning, Conditions: conds, HostIP: "10.0.0.1", PodIP: "10.1.0.7", StartTime: &t,
		QOSClass: v1.PodQOSBurstable, PodIPs: []v1.PodIP{{IP: "10.1.0.7"}},
		ContainerStatuses: []v1.ContainerStatus{{Name: "c", Ready: true, Image: "i", ImageID: "sha256:abc", ContainerID: "containerd://0123",
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: t}}, Started: ptrTrue()}}}
}

func ptrTrue() *bool { b := true; return &b }

// BenchmarkSameStatus is the check made for every pod on every pass and
// resync before any request.
func BenchmarkSameStatus(b *testing.B) {
	now := time.Now()
	ours, theirs := runningStatus(now), runningStatus(now.Truncate(time.Second))
	b.ReportAllocs()
	for b.Loop() {
		if !sameStatus(theirs, ours) {
			b.Fatal("statuses differ")
		}
	}
}

// BenchmarkStatusPatch is the cost of one status patch body.
func BenchmarkStatusPatch(b *testing.B) {
	api := syncPod("u1")
	api.Status = runningStatus(time.Now().Add(-time.Minute))
	api.Status.Phase = v1.PodPending
	ours := runningStatus(time.Now())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := statusPatch(api, ours); err != nil {
			b.Fatal(err)
		}
	}
}
