package allocation

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmlet/wasmlet/host/internal/admission"
	"github.com/wasmlet/wasmlet/host/internal/container"
)

type chain struct{ seen []*v1.Pod }

func (c *chain) Admit(ctx context.Context, attrs admission.Attributes) admission.Result {
	c.seen = append(c.seen, attrs.Pod)
	r, _ := admission.ResourceFit().Admit(ctx, attrs)
	return r
}

type events struct{ reasons []string }

func (e *events) Event(_ *v1.Pod, _, reason, msg string) {
	e.reasons = append(e.reasons, reason+" "+msg)
}

func node(cpu, mem string) *v1.Node {
	n := &v1.Node{}
	n.Status.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem), v1.ResourcePods: resource.MustParse("110")}
	return n
}

func pod(uid, cpu, mem string, policy v1.ResourceResizeRestartPolicy) *v1.Pod {
	r := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "default", UID: types.UID(uid), Generation: 1}}
	p.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: r, Limits: r.DeepCopy()},
		ResizePolicy: []v1.ContainerResizePolicy{{ResourceName: v1.ResourceCPU, RestartPolicy: policy}, {ResourceName: v1.ResourceMemory, RestartPolicy: policy}}}}
	return p
}

func resized(p *v1.Pod, cpu, mem string) *v1.Pod {
	q := p.DeepCopy()
	r := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}
	q.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: r, Limits: r.DeepCopy()}
	q.Generation++
	return q
}

func newManager(t *testing.T, dir string, n *v1.Node, active *[]*v1.Pod, ev *events, inPlace string) *Manager {
	t.Helper()
	m, err := New(Config{RootDir: dir, Admit: &chain{}, Node: func() *v1.Node { return n }, ActivePods: func() []*v1.Pod { return *active },
		Events: ev, InPlaceUnsupported: func() string { return inPlace }})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func condition(m *Manager, uid types.UID, t v1.PodConditionType) *v1.PodCondition {
	for _, c := range m.Conditions(uid) {
		if c.Type == t {
			return &c
		}
	}
	return nil
}

// A resize is decided against the node's allocatable and the other pods'
// allocations: it fits (the allocation, PodResizeInProgress), waits
// (Deferred) or never can (Infeasible); on a runtime that cannot resize in
// place only a resize every changed resource of which restarts is allowed.
func TestManager_Resize(t *testing.T) {
	tests := []struct {
		name       string
		cpu, mem   string
		policy     v1.ResourceResizeRestartPolicy
		inPlace    string
		wantReason string // "" when allocated
		wantMsg    string
		wantEvent  string
	}{
		{name: "fits", cpu: "1", mem: "200Mi", policy: v1.NotRequired, wantEvent: EventResizeStarted},
		{name: "deferred by the other pod", cpu: "1500m", mem: "100Mi", policy: v1.NotRequired, wantReason: v1.PodReasonDeferred, wantMsg: "cpu", wantEvent: EventResizeDeferred},
		{name: "infeasible above allocatable", cpu: "3", mem: "100Mi", policy: v1.NotRequired, wantReason: v1.PodReasonInfeasible,
			wantMsg: "Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000", wantEvent: EventResizeInfeasible},
		{name: "no in-place resize", cpu: "1", mem: "100Mi", policy: v1.NotRequired, inPlace: "the runtime cannot", wantReason: v1.PodReasonInfeasible,
			wantMsg: "the runtime cannot: container c: cpu cannot change without a restart", wantEvent: EventResizeInfeasible},
		{name: "restart instead of in place", cpu: "1", mem: "100Mi", policy: v1.RestartContainer, inPlace: "the runtime cannot", wantEvent: EventResizeStarted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			other := pod("other", "1", "100Mi", v1.NotRequired)
			p := pod("p", "500m", "100Mi", tt.policy)
			active := []*v1.Pod{other, p}
			ev := &events{}
			m := newManager(t, t.TempDir(), node("2", "1Gi"), &active, ev, tt.inPlace)
			for _, q := range []*v1.Pod{other, p} {
				if r := m.Admit(context.Background(), admission.Attributes{Pod: q, Node: node("2", "1Gi")}); !r.Admit {
					t.Fatalf("admit %s: %+v", q.Name, r)
				}
			}
			want := resized(p, tt.cpu, tt.mem)
			got := m.Resize(context.Background(), want)
			pending, progress := condition(m, p.UID, v1.PodResizePending), condition(m, p.UID, v1.PodResizeInProgress)
			if tt.wantReason == "" {
				if got != want || pending != nil || progress == nil || progress.ObservedGeneration != 2 {
					t.Errorf("got the pod at its spec %v, pending %+v, in progress %+v: want the spec, InProgress at generation 2", got == want, pending, progress)
				}
				if a, _ := m.Allocated(p.UID, "c"); a.Requests.Cpu().String() != tt.cpu {
					t.Errorf("allocated cpu %s, want %s", a.Requests.Cpu(), tt.cpu)
				}
			} else {
				if got.Spec.Containers[0].Resources.Requests.Cpu().String() != "500m" {
					t.Errorf("pod to run asks %s cpu, want its old allocation 500m", got.Spec.Containers[0].Resources.Requests.Cpu())
				}
				if pending == nil || pending.Reason != tt.wantReason || !strings.Contains(pending.Message, tt.wantMsg) || progress != nil {
					t.Errorf("pending %+v in progress %+v: want %s containing %q", pending, progress, tt.wantReason, tt.wantMsg)
				}
				// Asked again, the same decision makes no second event.
				m.Resize(context.Background(), want)
			}
			if len(ev.reasons) != 1 || !strings.HasPrefix(ev.reasons[0], tt.wantEvent+" ") {
				t.Errorf("events %q, want one %s", ev.reasons, tt.wantEvent)
			}
		})
	}
}

// A deferred resize fits once the pod holding the cpu goes: its removal
// asks for a sync of the deferred pod.
func TestManager_RemovePod(t *testing.T) {
	other := pod("other", "1", "100Mi", v1.NotRequired)
	p := pod("p", "500m", "100Mi", v1.NotRequired)
	active := []*v1.Pod{other, p}
	var resynced []types.UID
	m, err := New(Config{RootDir: t.TempDir(), Admit: &chain{}, Node: func() *v1.Node { return node("2", "1Gi") }, ActivePods: func() []*v1.Pod { return active },
		Resync: func(uid types.UID) { resynced = append(resynced, uid) }})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range active {
		m.Admit(context.Background(), admission.Attributes{Pod: q, Node: node("2", "1Gi")})
	}
	want := resized(p, "1500m", "100Mi")
	m.Resize(context.Background(), want)
	if c := condition(m, p.UID, v1.PodResizePending); c == nil || c.Reason != v1.PodReasonDeferred {
		t.Fatalf("pending %+v, want Deferred", c)
	}
	active = []*v1.Pod{p}
	m.RemovePod(other.UID)
	if len(resynced) != 1 || resynced[0] != p.UID {
		t.Fatalf("resynced %v, want [%s]", resynced, p.UID)
	}
	if got := m.Resize(context.Background(), want); got != want || condition(m, p.UID, v1.PodResizePending) != nil {
		t.Errorf("after the other pod went: pod at its spec %v, pending %+v", got == want, condition(m, p.UID, v1.PodResizePending))
	}
}

// After a restart the checkpoint is the allocation: a pod whose spec was
// resized meanwhile is admitted at its old allocation and keeps what was
// actuated; its API status' resize conditions are taken back.
func TestManager_Admit(t *testing.T) {
	dir := t.TempDir()
	p := pod("p", "500m", "100Mi", v1.NotRequired)
	active := []*v1.Pod{}
	m := newManager(t, dir, node("2", "1Gi"), &active, &events{}, "")
	m.Admit(context.Background(), admission.Attributes{Pod: p, Node: node("2", "1Gi")})
	if err := m.SetActuated(p.UID, "c", p.Spec.Containers[0].Resources); err != nil {
		t.Fatal(err)
	}

	restarted := resized(p, "1", "100Mi")
	restarted.Status.Conditions = []v1.PodCondition{{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: v1.PodReasonDeferred, Message: "earlier"}}
	ch := &chain{}
	m2, err := New(Config{RootDir: dir, Admit: ch, Node: func() *v1.Node { return node("2", "1Gi") }, ActivePods: func() []*v1.Pod { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if r := m2.Admit(context.Background(), admission.Attributes{Pod: restarted, Node: node("2", "1Gi")}); !r.Admit {
		t.Fatalf("admit: %+v", r)
	}
	if got := ch.seen[0].Spec.Containers[0].Resources.Requests.Cpu().String(); got != "500m" {
		t.Errorf("admitted at %s cpu, want the checkpoint's 500m", got)
	}
	if a, ok := m2.Actuated(p.UID, "c"); !ok || a.Limits.Cpu().String() != "500m" {
		t.Errorf("actuated %+v %v, want the checkpoint's", a, ok)
	}
	if c := condition(m2, p.UID, v1.PodResizePending); c == nil || c.Message != "earlier" {
		t.Errorf("pending %+v, want the API status' condition", c)
	}
}

// The in-progress condition goes once every running container runs at its
// allocation; a failed actuation makes it say Error.
func TestManager_Done(t *testing.T) {
	p := pod("p", "500m", "100Mi", v1.NotRequired)
	active := []*v1.Pod{p}
	ev := &events{}
	m := newManager(t, t.TempDir(), node("2", "1Gi"), &active, ev, "")
	m.Admit(context.Background(), admission.Attributes{Pod: p, Node: node("2", "1Gi")})
	m.SetActuated(p.UID, "c", p.Spec.Containers[0].Resources)
	want := resized(p, "1", "100Mi")
	m.Resize(context.Background(), want)
	rs := &container.PodStatus{Containers: []*container.ContainerStatus{{Name: "c", State: container.StateRunning}}}

	m.Done(want, rs, nil) // not yet actuated
	if c := condition(m, p.UID, v1.PodResizeInProgress); c == nil || c.Reason != "" {
		t.Fatalf("in progress %+v, want it without a reason", c)
	}
	m.Done(want, rs, errString("no room"))
	if c := condition(m, p.UID, v1.PodResizeInProgress); c == nil || c.Reason != ReasonError || c.Message != "no room" {
		t.Fatalf("in progress %+v, want Error: no room", c)
	}
	m.SetActuated(p.UID, "c", want.Spec.Containers[0].Resources)
	m.Done(want, rs, nil)
	if c := condition(m, p.UID, v1.PodResizeInProgress); c != nil {
		t.Errorf("in progress %+v after actuation, want none", c)
	}
	var got []string
	for _, e := range ev.reasons {
		got = append(got, strings.Fields(e)[0])
	}
	if strings.Join(got, ",") != "ResizeStarted,ResizeError,ResizeCompleted" {
		t.Errorf("events %v", got)
	}
}

type errString string

func (e errString) Error() string { return string(e) }
