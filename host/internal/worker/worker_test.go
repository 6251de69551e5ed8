package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func testPod(uid, image string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "default", UID: types.UID(uid)},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: image}}},
	}
}

// recorder is a fake sync function that records its calls.
type recorder struct {
	mu    sync.Mutex
	calls []string // "uid kind image first"
	block chan struct{}
	fail  int // fail this many calls
	errs  int
	seen  chan Work
}

func (r *recorder) sync(ctx context.Context, w Work) error {
	r.mu.Lock()
	r.calls = append(r.calls, fmt.Sprintf("%s %s %s %v", w.Pod.UID, w.Kind, w.Pod.Spec.Containers[0].Image, w.First))
	fail := r.fail > 0
	if fail {
		r.fail--
		r.errs++
	}
	block := r.block
	r.mu.Unlock()
	if r.seen != nil {
		r.seen <- w
	}
	if block != nil && w.Kind == Sync {
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail {
		return errors.New("sync failed")
	}
	return nil
}

func (r *recorder) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

func waitCalls(t *testing.T, r *recorder, n int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := r.snapshot()
		if len(c) >= n {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls, want %d: %v", len(c), n, c)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestWorkers_Update_coalesces(t *testing.T) {
	r := &recorder{block: make(chan struct{}), seen: make(chan Work, 10)}
	w, err := New(Config{SyncFunc: r.sync})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	w.Update(Update{Pod: testPod("a", "v1")})
	<-r.seen // the first sync is running and blocked
	w.Update(Update{Pod: testPod("a", "v2")})
	w.Update(Update{Pod: testPod("a", "v3")})
	w.Update(Update{Pod: testPod("a", "v4")})
	close(r.block)
	calls := waitCalls(t, r, 2)
	time.Sleep(50 * time.Millisecond)
	calls = r.snapshot()
	want := []string{"a sync v1 true", "a sync v4 false"}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("calls %v, want %v (pending updates coalesce, the newest wins)", calls, want)
	}
}

func TestWorkers_Update_terminate(t *testing.T) {
	var terminated []types.UID
	var mu sync.Mutex
	r := &recorder{block: make(chan struct{}), seen: make(chan Work, 10)}
	w, _ := New(Config{SyncFunc: r.sync, Terminated: func(p *v1.Pod) {
		mu.Lock()
		terminated = append(terminated, p.UID)
		mu.Unlock()
	}})
	defer w.Stop()
	p := testPod("a", "v1")
	w.Update(Update{Pod: p})
	<-r.seen // a sync is running, blocked: the kill must cancel it
	g := int64(7)
	w.Update(Update{Pod: p, Kind: Terminate, GracePeriodOverride: &g})
	if !w.IsTerminating("a") {
		t.Error("not terminating after a Terminate update")
	}
	kill := <-r.seen
	if kill.Kind != Terminate || kill.GracePeriod != 7*time.Second {
		t.Errorf("kill work %+v", kill)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(w.Known()) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("worker not forgotten after termination")
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	if fmt.Sprint(terminated) != "[a]" {
		t.Errorf("terminated callback %v", terminated)
	}
	mu.Unlock()
	// A new update for the UID starts a new worker.
	close(r.block)
	w.Update(Update{Pod: p})
	calls := waitCalls(t, r, 3)
	if calls[2] != "a sync v1 true" {
		t.Errorf("calls %v", calls)
	}
}

func TestWorkers_Update_terminateUnknownPod(t *testing.T) {
	r := &recorder{}
	w, _ := New(Config{SyncFunc: r.sync})
	defer w.Stop()
	w.Update(Update{Pod: testPod("orphan", "v1"), Kind: Terminate})
	calls := waitCalls(t, r, 1)
	if calls[0] != "orphan terminate v1 false" {
		t.Errorf("calls %v", calls)
	}
}

func TestWorkers_backOffAndResync(t *testing.T) {
	r := &recorder{fail: 2}
	w, _ := New(Config{SyncFunc: r.sync, BackOff: 20 * time.Millisecond, MaxBackOff: 40 * time.Millisecond, ResyncInterval: 30 * time.Millisecond})
	defer w.Stop()
	start := time.Now()
	w.Update(Update{Pod: testPod("a", "v1")})
	calls := waitCalls(t, r, 3) // fail, retry after 20 ms fails, retry after 40 ms succeeds
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Errorf("3 calls after %v: back-off not applied", d)
	}
	waitCalls(t, r, 5) // then resyncs
	if calls[0] != "a sync v1 true" || calls[1] != "a sync v1 false" {
		t.Errorf("calls %v", calls)
	}
}

func TestWorkers_terminateRetriesUntilDone(t *testing.T) {
	r := &recorder{fail: 1}
	w, _ := New(Config{SyncFunc: r.sync, BackOff: 10 * time.Millisecond})
	defer w.Stop()
	w.Update(Update{Pod: testPod("a", "v1"), Kind: Terminate})
	waitCalls(t, r, 2)
	deadline := time.Now().Add(5 * time.Second)
	for len(w.Known()) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("worker not forgotten after a successful retry of the kill")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestGracePeriod(t *testing.T) {
	s := func(v int64) *int64 { return &v }
	now := metav1.Now()
	tests := []struct {
		name     string
		spec     *int64
		deletion *int64
		override *int64
		want     time.Duration
	}{
		{"default 30 s", nil, nil, nil, 30 * time.Second},
		{"spec", s(10), nil, nil, 10 * time.Second},
		{"deletion wins over spec", s(10), s(3), nil, 3 * time.Second},
		{"override wins", s(10), s(3), s(5), 5 * time.Second},
		{"at least 1 s", s(0), nil, nil, time.Second},
	}
	for _, tt := range tests {
		p := testPod("a", "v")
		p.Spec.TerminationGracePeriodSeconds = tt.spec
		if tt.deletion != nil {
			p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, tt.deletion
		}
		if got := GracePeriod(p, tt.override); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestWorkers_Update_gracePeriodOnlyShrinks(t *testing.T) {
	// The first kill fails, and is held until both later requests are in,
	// so its retry sees them both whenever it runs.
	seen, release := make(chan Work, 10), make(chan struct{})
	calls := 0
	kill := func(ctx context.Context, wk Work) error {
		seen <- wk
		calls++
		if calls == 1 {
			<-release
			return errors.New("kill failed")
		}
		return nil
	}
	w, _ := New(Config{SyncFunc: kill, BackOff: 50 * time.Millisecond})
	defer w.Stop()
	p := testPod("a", "v1")
	g10, g2, g20 := int64(10), int64(2), int64(20)
	w.Update(Update{Pod: p, Kind: Terminate, GracePeriodOverride: &g10})
	if k := <-seen; k.GracePeriod != 10*time.Second {
		t.Fatalf("first kill %v", k.GracePeriod)
	}
	w.Update(Update{Pod: p, Kind: Terminate, GracePeriodOverride: &g20})
	w.Update(Update{Pod: p, Kind: Terminate, GracePeriodOverride: &g2})
	close(release)
	if k := <-seen; k.GracePeriod != 2*time.Second {
		t.Errorf("second kill %v, want 2s", k.GracePeriod)
	}
}

func TestWorkers_metric(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := &recorder{}
	w, err := New(Config{SyncFunc: r.sync, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	w.Update(Update{Pod: testPod("a", "v1")})
	waitCalls(t, r, 1)
	w.Stop()
	mfs, _ := reg.Gather()
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "wasmlet_pod_worker_duration_seconds" {
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == "create" && m.GetHistogram().GetSampleCount() == 1 {
					found = true
				}
			}
		}
	}
	if !found {
		t.Error("no create observation in wasmlet_pod_worker_duration_seconds")
	}
	if _, err := New(Config{SyncFunc: r.sync, Registerer: reg}); err == nil {
		t.Error("registering twice did not fail")
	}
}

func BenchmarkWorkers_Update1000Pods(b *testing.B) {
	var done sync.WaitGroup
	w, _ := New(Config{SyncFunc: func(ctx context.Context, wk Work) error { done.Done(); return nil }})
	defer w.Stop()
	pods := make([]*v1.Pod, 1000)
	for i := range pods {
		pods[i] = testPod(fmt.Sprint(i), "v")
	}
	for b.Loop() {
		done.Add(len(pods))
		for _, p := range pods {
			w.Update(Update{Pod: p})
		}
		done.Wait()
	}
}

// A Terminate's Failure reaches the sync function; the first one given to
// a terminating pod is kept (a later plain kill or another failure does
// not replace it).
func TestWorkers_Update_terminateFailure(t *testing.T) {
	r := &recorder{fail: 1, seen: make(chan Work, 10)}
	w, _ := New(Config{SyncFunc: r.sync, BackOff: 50 * time.Millisecond})
	defer w.Stop()
	p := testPod("a", "v1")
	zero := int64(0)
	evicted := &Failure{Reason: "Evicted", Message: "over"}
	w.Update(Update{Pod: p, Kind: Terminate, GracePeriodOverride: &zero, Failure: evicted})
	if k := <-r.seen; k.Kind != Terminate || k.Failure != evicted || k.GracePeriod != time.Second {
		t.Fatalf("first kill %+v, want Terminate with the failure, 1 s", k)
	}
	w.Update(Update{Pod: p, Kind: Terminate})
	w.Update(Update{Pod: p, Kind: Terminate, Failure: &Failure{Reason: "Other"}})
	if k := <-r.seen; k.Failure != evicted {
		t.Errorf("retried kill's failure %+v, want the first %+v", k.Failure, evicted)
	}
	// A plain kill carries none.
	w.Update(Update{Pod: testPod("b", "v1"), Kind: Terminate})
	if k := <-r.seen; k.Failure != nil {
		t.Errorf("plain kill's failure %+v, want nil", k.Failure)
	}
}

// A pod added again while it terminates (a static pod's manifest removed
// and put back) starts over once its termination is done; removed again
// before that, it does not.
func TestWorkers_Update_recreate(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	entered := make(chan Kind, 10)
	release := make(chan struct{})
	terminated := make(chan struct{}, 10)
	w, _ := New(Config{
		SyncFunc: func(ctx context.Context, wk Work) error {
			mu.Lock()
			calls = append(calls, fmt.Sprintf("%s %s %v", wk.Kind, wk.Pod.Spec.Containers[0].Image, wk.First))
			mu.Unlock()
			entered <- wk.Kind
			if wk.Kind == Terminate {
				<-release
			}
			return nil
		},
		Terminated: func(*v1.Pod) { terminated <- struct{}{} },
	})
	defer w.Stop()
	w.Update(Update{Pod: testPod("a", "v1"), Kind: Sync, Recreate: true})
	<-entered
	w.Update(Update{Pod: testPod("a", "v1"), Kind: Terminate})
	for k := <-entered; k != Terminate; k = <-entered {
	}
	w.Update(Update{Pod: testPod("a", "v2"), Kind: Sync, Recreate: true})
	w.mu.Lock()
	if !w.workers["a"].recreate {
		t.Error("a pod added while terminating is not marked to start over")
	}
	w.mu.Unlock()
	w.Update(Update{Pod: testPod("a", "v2"), Kind: Terminate})
	w.mu.Lock()
	if w.workers["a"].recreate {
		t.Error("a Terminate after the pod came back leaves it marked to start over")
	}
	w.mu.Unlock()
	w.Update(Update{Pod: testPod("a", "v3"), Kind: Sync, Recreate: true})
	close(release)
	<-terminated
	if k := <-entered; k != Sync {
		t.Fatalf("after the termination the worker ran %s, want a Sync", k)
	}
	mu.Lock()
	defer mu.Unlock()
	if last := calls[len(calls)-1]; last != "sync v3 true" {
		t.Errorf("calls %v: want the pod started over with its newest spec, as a first sync", calls)
	}
}
