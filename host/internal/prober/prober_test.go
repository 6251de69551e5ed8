package prober

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

type fakeRuntime struct {
	mu        sync.Mutex
	exit      int
	execs     int
	killed    []string
	deadlines []time.Duration // left on the ctx of each ExecSync that had one
}

func (f *fakeRuntime) ExecSync(ctx context.Context, id string, cmd []string, _ time.Duration) ([]byte, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execs++
	if d, ok := ctx.Deadline(); ok {
		f.deadlines = append(f.deadlines, time.Until(d))
	}
	return []byte("out of " + cmd[0]), f.exit, nil
}

func (f *fakeRuntime) KillContainer(_ context.Context, _ *v1.Pod, c, id, msg string, _ *int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.killed = append(f.killed, id+": "+msg)
	return nil
}

func (f *fakeRuntime) set(exit int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.exit = exit
}

func (f *fakeRuntime) kills() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.killed...)
}

type fakeStatuses struct{ st v1.PodStatus }

func (f *fakeStatuses) PodStatus(types.UID) (v1.PodStatus, bool) { return f.st, true }

func running(podIP string, started time.Time) v1.PodStatus {
	return v1.PodStatus{Phase: v1.PodRunning, PodIP: podIP, ContainerStatuses: []v1.ContainerStatus{{
		Name: "c", ContainerID: "containerd://abc",
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}},
	}}}
}

func probePod(c v1.Container) *v1.Pod {
	c.Name = "c"
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}, Spec: v1.PodSpec{Containers: []v1.Container{c}}}
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30 s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func newManager(t *testing.T, rt *fakeRuntime, st *fakeStatuses) (*Manager, chan types.UID) {
	changed := make(chan types.UID, 100)
	m, err := New(Config{Runtime: rt, Statuses: st, Changed: func(u types.UID) { changed <- u }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return m, changed
}

func TestReadiness_Exec(t *testing.T) {
	rt := &fakeRuntime{exit: 1}
	st := &fakeStatuses{st: running("10.0.0.1", time.Now())}
	m, changed := newManager(t, rt, st)
	pod := probePod(v1.Container{ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check"}}}, PeriodSeconds: 1, FailureThreshold: 1}})
	c := &pod.Spec.Containers[0]
	m.UpdatePod(pod)
	eventually(t, "an exec probe ran", func() bool { rt.mu.Lock(); defer rt.mu.Unlock(); return rt.execs > 0 })
	if m.Ready(c, "containerd://abc") {
		t.Fatal("ready while the probe fails")
	}
	rt.set(0)
	eventually(t, "ready after the probe passes", func() bool { return m.Ready(c, "containerd://abc") })
	select {
	case u := <-changed:
		if u != "u1" {
			t.Errorf("changed %s", u)
		}
	default:
		t.Error("readiness changed and nobody was told")
	}
	if !m.Started(c, "containerd://abc") {
		t.Error("no startup probe, yet not started")
	}
	m.RemovePod("u1")
	eventually(t, "result forgotten after RemovePod", func() bool { return !m.Ready(c, "containerd://abc") })
}

// The exec probe leaves the call's deadline to the runtime client (its
// request timeout plus the probe's, as the kubelet's): a deadline of the
// prober's own failed probes whose command a busy runtime started late.
func TestExecProbe_NoDeadlineOfItsOwn(t *testing.T) {
	rt := &fakeRuntime{}
	st := &fakeStatuses{st: running("10.0.0.1", time.Now())}
	m, _ := newManager(t, rt, st)
	pod := probePod(v1.Container{LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check"}}}, PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 1}})
	m.UpdatePod(pod)
	eventually(t, "an exec probe ran", func() bool { rt.mu.Lock(); defer rt.mu.Unlock(); return rt.execs > 0 })
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.deadlines) != 0 {
		t.Errorf("ExecSync called with deadlines %v left; want none of the prober's own", rt.deadlines)
	}
}

func TestLiveness_KillsAfterThreshold(t *testing.T) {
	rt := &fakeRuntime{exit: 1}
	st := &fakeStatuses{st: running("10.0.0.1", time.Now())}
	m, _ := newManager(t, rt, st)
	pod := probePod(v1.Container{LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"alive"}}}, PeriodSeconds: 1, FailureThreshold: 2}})
	m.UpdatePod(pod)
	eventually(t, "the container killed", func() bool { return len(rt.kills()) > 0 })
	rt.mu.Lock()
	execs := rt.execs
	rt.mu.Unlock()
	if execs < 2 {
		t.Errorf("killed after %d failures, want the threshold of 2", execs)
	}
	if k := rt.kills()[0]; k != "abc: Container c failed liveness probe, will be restarted" {
		t.Errorf("kill %q", k)
	}
}

func TestStartupGatesReadiness_HTTPAndTCP(t *testing.T) {
	var mu sync.Mutex
	code := http.StatusServiceUnavailable
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("User-Agent") != userAgent || r.Header.Get("X-Probe") != "yes" || r.URL.Path != "/healthz" {
			w.WriteHeader(http.StatusTeapot)
			return
		}
		w.WriteHeader(code)
	}))
	defer srv.Close()
	host, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(portStr)
	rt := &fakeRuntime{}
	st := &fakeStatuses{st: running(host, time.Now())}
	m, _ := newManager(t, rt, st)
	pod := probePod(v1.Container{
		Ports:          []v1.ContainerPort{{Name: "web", ContainerPort: int32(p)}},
		StartupProbe:   &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("web"), HTTPHeaders: []v1.HTTPHeader{{Name: "X-Probe", Value: "yes"}}}}, PeriodSeconds: 1, FailureThreshold: 1000},
		ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(int32(p))}}, PeriodSeconds: 1},
	})
	c := &pod.Spec.Containers[0]
	m.UpdatePod(pod)
	time.Sleep(1500 * time.Millisecond) // a few probe periods with the startup probe failing
	if m.Started(c, "containerd://abc") || m.Ready(c, "containerd://abc") {
		t.Fatal("started or ready while the startup probe fails")
	}
	mu.Lock()
	code = http.StatusOK
	mu.Unlock()
	eventually(t, "started, then ready through the TCP probe", func() bool { return m.Ready(c, "containerd://abc") })
	if len(rt.kills()) != 0 {
		t.Errorf("killed: %v", rt.kills())
	}
}

func TestStartupSuccessProbesReadinessAtOnce(t *testing.T) {
	rt := &fakeRuntime{exit: 1}
	st := &fakeStatuses{st: running("10.0.0.1", time.Now())}
	m, _ := newManager(t, rt, st)
	pod := probePod(v1.Container{
		StartupProbe:   &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"started"}}}, PeriodSeconds: 1, FailureThreshold: 1000},
		ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"ready"}}}, PeriodSeconds: 3600},
	})
	c := &pod.Spec.Containers[0]
	m.UpdatePod(pod)
	eventually(t, "the startup probe ran", func() bool { rt.mu.Lock(); defer rt.mu.Unlock(); return rt.execs > 0 })
	rt.set(0)
	// The readiness period is an hour: only the startup success can have
	// made it probe.
	eventually(t, "ready right after the startup probe passed", func() bool { return m.Ready(c, "containerd://abc") })
}
