package eviction

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/wasmlet/wasmlet/host/internal/admission"
	"github.com/wasmlet/wasmlet/host/internal/config"
	"github.com/wasmlet/wasmlet/internal/metrictest"
)

// signals is a settable Signals.
type signals struct {
	mu  sync.Mutex
	obs Observations
}

func (s *signals) Observe(context.Context) (Observations, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Observations{Signals: map[Signal]Observation{}, DedicatedImageFs: s.obs.DedicatedImageFs}
	for k, v := range s.obs.Signals {
		out.Signals[k] = v
	}
	return out, nil
}

func (s *signals) set(sig Signal, available, capacity int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.obs.Signals == nil {
		s.obs.Signals = map[Signal]Observation{}
	}
	s.obs.Signals[sig] = Observation{Available: available, Capacity: capacity}
}

func mustParse(t *testing.T, c ThresholdConfig) []Threshold {
	t.Helper()
	ts, err := ParseThresholds(c)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestParseThresholds(t *testing.T) {
	for _, c := range []struct {
		name    string
		cfg     ThresholdConfig
		want    []string // signal<value grace minreclaim
		wantErr string
	}{
		{"hard and soft with grace and min reclaim", ThresholdConfig{
			Hard:            map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"},
			Soft:            map[string]string{"memory.available": "1Gi"},
			SoftGracePeriod: map[string]string{"memory.available": "1m30s"},
			MinimumReclaim:  map[string]string{"memory.available": "50Mi", "nodefs.available": "5%"},
		}, []string{"memory.available<100Mi 0s 50Mi", "nodefs.available<10% 0s 5%", "memory.available<1Gi 1m30s 50Mi"}, ""},
		{"0% is no threshold", ThresholdConfig{Hard: map[string]string{"pid.available": "0%"}}, nil, ""},
		{"soft without a grace period", ThresholdConfig{Soft: map[string]string{"memory.available": "1Gi"}}, nil,
			"evictionSoftGracePeriod: grace period must be specified for the soft eviction threshold memory.available"},
		{"unknown signal", ThresholdConfig{Hard: map[string]string{"memory.free": "1Gi"}}, nil, `evictionHard: unsupported eviction signal "memory.free"`},
		{"bad grace period", ThresholdConfig{Soft: map[string]string{"memory.available": "1Gi"}, SoftGracePeriod: map[string]string{"memory.available": "soon"}}, nil,
			`evictionSoftGracePeriod: memory.available="soon"`},
		{"negative minimum reclaim", ThresholdConfig{MinimumReclaim: map[string]string{"memory.available": "-1Mi"}}, nil,
			`evictionMinimumReclaim: memory.available="-1Mi": must not be negative`},
	} {
		got, err := ParseThresholds(c.cfg)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var s []string
		for _, th := range got {
			mr := "-"
			if th.MinReclaim != nil {
				mr = th.MinReclaim.String()
			}
			s = append(s, string(th.Signal)+"<"+th.Value.String()+" "+th.GracePeriod.String()+" "+mr)
		}
		if !slices.Equal(s, c.want) {
			t.Errorf("%s: got %q, want %q", c.name, s, c.want)
		}
	}
}

// pressureFixture is a manager over fakes with a settable clock.
type pressureFixture struct {
	f        *fakes
	sig      *signals
	now      time.Time
	m        *Manager
	reg      *prometheus.Registry
	node     []string
	reclaims []string
}

func newPressureFixture(t *testing.T, tc ThresholdConfig, transition time.Duration) *pressureFixture {
	t.Helper()
	x := &pressureFixture{
		f:   &fakes{pods: map[types.UID]*v1.Pod{}, statuses: map[types.UID]v1.PodStatus{}, terminating: map[types.UID]bool{}},
		sig: &signals{}, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), reg: prometheus.NewRegistry(),
	}
	m, err := New(Config{
		Stats: x.f, Pods: x.f, Statuses: x.f, Workers: x.f, Events: x.f, Registerer: x.reg,
		NodeEvent:  func(typ, reason, msg string) { x.node = append(x.node, typ+" "+reason+": "+msg) },
		Thresholds: mustParse(t, tc), Signals: x.sig, PressureTransitionPeriod: transition, MaxPodGracePeriod: 30,
		Reclaim: Reclaim{
			Containers: func(context.Context) error { x.reclaims = append(x.reclaims, "containers"); return nil },
			Images:     func(context.Context) (int64, error) { x.reclaims = append(x.reclaims, "images"); return 0, nil },
		},
		Now: func() time.Time { return x.now }, NodeName: "n1",
	})
	if err != nil {
		t.Fatal(err)
	}
	x.m = m
	return x
}

// memPod is a pod with one container "c" requesting (and limited to)
// memory when given, using ws bytes of working set.
func memPod(name string, request string, priority int32, ws uint64) (*v1.Pod, podStats) {
	p := apiPod(name)
	if request != "" {
		q := resource.MustParse(request)
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceMemory: q, v1.ResourceCPU: resource.MustParse("100m")},
			Limits:   v1.ResourceList{v1.ResourceMemory: q, v1.ResourceCPU: resource.MustParse("100m")},
		}
	}
	p.Spec.Priority = ptr.To(priority)
	return p, podStats{memory: &ws}
}

func TestManager_synchronize_memoryPressure(t *testing.T) {
	x := newPressureFixture(t, ThresholdConfig{Hard: map[string]string{"memory.available": "1Gi"}}, time.Minute)
	x.sig.set(SignalMemoryAvailable, 4<<30, 8<<30)
	guaranteed, gs := memPod("guaranteed", "2Gi", 0, 2<<30+512<<20) // 512Mi over its request
	besteffort, bs := memPod("besteffort", "", 0, 1<<30)
	small, ss := memPod("small", "", 0, 1<<20)
	high, hs := memPod("high", "", 1000, 2<<30)
	for _, p := range []struct {
		p *v1.Pod
		s podStats
	}{{guaranteed, gs}, {small, ss}, {high, hs}, {besteffort, bs}} {
		x.f.add(p.p, p.s, v1.PodRunning)
	}
	if got := x.m.synchronize(context.Background()); got != nil || len(x.m.Conditions()) != 0 {
		t.Fatalf("no pressure: evicted %v, conditions %v", got, x.m.Conditions())
	}
	// Below the threshold: MemoryPressure, and the pod over its request
	// with the lowest priority and the most memory above its request goes
	// first — besteffort (1Gi over nothing) before small and high (higher
	// priority) and guaranteed (1Gi over 2Gi, same priority, less above).
	x.sig.set(SignalMemoryAvailable, 512<<20, 8<<30)
	x.now = x.now.Add(10 * time.Second)
	got := x.m.synchronize(context.Background())
	if got == nil || got.Name != "besteffort" {
		t.Fatalf("evicted %v, want besteffort", got)
	}
	if c := x.m.Conditions(); !slices.Equal(c, []v1.NodeConditionType{v1.NodeMemoryPressure}) {
		t.Errorf("conditions %v, want MemoryPressure", c)
	}
	u := x.f.updates[len(x.f.updates)-1]
	wantMsg := "The node was low on resource: memory. Threshold quantity: 1Gi, available: 512Mi. Container c was using 1Gi, request is 0, has larger consumption of memory. "
	if u.Failure == nil || u.Failure.Message != wantMsg || *u.GracePeriodOverride != hardGracePeriod ||
		u.Failure.Condition == nil || u.Failure.Condition.Type != v1.DisruptionTarget || u.Failure.Condition.Reason != v1.PodReasonTerminationByKubelet {
		t.Errorf("update %+v failure %+v, want grace 1, message %q and a DisruptionTarget condition", u, u.Failure, wantMsg)
	}
	if !slices.Equal(x.node, []string{"Normal NodeHasInsufficientMemory: Node n1 status is now: NodeHasInsufficientMemory", "Warning EvictionThresholdMet: Attempting to reclaim memory"}) {
		t.Errorf("node events %q", x.node)
	}
	if len(x.reclaims) != 0 {
		t.Errorf("memory pressure reclaimed %v, want nothing", x.reclaims)
	}
	if got := metrictest.Counters(t, x.reg, "wasmlet_evictions_total"); got["memory.available"] != 1 {
		t.Errorf("wasmlet_evictions_total %v, want memory.available 1", got)
	}
	// Admission under memory pressure: BestEffort refused unless it
	// tolerates the taint; Burstable and critical admitted.
	be := apiPod("new-be")
	tolerant := apiPod("tolerant")
	tolerant.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	burstable, _ := memPod("burstable", "1Mi", 0, 0)
	static := apiPod("static")
	static.Annotations[config.AnnotationSource] = "file"
	for _, c := range []struct {
		pod   *v1.Pod
		admit bool
	}{{be, false}, {tolerant, true}, {burstable, true}, {static, true}} {
		r, err := x.m.Admit(context.Background(), admission.Attributes{Pod: c.pod})
		if err != nil || r.Admit != c.admit {
			t.Errorf("Admit(%s) = %+v %v, want admit %v", c.pod.Name, r, err, c.admit)
		}
		if !r.Admit && (r.Reason != "Evicted" || r.Message != "The node had condition: [MemoryPressure]. ") {
			t.Errorf("Admit(%s) refusal %q %q, want the kubelet's", c.pod.Name, r.Reason, r.Message)
		}
	}
	// The threshold no longer met: the condition stays for the transition
	// period after it was last met, then clears.
	x.f.terminating[besteffort.UID] = true
	x.sig.set(SignalMemoryAvailable, 4<<30, 8<<30)
	x.now = x.now.Add(59 * time.Second)
	if got := x.m.synchronize(context.Background()); got != nil {
		t.Errorf("evicted %s above the threshold", got.Name)
	}
	if c := x.m.Conditions(); len(c) != 1 {
		t.Errorf("conditions %v within the transition period, want MemoryPressure", c)
	}
	x.now = x.now.Add(time.Second)
	x.m.synchronize(context.Background())
	if c := x.m.Conditions(); len(c) != 0 {
		t.Errorf("conditions %v after the transition period, want none", c)
	}
	if last := x.node[len(x.node)-1]; last != "Normal NodeHasSufficientMemory: Node n1 status is now: NodeHasSufficientMemory" {
		t.Errorf("last node event %q, want NodeHasSufficientMemory", last)
	}
}

func TestManager_synchronize_softGracePeriodAndMinReclaim(t *testing.T) {
	x := newPressureFixture(t, ThresholdConfig{
		Soft: map[string]string{"memory.available": "1Gi"}, SoftGracePeriod: map[string]string{"memory.available": "30s"},
		MinimumReclaim: map[string]string{"memory.available": "500Mi"},
	}, 0)
	p, s := memPod("p", "", 0, 1<<30)
	p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(60))
	x.f.add(p, s, v1.PodRunning)
	x.sig.set(SignalMemoryAvailable, 512<<20, 8<<30)
	if got := x.m.synchronize(context.Background()); got != nil {
		t.Fatalf("evicted %s before the grace period", got.Name)
	}
	x.now = x.now.Add(30 * time.Second)
	got := x.m.synchronize(context.Background())
	if got == nil || *x.f.updates[0].GracePeriodOverride != 30 {
		t.Fatalf("after the grace period: evicted %v (updates %+v), want p with the max pod grace period 30", got, x.f.updates)
	}
	// Back above the threshold but not by the minimum reclaim: still met,
	// the next pod goes.
	x.f.terminating[p.UID] = true
	q, qs := memPod("q", "", 0, 1<<20)
	x.f.add(q, qs, v1.PodRunning)
	x.sig.set(SignalMemoryAvailable, 1<<30+100<<20, 8<<30)
	x.now = x.now.Add(10 * time.Second)
	if got := x.m.synchronize(context.Background()); got == nil || got.Name != "q" {
		t.Errorf("within the minimum reclaim evicted %v, want q", got)
	}
	x.f.terminating[q.UID] = true
	r, rs := memPod("r", "", 0, 1<<20)
	x.f.add(r, rs, v1.PodRunning)
	x.sig.set(SignalMemoryAvailable, 2<<30, 8<<30)
	x.now = x.now.Add(10 * time.Second)
	if got := x.m.synchronize(context.Background()); got != nil {
		t.Errorf("past the minimum reclaim evicted %s", got.Name)
	}
}

func TestManager_synchronize_diskPressure(t *testing.T) {
	for _, c := range []struct {
		name         string
		signal       Signal
		dedicated    bool
		freedByImage bool
		wantReclaim  []string
		wantEvicted  string
	}{
		{"nodefs sharing the images' disk: reclaim relieves", SignalNodeFsAvailable, false, true, []string{"containers", "images"}, ""},
		{"nodefs sharing the images' disk: reclaim not enough", SignalNodeFsAvailable, false, false, []string{"containers", "images"}, "writer"},
		{"nodefs with a dedicated imagefs: no reclaim", SignalNodeFsAvailable, true, true, nil, "writer"},
		{"imagefs: reclaim relieves", SignalImageFsAvailable, true, true, []string{"containers", "images"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := newPressureFixture(t, ThresholdConfig{Hard: map[string]string{string(c.signal): "10%"}}, time.Minute)
			x.sig.obs.DedicatedImageFs = c.dedicated
			x.sig.set(c.signal, 5<<20, 100<<20)
			x.f.add(apiPod("quiet"), podStats{containers: map[string][2]uint64{"c": {1 << 10, 0}}}, v1.PodRunning)
			writer := apiPod("writer", emptyDir("scratch", ""))
			x.f.add(writer, podStats{volumes: map[string]uint64{"scratch": 50 << 20}, containers: map[string][2]uint64{"c": {1 << 10, 1 << 10}}}, v1.PodRunning)
			// Reclaiming frees the disk when the images held it.
			x.m.cfg.Reclaim.Images = func(context.Context) (int64, error) {
				x.reclaims = append(x.reclaims, "images")
				if c.freedByImage {
					x.sig.set(c.signal, 50<<20, 100<<20)
				}
				return 0, nil
			}
			got := x.m.synchronize(context.Background())
			if !slices.Equal(x.reclaims, c.wantReclaim) {
				t.Errorf("reclaimed %v, want %v", x.reclaims, c.wantReclaim)
			}
			name := ""
			if got != nil {
				name = got.Name
			}
			if name != c.wantEvicted {
				t.Fatalf("evicted %q, want %q", name, c.wantEvicted)
			}
			if !slices.Equal(x.m.Conditions(), []v1.NodeConditionType{v1.NodeDiskPressure}) {
				t.Errorf("conditions %v, want DiskPressure", x.m.Conditions())
			}
			if got != nil {
				want := "The node was low on resource: ephemeral-storage. Threshold quantity: 10Mi, available: 5Mi. " +
					"Container c was using 2Ki, request is 0, has larger consumption of ephemeral-storage. "
				if m := x.f.updates[0].Failure.Message; m != want {
					t.Errorf("message %q, want %q", m, want)
				}
			}
			// Under disk pressure every non-critical pod is refused.
			r, _ := x.m.Admit(context.Background(), admission.Attributes{Pod: apiPod("new")})
			if r.Admit || r.Message != "The node had condition: [DiskPressure]. " {
				t.Errorf("Admit under disk pressure = %+v, want refused", r)
			}
		})
	}
}

func TestManager_synchronize_criticalNeverEvicted(t *testing.T) {
	x := newPressureFixture(t, ThresholdConfig{Hard: map[string]string{"pid.available": "100"}}, time.Minute)
	x.sig.set(SignalPIDAvailable, 10, 1000)
	static, s := memPod("static", "", 0, 1<<30)
	static.Annotations[config.AnnotationSource] = "file"
	critical, cs := memPod("critical", "", systemCriticalPriority, 1<<30)
	x.f.add(static, s, v1.PodRunning)
	x.f.add(critical, cs, v1.PodRunning)
	if got := x.m.synchronize(context.Background()); got != nil {
		t.Errorf("evicted %s, a critical pod", got.Name)
	}
	if !slices.Equal(x.m.Conditions(), []v1.NodeConditionType{v1.NodePIDPressure}) {
		t.Errorf("conditions %v, want PIDPressure", x.m.Conditions())
	}
	ordinary, os := memPod("ordinary", "", 0, 0)
	x.f.add(ordinary, os, v1.PodRunning)
	if got := x.m.synchronize(context.Background()); got == nil || got.Name != "ordinary" {
		t.Errorf("evicted %v, want ordinary", got)
	}
}

func TestRankMemory(t *testing.T) {
	a, as := memPod("over-low-prio", "100Mi", 0, 200<<20)
	b, bs := memPod("over-high-prio", "100Mi", 10, 900<<20)
	c, cs := memPod("under", "1Gi", 0, 500<<20)
	d, _ := memPod("no-stats", "1Gi", 100, 0)
	e, es := memPod("over-low-prio-more", "100Mi", 0, 300<<20)
	stats := map[types.UID]statsapi.PodStats{a.UID: as.of(a), b.UID: bs.of(b), c.UID: cs.of(c), e.UID: es.of(e)}
	pods := []*v1.Pod{c, b, a, e, d}
	rankMemory(pods, func(p *v1.Pod) (*statsapi.PodStats, bool) { s, ok := stats[p.UID]; return &s, ok })
	var got []string
	for _, p := range pods {
		got = append(got, p.Name)
	}
	want := []string{"no-stats", "over-low-prio-more", "over-low-prio", "over-high-prio", "under"}
	if !slices.Equal(got, want) {
		t.Errorf("rank %v, want %v", got, want)
	}
}

// notifier is a MemoryNotifier whose crossings the test fires.
type notifier struct {
	set     chan uint64
	crossed chan func()
}

func (n *notifier) Set(b uint64) error {
	select {
	case n.set <- b:
	default:
	}
	return nil
}

func (n *notifier) Run(ctx context.Context, crossed func()) {
	select {
	case n.crossed <- crossed:
	case <-ctx.Done():
	}
	<-ctx.Done()
}

// TestManager_Run_memoryNotifier: the notifier is armed at the usage
// where memory.available meets the threshold (capacity less threshold
// plus the inactive page cache), and a crossing starts a pass at once,
// not at the next period.
func TestManager_Run_memoryNotifier(t *testing.T) {
	x := newPressureFixture(t, ThresholdConfig{Hard: map[string]string{"memory.available": "1Gi"}}, time.Minute)
	n := &notifier{set: make(chan uint64, 1), crossed: make(chan func(), 1)}
	x.m.cfg.Notifier = n
	x.m.cfg.MemoryUsage = func() (uint64, uint64, uint64, error) { return 8 << 30, 5 << 30, 4 << 30, nil }
	x.m.cfg.Period = time.Hour
	x.sig.set(SignalMemoryAvailable, 4<<30, 8<<30)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); x.m.Run(ctx) }()
	if got := <-n.set; got != 8<<30-1<<30+1<<30 {
		t.Errorf("armed at %d, want capacity - threshold + inactive = %d", got, uint64(8<<30-1<<30+1<<30))
	}
	crossed := <-n.crossed
	x.sig.set(SignalMemoryAvailable, 512<<20, 8<<30) // not read until a pass
	crossed()
	deadline := time.Now().Add(10 * time.Second)
	for len(x.m.Conditions()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no pass within 10 s of the crossing (the period is an hour)")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
}
