package eviction

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/wasmlet/wasmlet/host/internal/config"
	"github.com/wasmlet/wasmlet/host/internal/worker"
	"github.com/wasmlet/wasmlet/internal/metrictest"
	"github.com/wasmlet/wasmlet/internal/syncbuf"
)

const mi = 1 << 20

// apiPod is a pod from the API server with one container "c" and the
// given volumes.
func apiPod(name string, vols ...v1.Volume) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid"),
			Annotations: map[string]string{config.AnnotationSource: config.APIServerSource}},
		Spec: v1.PodSpec{Volumes: vols, Containers: []v1.Container{{Name: "c"}}},
	}
}

func emptyDir(name, limit string) v1.Volume {
	v := v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}
	if limit != "" {
		q := resource.MustParse(limit)
		v.EmptyDir.SizeLimit = &q
	}
	return v
}

func withLimit(p *v1.Pod, container, limit string) *v1.Pod {
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == container {
			p.Spec.Containers[i].Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(limit)}
			return p
		}
	}
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: container,
		Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(limit)}}})
	return p
}

func fs(bytes uint64) *statsapi.FsStats { return &statsapi.FsStats{UsedBytes: ptr.To(bytes)} }

// podStats is a pod's stats: volumes by name, containers' rootfs and
// logs, the pod's ephemeral storage.
type podStats struct {
	volumes    map[string]uint64
	containers map[string][2]uint64 // rootfs, logs
	ephemeral  *uint64
	memory     *uint64 // the pod's and its container c's working set
}

func (s podStats) of(p *v1.Pod) statsapi.PodStats {
	ps := statsapi.PodStats{PodRef: statsapi.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)}}
	for n, u := range s.volumes {
		ps.VolumeStats = append(ps.VolumeStats, statsapi.VolumeStats{Name: n, FsStats: *fs(u)})
	}
	for n, u := range s.containers {
		ps.Containers = append(ps.Containers, statsapi.ContainerStats{Name: n, Rootfs: fs(u[0]), Logs: fs(u[1])})
	}
	if s.ephemeral != nil {
		ps.EphemeralStorage = fs(*s.ephemeral)
	}
	if s.memory != nil {
		ps.Memory = &statsapi.MemoryStats{WorkingSetBytes: s.memory}
		ps.Containers = append(ps.Containers, statsapi.ContainerStats{Name: "c", Memory: &statsapi.MemoryStats{WorkingSetBytes: s.memory}})
	}
	return ps
}

func TestDecide(t *testing.T) {
	for _, c := range []struct {
		name    string
		pod     *v1.Pod
		stats   podStats
		signal  Signal
		message string
	}{
		{"emptyDir over its sizeLimit", apiPod("p", emptyDir("scratch", "1Mi")),
			podStats{volumes: map[string]uint64{"scratch": 4 * mi}},
			SignalEmptyDirFsLimit, `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `},
		{"emptyDir at its sizeLimit", apiPod("p", emptyDir("scratch", "1Mi")),
			podStats{volumes: map[string]uint64{"scratch": mi}}, "", ""},
		{"emptyDir without a sizeLimit", apiPod("p", emptyDir("scratch", "")),
			podStats{volumes: map[string]uint64{"scratch": 100 * mi}}, "", ""},
		{"emptyDir not measured yet", apiPod("p", emptyDir("scratch", "1Mi")), podStats{}, "", ""},
		{"pod over its containers' summed limits", withLimit(withLimit(apiPod("p"), "c", "1Mi"), "d", "1Mi"),
			podStats{ephemeral: ptr.To(uint64(3 * mi)), containers: map[string][2]uint64{"c": {mi / 2, 0}, "d": {mi / 2, 0}}},
			SignalEphemeralPodFsLimit, "Pod ephemeral local storage usage exceeds the total limit of containers 2Mi. "},
		{"pod within its containers' summed limits", withLimit(withLimit(apiPod("p"), "c", "1Mi"), "d", "1Mi"),
			podStats{ephemeral: ptr.To(uint64(2 * mi)), containers: map[string][2]uint64{"c": {mi, 0}, "d": {mi, 0}}}, "", ""},
		// The pod's total is within the sum, but c alone is over its own.
		{"container over its limit: rootfs and logs", withLimit(withLimit(apiPod("p"), "c", "1Mi"), "d", "8Mi"),
			podStats{ephemeral: ptr.To(uint64(2 * mi)), containers: map[string][2]uint64{"c": {mi, mi / 2}, "d": {0, 0}}},
			SignalEphemeralContainerFsLimit, `Container c exceeded its local ephemeral storage limit "1Mi". `},
		{"container's logs alone over its limit", withLimit(withLimit(apiPod("p"), "c", "1Mi"), "d", "8Mi"),
			podStats{containers: map[string][2]uint64{"c": {0, 2 * mi}}},
			SignalEphemeralContainerFsLimit, `Container c exceeded its local ephemeral storage limit "1Mi". `},
		{"no limits at all", apiPod("p", emptyDir("scratch", "")),
			podStats{volumes: map[string]uint64{"scratch": 100 * mi}, ephemeral: ptr.To(uint64(200 * mi)), containers: map[string][2]uint64{"c": {100 * mi, 0}}}, "", ""},
		// Every limit broken: the kubelet's order names the emptyDir.
		{"emptyDir first", withLimit(apiPod("p", emptyDir("scratch", "1Mi")), "c", "1Mi"),
			podStats{volumes: map[string]uint64{"scratch": 4 * mi}, ephemeral: ptr.To(uint64(9 * mi)), containers: map[string][2]uint64{"c": {5 * mi, 0}}},
			SignalEmptyDirFsLimit, `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `},
	} {
		ps := c.stats.of(c.pod)
		e, over := Decide(c.pod, &ps)
		if over != (c.signal != "") || e.Signal != c.signal || e.Message != c.message {
			t.Errorf("%s: Decide = %v %+v, want signal %q message %q", c.name, over, e, c.signal, c.message)
		}
	}
}

type fakes struct {
	stats       []statsapi.PodStats
	pods        map[types.UID]*v1.Pod
	statuses    map[types.UID]v1.PodStatus
	terminating map[types.UID]bool

	mu      sync.Mutex
	updates []worker.Update
	events  []string
}

func (f *fakes) PodStorage(context.Context) ([]statsapi.PodStats, error) { return f.stats, nil }
func (f *fakes) PodByUID(uid types.UID) (*v1.Pod, bool)                  { p, ok := f.pods[uid]; return p, ok }
func (f *fakes) Pods() []*v1.Pod {
	var out []*v1.Pod
	for i := range f.stats {
		if p, ok := f.pods[types.UID(f.stats[i].PodRef.UID)]; ok {
			out = append(out, p)
		}
	}
	return out
}
func (f *fakes) PodStatus(uid types.UID) (v1.PodStatus, bool) {
	s, ok := f.statuses[uid]
	return s, ok
}
func (f *fakes) IsTerminating(uid types.UID) bool { return f.terminating[uid] }
func (f *fakes) Update(u worker.Update) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updates = append(f.updates, u)
}
func (f *fakes) Event(p *v1.Pod, eventType, reason, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, p.Name+" "+eventType+" "+reason+": "+message)
}

func (f *fakes) add(p *v1.Pod, s podStats, phase v1.PodPhase) {
	f.pods[p.UID] = p
	f.stats = append(f.stats, s.of(p))
	if phase != "" {
		f.statuses[p.UID] = v1.PodStatus{Phase: phase}
	}
}

func TestManager_localStorage(t *testing.T) {
	f := &fakes{pods: map[types.UID]*v1.Pod{}, statuses: map[types.UID]v1.PodStatus{}, terminating: map[types.UID]bool{}}
	over := podStats{volumes: map[string]uint64{"scratch": 4 * mi}}
	f.add(apiPod("hog", emptyDir("scratch", "1Mi")), over, v1.PodRunning)
	f.add(withLimit(apiPod("writer"), "c", "1Mi"), podStats{containers: map[string][2]uint64{"c": {4 * mi, 0}}}, v1.PodRunning)
	f.add(apiPod("quiet", emptyDir("scratch", "1Mi")), podStats{volumes: map[string]uint64{"scratch": 4096}}, v1.PodRunning)
	static := apiPod("static", emptyDir("scratch", "1Mi"))
	static.Annotations[config.AnnotationSource] = "file"
	f.add(static, over, v1.PodRunning)
	critical := apiPod("critical", emptyDir("scratch", "1Mi"))
	critical.Spec.Priority = ptr.To(int32(systemCriticalPriority))
	f.add(critical, over, v1.PodRunning)
	f.add(apiPod("done", emptyDir("scratch", "1Mi")), over, v1.PodFailed)
	dying := apiPod("dying", emptyDir("scratch", "1Mi"))
	f.terminating[dying.UID] = true
	f.add(dying, over, v1.PodRunning)
	gone := apiPod("gone", emptyDir("scratch", "1Mi"))
	f.add(gone, over, v1.PodRunning)
	delete(f.pods, gone.UID)

	var logs syncbuf.Buffer
	reg := prometheus.NewRegistry()
	m, err := New(Config{Stats: f, Pods: f, Statuses: f, Workers: f, Events: f, Registerer: reg,
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs})})
	if err != nil {
		t.Fatal(err)
	}
	evicted := m.localStorage(f.stats)
	if len(evicted) != 2 || evicted[0] != "hog-uid" || evicted[1] != "writer-uid" {
		t.Errorf("evicted %v, want hog and writer", evicted)
	}
	wantMsg := map[string]string{
		"hog":    `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `,
		"writer": `Container c exceeded its local ephemeral storage limit "1Mi". `,
	}
	if len(f.updates) != 2 {
		t.Fatalf("worker updates %+v, want 2", f.updates)
	}
	for _, u := range f.updates {
		if u.Kind != worker.Terminate || u.GracePeriodOverride == nil || *u.GracePeriodOverride != 1 ||
			u.Failure == nil || u.Failure.Reason != "Evicted" || u.Failure.Message != wantMsg[u.Pod.Name] {
			t.Errorf("update of %s: kind %v grace %v failure %+v, want Terminate, grace 1, Evicted %q",
				u.Pod.Name, u.Kind, u.GracePeriodOverride, u.Failure, wantMsg[u.Pod.Name])
		}
	}
	wantEvents := []string{"hog Warning Evicted: " + wantMsg["hog"], "writer Warning Evicted: " + wantMsg["writer"]}
	if strings.Join(f.events, "|") != strings.Join(wantEvents, "|") {
		t.Errorf("events %q, want %q", f.events, wantEvents)
	}
	got := metrictest.Counters(t, reg, "wasmlet_evictions_total")
	if len(got) != 2 || got[string(SignalEmptyDirFsLimit)] != 1 || got[string(SignalEphemeralContainerFsLimit)] != 1 {
		t.Errorf("wasmlet_evictions_total by signal %v, want emptydirfs.limit 1, ephemeralcontainerfs.limit 1", got)
	}
	// The critical pods are refused, each logged once however many periods
	// pass; the evicted ones, being killed now, are not evicted again.
	f.terminating["hog-uid"], f.terminating["writer-uid"] = true, true
	if again := m.localStorage(f.stats); len(again) != 0 || len(f.updates) != 2 {
		t.Errorf("second period evicted %v (updates %d), want none", again, len(f.updates))
	}
	for _, name := range []string{"static", "critical"} {
		if n := strings.Count(logs.String(), "cannot evict a critical pod (static, mirror or system-critical priority): pod=ns/"+name+" "); n != 1 {
			t.Errorf("refusal of %s logged %d times, want once:\n%s", name, n, logs.String())
		}
	}
}
