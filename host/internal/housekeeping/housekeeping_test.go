package housekeeping

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/wasmlet/wasmlet/host/internal/container"
	"github.com/wasmlet/wasmlet/host/internal/worker"
)

type noPods struct{}

func (noPods) Pods() []*v1.Pod                                   { return nil }
func (noPods) PodByUID(types.UID) (*v1.Pod, bool)                { return nil, false }
func (noPods) Known() []types.UID                                { return nil }
func (noPods) Update(worker.Update)                              {}
func (noPods) IsTerminating(types.UID) bool                      { return false }
func (noPods) GetPods(context.Context) ([]*container.Pod, error) { return nil, nil }

type countingRuntime struct {
	noPods
	collections int
}

func (r *countingRuntime) GarbageCollect(context.Context, []*container.Pod, func(types.UID) bool) error {
	r.collections++
	return nil
}

type noStatuses struct{}

func (noStatuses) Pods() []v1.Pod { return nil }

// TestCleaner_GCPeriod checks that dead containers and sandboxes are
// collected in the first pass and then at most once per GC period, however
// often housekeeping runs.
func TestCleaner_GCPeriod(t *testing.T) {
	rt := &countingRuntime{}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := New(Config{Pods: noPods{}, Workers: noPods{}, Runtime: rt, Statuses: noStatuses{},
		Forget: func(types.UID) {}, BackOff: flowcontrol.NewBackOff(time.Second, time.Minute),
		GCPeriod: time.Minute, Now: func() time.Time { return now }})
	pass := func() {
		c.Start(context.Background())
		c.Wait()
	}
	pass()
	if rt.collections != 1 {
		t.Fatalf("%d collections after the first pass, want 1", rt.collections)
	}
	for range 29 { // a minute of passes 2 s apart, short of the period
		now = now.Add(2 * time.Second)
		pass()
	}
	if rt.collections != 1 {
		t.Errorf("%d collections within one GC period, want 1", rt.collections)
	}
	now = now.Add(2 * time.Second)
	pass()
	if rt.collections != 2 {
		t.Errorf("%d collections once the period passed, want 2", rt.collections)
	}
	zero := &countingRuntime{}
	c = New(Config{Pods: noPods{}, Workers: noPods{}, Runtime: zero, Statuses: noStatuses{},
		Forget: func(types.UID) {}, BackOff: flowcontrol.NewBackOff(time.Second, time.Minute), Now: func() time.Time { return now }})
	for range 3 {
		c.Start(context.Background())
		c.Wait()
	}
	if zero.collections != 3 {
		t.Errorf("%d collections in 3 passes with no GC period, want 3", zero.collections)
	}
}

// TestCleaner_DeleteUnusedContainers checks that a reclaim collects at
// once, inside the GC period, and that the next pass counts from it.
func TestCleaner_DeleteUnusedContainers(t *testing.T) {
	rt := &countingRuntime{}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := New(Config{Pods: noPods{}, Workers: noPods{}, Runtime: rt, Statuses: noStatuses{},
		Forget: func(types.UID) {}, BackOff: flowcontrol.NewBackOff(time.Second, time.Minute),
		GCPeriod: time.Minute, Now: func() time.Time { return now }})
	c.Start(context.Background())
	c.Wait()
	now = now.Add(10 * time.Second)
	if err := c.DeleteUnusedContainers(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rt.collections != 2 {
		t.Fatalf("%d collections after a pass and a reclaim within the period, want 2", rt.collections)
	}
	now = now.Add(55 * time.Second) // a minute after the pass, not after the reclaim
	c.Start(context.Background())
	c.Wait()
	if rt.collections != 2 {
		t.Errorf("%d collections: a pass within the period of the reclaim collected", rt.collections)
	}
}

// wanted is a pod manager and workers: the pods the sources have, and
// those whose worker is still killing them.
type wanted struct {
	noPods
	pods        map[types.UID]bool
	terminating map[types.UID]bool
}

// statusList is the recorded statuses.
type statusList []v1.Pod

func (s statusList) Pods() []v1.Pod { return s }

func (w wanted) PodByUID(uid types.UID) (*v1.Pod, bool) {
	if !w.pods[uid] {
		return nil, false
	}
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}}, true
}
func (w wanted) IsTerminating(uid types.UID) bool { return w.terminating[uid] }

// keepingRuntime records what the last collection's keep said of each
// pod.
type keepingRuntime struct {
	noPods
	uids []types.UID
	kept map[types.UID]bool
}

func (r *keepingRuntime) GarbageCollect(_ context.Context, _ []*container.Pod, keep func(types.UID) bool) error {
	r.kept = map[types.UID]bool{}
	for _, uid := range r.uids {
		r.kept[uid] = keep(uid)
	}
	return nil
}

// TestCleaner_DeleteUnusedContainers_finishedPods checks what a reclaim
// keeps, and that a periodic pass keeps more: a running pod's objects
// are kept by both; a pod whose phase is Succeeded or Failed and whose
// worker has finished killing it is collected whole by the reclaim, as
// the kubelet's reclaim collects a terminated pod, yet kept by a pass; a
// finished pod still being killed is kept by both; a pod no source has
// is collected by both.
func TestCleaner_DeleteUnusedContainers_finishedPods(t *testing.T) {
	status := func(uid types.UID, phase v1.PodPhase) v1.Pod {
		return v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: v1.PodStatus{Phase: phase}}
	}
	w := wanted{
		pods:        map[types.UID]bool{"running": true, "succeeded": true, "failed": true, "killing": true},
		terminating: map[types.UID]bool{"killing": true},
	}
	statuses := statusList{status("running", v1.PodRunning), status("succeeded", v1.PodSucceeded),
		status("failed", v1.PodFailed), status("killing", v1.PodFailed), status("gone", v1.PodSucceeded)}
	rt := &keepingRuntime{uids: []types.UID{"running", "succeeded", "failed", "killing", "gone"}}
	c := New(Config{Pods: w, Workers: w, Runtime: rt, Statuses: statuses, Forget: func(types.UID) {},
		BackOff: flowcontrol.NewBackOff(time.Second, time.Minute)})
	for _, tc := range []struct {
		name string
		run  func()
		want map[types.UID]bool
	}{
		{"reclaim", func() {
			if err := c.DeleteUnusedContainers(context.Background()); err != nil {
				t.Fatal(err)
			}
		}, map[types.UID]bool{"running": true, "succeeded": false, "failed": false, "killing": true, "gone": false}},
		{"pass", func() { c.Start(context.Background()); c.Wait() },
			map[types.UID]bool{"running": true, "succeeded": true, "failed": true, "killing": true, "gone": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.run()
			for uid, want := range tc.want {
				if rt.kept[uid] != want {
					t.Errorf("pod %s: kept %v, want %v", uid, rt.kept[uid], want)
				}
			}
		})
	}
}
