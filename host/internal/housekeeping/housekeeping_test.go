package housekeeping

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
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
