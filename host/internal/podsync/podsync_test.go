package podsync

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/wasmlet/wasmlet/host/internal/container"
	"github.com/wasmlet/wasmlet/host/internal/podstate"
	"github.com/wasmlet/wasmlet/host/internal/status"
	"github.com/wasmlet/wasmlet/host/internal/worker"
)

type recorded struct{ events []string }

func (r *recorded) Event(_ *v1.Pod, eventType, reason, message string) {
	r.events = append(r.events, eventType+" "+reason+": "+message)
}

func TestStepEvents(t *testing.T) {
	rec := &recorded{}
	s := &Syncer{cfg: Config{Events: rec}}
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}}
	s.stepEvents(p, container.SyncResult{Steps: []container.StepResult{
		{Action: "CreatePodSandbox", Target: "ns/p"},
		{Action: "StartContainer", Target: "a", Err: container.ErrCreateContainerConfig, Message: "container has runAsNonRoot and image will run as root"},
		{Action: "StartContainer", Target: "b", Err: container.ErrCrashLoopBackOff, Message: "back-off 10s"},
		{Action: "StartContainer", Target: "c"},
		{Action: "CreatePodSandbox", Target: "ns/p", Err: container.ErrCreateSandbox, Message: `runtimeclass.node.k8s.io "late" not found`},
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

// fakeRuntime runs one pod: a ready sandbox and a running container "c"
// until KillPod, which records its grace period override.
type fakeRuntime struct {
	mu       sync.Mutex
	killed   bool
	override *int64
	synced   int
}

func (f *fakeRuntime) Name() string { return "fake" }
func (f *fakeRuntime) SyncPod(context.Context, *v1.Pod, *container.PodStatus, *flowcontrol.Backoff) container.SyncResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.synced++
	return container.SyncResult{}
}
func (f *fakeRuntime) KillPod(_ context.Context, _ *v1.Pod, _ *container.PodStatus, o *int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.killed, f.override = true, o
	return nil
}
func (f *fakeRuntime) GetPodStatus(_ context.Context, uid types.UID, name, ns string) (*container.PodStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	start := time.Now().Add(-time.Minute)
	s := &container.PodStatus{UID: uid, Name: name, Namespace: ns, Timestamp: time.Now(),
		Sandboxes:  []*container.SandboxStatus{{ID: "sb", Ready: !f.killed, CreatedAt: start}},
		Containers: []*container.ContainerStatus{{ID: "ctr", SandboxID: "sb", Name: "c", State: container.StateRunning, CreatedAt: start, StartedAt: start}},
	}
	if f.killed {
		s.Containers[0].State, s.Containers[0].ExitCode, s.Containers[0].Reason, s.Containers[0].FinishedAt = container.StateExited, 137, "Error", time.Now()
	}
	return s, nil
}
func (f *fakeRuntime) WaitingReason(types.UID, string) (string, string, bool) { return "", "", false }

// runtimeCache is a PLEG cache that reads the runtime on every call.
type runtimeCache struct{ rt *fakeRuntime }

func (c runtimeCache) GetNewerThan(ctx context.Context, uid types.UID, _ time.Time) (*container.PodStatus, error) {
	return c.rt.GetPodStatus(ctx, uid, "p", "ns")
}
func (runtimeCache) Set(types.UID, *container.PodStatus, error, time.Time) {}

type onePod struct{ p *v1.Pod }

func (o onePod) PodByUID(uid types.UID) (*v1.Pod, bool) { return o.p, uid == o.p.UID }

// An eviction (a Terminate with a Failure) gives the pod phase Failed with
// the failure's reason and message before it is killed, keeps them once
// its containers are dead, and a later sync does not start it again.
func TestSyncer_Terminate_failure(t *testing.T) {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "c", Image: "img"}}}}
	rt := &fakeRuntime{}
	statuses := status.NewManager()
	s, err := New(Config{Runtime: rt, Cache: runtimeCache{rt}, Statuses: statuses, Pods: onePod{p},
		Records: podstate.New(podstate.Config{}), Events: &recorded{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Sync(ctx, worker.Work{Kind: worker.Sync, Pod: p, First: true}); err != nil {
		t.Fatal(err)
	}
	if st, _ := statuses.PodStatus(p.UID); st.Phase != v1.PodRunning {
		t.Fatalf("before the eviction: phase %s, want Running", st.Phase)
	}
	msg := "Usage of EmptyDir volume \"scratch\" exceeds the limit \"1Mi\". "
	failure := &worker.Failure{Reason: "Evicted", Message: msg, Condition: &v1.PodCondition{
		Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonTerminationByKubelet, Message: msg}}
	// Twice, as a kill retried after an error is.
	for range 2 {
		if err := s.Sync(ctx, worker.Work{Kind: worker.Terminate, Pod: p, GracePeriod: time.Second, Failure: failure}); err != nil {
			t.Fatal(err)
		}
	}
	disruption := func(st v1.PodStatus) (n int, c v1.PodCondition) {
		for _, x := range st.Conditions {
			if x.Type == v1.DisruptionTarget {
				n, c = n+1, x
			}
		}
		return n, c
	}
	st, _ := statuses.PodStatus(p.UID)
	if n, c := disruption(st); n != 1 || c.Status != v1.ConditionTrue || c.Reason != v1.PodReasonTerminationByKubelet || c.Message != msg {
		t.Errorf("%d DisruptionTarget conditions, %+v: want one, True, TerminationByKubelet, the message", n, c)
	}
	if !rt.killed || rt.override == nil || *rt.override != 1 {
		t.Errorf("killed %v with override %v, want killed with 1 s", rt.killed, rt.override)
	}
	if st.Phase != v1.PodFailed || st.Reason != "Evicted" || st.Message != msg {
		t.Errorf("after the eviction: %s/%s/%q, want Failed/Evicted/%q", st.Phase, st.Reason, st.Message, msg)
	}
	if cs := st.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil {
		t.Errorf("container statuses %+v, want c terminated", cs)
	}
	// A new worker's sync (a PLEG event) keeps the pod failed and dead.
	if err := s.Sync(ctx, worker.Work{Kind: worker.Sync, Pod: p, First: true}); err != nil {
		t.Fatal(err)
	}
	if st, _ := statuses.PodStatus(p.UID); st.Phase != v1.PodFailed || st.Reason != "Evicted" || rt.synced != 1 {
		t.Errorf("after a later sync: %s/%s, runtime synced %d times, want Failed/Evicted and 1", st.Phase, st.Reason, rt.synced)
	}
	st, _ = statuses.PodStatus(p.UID)
	if n, _ := disruption(st); n != 1 {
		t.Errorf("after a later sync: %d DisruptionTarget conditions, want it kept, once", n)
	}
}

// sidecarRuntime runs a pod whose regular container "c" has exited 0 and
// whose sidecar "s" runs until KillPod, which records the pod's status as
// the agent holds it while the kill is under way.
type sidecarRuntime struct {
	fakeRuntime
	statuses  *status.Manager
	duringPod v1.PodStatus
}

func (f *sidecarRuntime) KillPod(ctx context.Context, p *v1.Pod, rs *container.PodStatus, o *int64) error {
	f.duringPod, _ = f.statuses.PodStatus(p.UID)
	return f.fakeRuntime.KillPod(ctx, p, rs, o)
}

func (f *sidecarRuntime) GetPodStatus(_ context.Context, uid types.UID, name, ns string) (*container.PodStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	start := time.Now().Add(-time.Minute)
	s := &container.PodStatus{UID: uid, Name: name, Namespace: ns, Timestamp: time.Now(),
		Sandboxes: []*container.SandboxStatus{{ID: "sb", Ready: !f.killed, CreatedAt: start, IPs: []string{"10.0.0.7"}}},
		Containers: []*container.ContainerStatus{
			{ID: "c1", SandboxID: "sb", Name: "c", State: container.StateExited, CreatedAt: start, StartedAt: start, FinishedAt: start.Add(time.Second), Reason: "Completed"},
			{ID: "s1", SandboxID: "sb", Name: "s", State: container.StateRunning, CreatedAt: start, StartedAt: start},
		},
	}
	if f.killed {
		s.Containers[1].State, s.Containers[1].Reason, s.Containers[1].FinishedAt = container.StateExited, "Completed", time.Now()
	} else {
		s.IPs = []string{"10.0.0.7"}
	}
	return s, nil
}

// A pod whose regular containers finished (restartPolicy Never) has its
// sidecar stopped, and shows its terminal phase only once the sidecar is
// stopped: while the kill runs the phase is still Running, afterwards it
// is Succeeded with the sidecar's end in its status, as the kubelet shows a
// terminal phase only once nothing of the pod can run.
func TestSyncer_TerminalPhaseWaitsForSidecars(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever,
			InitContainers: []v1.Container{{Name: "s", Image: "img", RestartPolicy: &always}},
			Containers:     []v1.Container{{Name: "c", Image: "img"}}}}
	statuses := status.NewManager()
	rt := &sidecarRuntime{statuses: statuses}
	statuses.SetPodStatus(p, v1.PodStatus{Phase: v1.PodRunning})
	s, err := New(Config{Runtime: rt, Cache: sidecarCache{rt}, Statuses: statuses, Pods: onePod{p},
		Records: podstate.New(podstate.Config{}), Events: &recorded{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(context.Background(), worker.Work{Kind: worker.Sync, Pod: p}); err != nil {
		t.Fatal(err)
	}
	if !rt.killed {
		t.Fatal("the sidecar of a finished pod was not stopped")
	}
	if rt.duringPod.Phase != v1.PodRunning {
		t.Errorf("phase while the sidecar stops = %s, want Running (held)", rt.duringPod.Phase)
	}
	st, _ := statuses.PodStatus(p.UID)
	if st.Phase != v1.PodSucceeded {
		t.Errorf("phase once stopped = %s, want Succeeded", st.Phase)
	}
	if len(st.InitContainerStatuses) != 1 || st.InitContainerStatuses[0].State.Terminated == nil {
		t.Errorf("sidecar status %+v, want terminated", st.InitContainerStatuses)
	}
	if st.PodIP != "10.0.0.7" {
		t.Errorf("pod IP once stopped = %q, want the one it had", st.PodIP)
	}
}

type sidecarCache struct{ rt *sidecarRuntime }

func (c sidecarCache) GetNewerThan(ctx context.Context, uid types.UID, _ time.Time) (*container.PodStatus, error) {
	return c.rt.GetPodStatus(ctx, uid, "p", "ns")
}
func (sidecarCache) Set(types.UID, *container.PodStatus, error, time.Time) {}

// resizeRuntime is fakeRuntime whose sync reports a failed in-place
// resize and records the pod it was asked to run.
type resizeRuntime struct {
	fakeRuntime
	ran *v1.Pod
}

func (f *resizeRuntime) SyncPod(_ context.Context, p *v1.Pod, _ *container.PodStatus, _ *flowcontrol.Backoff) container.SyncResult {
	f.ran = p
	var r container.SyncResult
	r.Add("ResizePod", "ns/p", container.ErrResizePod, "container c: memory limit 1 would be below its memory usage 2")
	return r
}

// fakeAllocation allocates 1 cpu to every container and records what
// Done was told.
type fakeAllocation struct{ doneErr error }

func (fakeAllocation) Allocated(types.UID, string) (v1.ResourceRequirements, bool) {
	return v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}, true
}
func (fakeAllocation) Actuated(types.UID, string) (v1.ResourceRequirements, bool) {
	return v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")}}, true
}
func (fakeAllocation) Conditions(types.UID) []v1.PodCondition {
	return []v1.PodCondition{{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue, Reason: "Error"}}
}
func (fakeAllocation) Resize(_ context.Context, p *v1.Pod) *v1.Pod {
	q := p.DeepCopy()
	q.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
	return q
}
func (a *fakeAllocation) Done(_ *v1.Pod, _ *container.PodStatus, err error) { a.doneErr = err }

// With an allocation manager the runtime runs the pod at its allocation,
// the manager is told the resize's failure, and the status shows the
// resize conditions, the allocated and the actuated resources and the
// observed generation.
func TestSyncer_Sync_allocation(t *testing.T) {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", Generation: 3},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "c", Image: "img"}}}}
	rt := &resizeRuntime{}
	alloc := &fakeAllocation{}
	statuses := status.NewManager()
	s, err := New(Config{Runtime: rt, Cache: runtimeCache{&rt.fakeRuntime}, Statuses: statuses, Pods: onePod{p},
		Records: podstate.New(podstate.Config{}), Events: &recorded{}, Allocation: alloc})
	if err != nil {
		t.Fatal(err)
	}
	s.Sync(context.Background(), worker.Work{Kind: worker.Sync, Pod: p, First: true})
	if rt.ran == nil || rt.ran.Spec.Containers[0].Resources.Requests.Cpu().String() != "1" {
		t.Fatalf("the runtime ran %v, want the pod at its allocation (1 cpu)", rt.ran)
	}
	if alloc.doneErr == nil || alloc.doneErr.Error() != "container c: memory limit 1 would be below its memory usage 2" {
		t.Errorf("Done told %v, want the resize's message", alloc.doneErr)
	}
	st, _ := statuses.PodStatus(p.UID)
	if st.ObservedGeneration != 3 {
		t.Errorf("observedGeneration %d, want 3", st.ObservedGeneration)
	}
	found := false
	for _, c := range st.Conditions {
		found = found || (c.Type == v1.PodResizeInProgress && c.Reason == "Error")
	}
	cs := st.ContainerStatuses[0]
	if !found || cs.AllocatedResources.Cpu().String() != "1" || cs.Resources == nil || cs.Resources.Requests.Cpu().String() != "500m" {
		t.Errorf("conditions %v, allocated %v, resources %v: want InProgress Error, 1 cpu allocated, 500m actual", st.Conditions, cs.AllocatedResources, cs.Resources)
	}
}

// orderLog records the order of a sync's resize decision and status
// writes.
type orderLog struct{ steps []string }

// loggedStatuses is a status manager that logs each status it is given.
type loggedStatuses struct {
	*status.Manager
	log *orderLog
}

func (l loggedStatuses) SetPodStatus(p *v1.Pod, s v1.PodStatus) bool {
	conds := ""
	for _, c := range s.Conditions {
		if c.Type == v1.PodResizeInProgress {
			conds = " InProgress"
		}
	}
	l.log.steps = append(l.log.steps, "status"+conds)
	return l.Manager.SetPodStatus(p, s)
}

// decidingAllocation starts a resize at its first Resize: from then on the
// pod has PodResizeInProgress.
type decidingAllocation struct {
	fakeAllocation
	log     *orderLog
	decided bool
}

func (a *decidingAllocation) Conditions(types.UID) []v1.PodCondition {
	if !a.decided {
		return nil
	}
	return []v1.PodCondition{{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue}}
}
func (a *decidingAllocation) Resize(ctx context.Context, p *v1.Pod) *v1.Pod {
	a.decided = true
	a.log.steps = append(a.log.steps, "resize")
	return a.fakeAllocation.Resize(ctx, p)
}

// A sync decides the pod's resize before it records any status: every
// status showing the new generation as observed shows its resize in
// progress too, so no client takes the old resources for the resize's
// outcome.
func TestSyncer_Sync_resizeBeforeStatus(t *testing.T) {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", Generation: 2},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "c", Image: "img"}}}}
	rt := &fakeRuntime{}
	log := &orderLog{}
	alloc := &decidingAllocation{log: log}
	s, err := New(Config{Runtime: rt, Cache: runtimeCache{rt}, Statuses: loggedStatuses{status.NewManager(), log}, Pods: onePod{p},
		Records: podstate.New(podstate.Config{}), Events: &recorded{}, Allocation: alloc})
	if err != nil {
		t.Fatal(err)
	}
	s.Sync(context.Background(), worker.Work{Kind: worker.Sync, Pod: p, First: true})
	if len(log.steps) < 2 || log.steps[0] != "resize" {
		t.Fatalf("steps %q, want the resize decided before any status", log.steps)
	}
	for _, st := range log.steps[1:] {
		if st != "status InProgress" {
			t.Errorf("steps %q: a status without the resize in progress", log.steps)
		}
	}
}
