package syncloop

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmlet/wasmlet/host/internal/admission"
	"github.com/wasmlet/wasmlet/host/internal/config"
	"github.com/wasmlet/wasmlet/host/internal/pleg"
	"github.com/wasmlet/wasmlet/host/internal/pod"
	"github.com/wasmlet/wasmlet/host/internal/podstate"
	"github.com/wasmlet/wasmlet/host/internal/status"
	"github.com/wasmlet/wasmlet/host/internal/worker"
)

// denyNamed rejects pods of one name.
type denyNamed string

func (d denyNamed) Admit(_ context.Context, a admission.Attributes) admission.Result {
	if a.Pod.Name == string(d) {
		return admission.Result{Reason: "Denied", Message: "no " + string(d), Admitter: "test"}
	}
	return admission.Result{Admit: true}
}

type recorder struct {
	mu         sync.Mutex
	waiting    map[types.UID]bool // pods whose workers would wait to start
	updates    []worker.Update
	events     []string
	changed    int
	terminated []types.UID
}

func (r *recorder) Update(u worker.Update) {
	r.mu.Lock()
	r.updates = append(r.updates, u)
	r.mu.Unlock()
}
func (r *recorder) Waits(p *v1.Pod) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.waiting[p.UID]
}
func (r *recorder) Event(p *v1.Pod, _, reason, _ string) {
	r.mu.Lock()
	r.events = append(r.events, p.Name+":"+reason)
	r.mu.Unlock()
}
func (r *recorder) Changed() { r.mu.Lock(); r.changed++; r.mu.Unlock() }
func (r *recorder) Terminated(p *v1.Pod) {
	r.mu.Lock()
	r.terminated = append(r.terminated, p.UID)
	r.mu.Unlock()
}

func newPod(name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid")},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "img"}}}}
}

// newLoop is a Loop over the given stores whose workers, recorder and
// cluster are rec; it admits every pod but those named "bad", whose
// initial status is Pending.
func newLoop(t *testing.T, rec *recorder, pods *pod.Manager, statuses *status.Manager, records *podstate.Store) *Loop {
	t.Helper()
	l, err := New(Config{
		Updates: make(chan config.PodUpdate), Events: make(chan pleg.Event), SeenAllSources: func() bool { return true },
		Pods: pods, Records: records, Statuses: statuses, Admit: denyNamed("bad"), Node: func() *v1.Node { return &v1.Node{} },
		InitialStatus: func(*v1.Pod) v1.PodStatus { return v1.PodStatus{Phase: v1.PodPending} },
		Workers:       rec, Housekeeping: func(context.Context) {}, Recorder: rec, Cluster: rec,
		SyncFrequency: time.Minute, HousekeepingInterval: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLoop_Dispatch_Admission(t *testing.T) {
	rec := &recorder{}
	pods := pod.New()
	statuses := status.NewManager()
	records := podstate.New(podstate.Config{})
	l := newLoop(t, rec, pods, statuses, records)
	good, bad := newPod("good"), newPod("bad")
	l.dispatch(context.Background(), config.PodUpdate{Op: config.OpAdd, Source: "file", Pods: []*v1.Pod{good, bad}})

	if len(rec.updates) != 1 || rec.updates[0].Pod.UID != good.UID || rec.updates[0].Kind != worker.Sync {
		t.Errorf("worker updates = %+v, want one Sync of good", rec.updates)
	}
	if s, _ := statuses.PodStatus(bad.UID); s.Phase != v1.PodFailed || s.Reason != "Denied" {
		t.Errorf("bad's status = %s/%s, want Failed/Denied", s.Phase, s.Reason)
	}
	if s, _ := statuses.PodStatus(good.UID); s.Phase != v1.PodPending {
		t.Errorf("good's status = %s, want its initial Pending", s.Phase)
	}
	if !records.Rejected(bad.UID) || records.Rejected(good.UID) {
		t.Errorf("rejected: bad %v good %v", records.Rejected(bad.UID), records.Rejected(good.UID))
	}
	if len(rec.events) != 1 || rec.events[0] != "bad:Denied" {
		t.Errorf("events = %v, want [bad:Denied]", rec.events)
	}

	// A rejected pod is never synced; when deleted, the cluster may delete
	// it at once; when removed, it is forgotten.
	rec.updates = nil
	l.syncs([]*v1.Pod{good, bad})
	if len(rec.updates) != 1 || rec.updates[0].Pod.UID != good.UID {
		t.Errorf("syncs handed %+v to workers, want good only", rec.updates)
	}
	deleted := bad.DeepCopy()
	now := metav1.Now()
	deleted.DeletionTimestamp = &now
	rec.updates = nil
	l.dispatch(context.Background(), config.PodUpdate{Op: config.OpDelete, Source: "api", Pods: []*v1.Pod{deleted}})
	if len(rec.updates) != 0 || len(rec.terminated) != 1 || rec.terminated[0] != bad.UID {
		t.Errorf("delete of a rejected pod: worker updates %+v, terminated %v", rec.updates, rec.terminated)
	}
	l.dispatch(context.Background(), config.PodUpdate{Op: config.OpRemove, Source: "api", Pods: []*v1.Pod{deleted}})
	if records.Rejected(bad.UID) || len(rec.updates) != 0 {
		t.Errorf("after remove: still rejected %v, worker updates %+v", records.Rejected(bad.UID), rec.updates)
	}
	if rec.changed != 3 {
		t.Errorf("cluster told of %d changes, want 3", rec.changed)
	}
}

func TestLoop_Dispatch_AdditionWaitingToStart(t *testing.T) {
	for _, c := range []struct {
		name   string
		waits  bool
		status bool // an initial status is recorded
		hadOne bool // the pod had a status already
		phase  v1.PodPhase
	}{
		{name: "a pod that starts gets its initial status", status: true, phase: v1.PodPending},
		{name: "a static pod waiting for its name gets none", waits: true},
		{name: "a status already there is kept", waits: true, hadOne: true, status: true, phase: v1.PodRunning},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPod("web")
			rec := &recorder{waiting: map[types.UID]bool{p.UID: c.waits}}
			statuses := status.NewManager()
			if c.hadOne {
				statuses.SetPodStatus(p, v1.PodStatus{Phase: v1.PodRunning})
			}
			l := newLoop(t, rec, pod.New(), statuses, podstate.New(podstate.Config{}))
			l.dispatch(context.Background(), config.PodUpdate{Op: config.OpAdd, Source: "file", Pods: []*v1.Pod{p}})
			if len(rec.updates) != 1 || rec.updates[0].Pod.UID != p.UID || rec.updates[0].Kind != worker.Sync {
				t.Errorf("worker updates = %+v, want one Sync of the pod", rec.updates)
			}
			st, ok := statuses.PodStatus(p.UID)
			if ok != c.status || st.Phase != c.phase {
				t.Errorf("status recorded %v phase %q, want %v %q", ok, st.Phase, c.status, c.phase)
			}
		})
	}
}

func TestLoop_PodsToSync_ActiveDeadline(t *testing.T) {
	rec := &recorder{}
	pods := pod.New()
	statuses := status.NewManager()
	records := podstate.New(podstate.Config{})
	l := newLoop(t, rec, pods, statuses, records)
	start := time.Now().Add(-time.Hour)
	now := start.Add(10 * time.Second)
	five := int64(5)
	past, early, failed, none, stale := newPod("past"), newPod("early"), newPod("failed"), newPod("none"), newPod("stale")
	past.Spec.ActiveDeadlineSeconds, failed.Spec.ActiveDeadlineSeconds = &five, &five
	long := int64(60)
	early.Spec.ActiveDeadlineSeconds = &long
	for _, p := range []*v1.Pod{past, early, failed, none, stale} {
		pods.AddPod(p)
		phase := v1.PodRunning
		if p == failed {
			phase = v1.PodFailed
		}
		statuses.SetPodStatus(p, v1.PodStatus{Phase: phase, StartTime: &metav1.Time{Time: start}})
		records.Synced(p.UID, now.Add(-time.Second))
	}
	// stale is due by SyncFrequency; past by its deadline (and synced a
	// second ago); early, failed and none are not.
	records.Synced(stale.UID, now.Add(-2*time.Minute))
	got := map[string]bool{}
	for _, p := range l.podsToSync(now) {
		if got[p.Name] {
			t.Errorf("%s listed twice", p.Name)
		}
		got[p.Name] = true
	}
	if len(got) != 2 || !got["past"] || !got["stale"] {
		t.Errorf("pods to sync %v, want past and stale", got)
	}
}

func TestLoop_ActivePods(t *testing.T) {
	rec := &recorder{}
	pods := pod.New()
	statuses := status.NewManager()
	records := podstate.New(podstate.Config{})
	l := newLoop(t, rec, pods, statuses, records)
	running, pending, succeeded, failed, bad := newPod("running"), newPod("pending"), newPod("succeeded"), newPod("failed"), newPod("bad")
	l.dispatch(context.Background(), config.PodUpdate{Op: config.OpAdd, Source: "file", Pods: []*v1.Pod{running, pending, succeeded, failed, bad}})
	for p, phase := range map[*v1.Pod]v1.PodPhase{running: v1.PodRunning, succeeded: v1.PodSucceeded, failed: v1.PodFailed} {
		statuses.SetPodStatus(p, v1.PodStatus{Phase: phase})
	}
	var got []string
	for _, p := range l.ActivePods() {
		got = append(got, p.Name)
	}
	// Pods() sorts by name; the terminal and the rejected ("bad") pods are out.
	if want := "[pending running]"; fmt.Sprint(got) != want {
		t.Errorf("ActivePods = %v, want %s", got, want)
	}
}
