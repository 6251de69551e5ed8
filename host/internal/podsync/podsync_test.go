package podsync

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmlet/wasmlet/host/internal/runtime"
)

type recorded struct{ events []string }

func (r *recorded) Event(_ *v1.Pod, eventType, reason, message string) {
	r.events = append(r.events, eventType+" "+reason+": "+message)
}

func TestStepEvents(t *testing.T) {
	rec := &recorded{}
	s := &Syncer{cfg: Config{Events: rec}}
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}}
	s.stepEvents(p, runtime.SyncResult{Steps: []runtime.StepResult{
		{Action: "CreatePodSandbox", Target: "ns/p"},
		{Action: "StartContainer", Target: "a", Err: runtime.ErrCreateContainerConfig, Message: "container has runAsNonRoot and image will run as root"},
		{Action: "StartContainer", Target: "b", Err: runtime.ErrCrashLoopBackOff, Message: "back-off 10s"},
		{Action: "StartContainer", Target: "c"},
		{Action: "CreatePodSandbox", Target: "ns/p", Err: runtime.ErrCreateSandbox, Message: `runtimeclass.node.k8s.io "late" not found`},
	}})
	want := []string{
		"Warning Failed: Error: container has runAsNonRoot and image will run as root",
		"Warning BackOff: Back-off restarting failed container b in pod p_ns(u)",
		`Warning FailedCreatePodSandBox: Failed to create pod sandbox: runtimeclass.node.k8s.io "late" not found`,
	}
	if !slices.Equal(rec.events, want) {
		t.Errorf("events %q, want %q", rec.events, want)
	}
}
