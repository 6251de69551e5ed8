package runtime

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	cri "k8s.io/cri-api/pkg/apis"

	"github.com/wasmlet/wasmlet/host/internal/container"
)

// TestTermination_SidecarsLastInReverse: every container's turn is waited
// for at once; regular containers stop first, then the sidecars, the last
// declared first; a plain init container and a container that is not
// running hold nothing up.
func TestTermination_SidecarsLastInReverse(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{
			{Name: "s1", RestartPolicy: &always}, {Name: "init"}, {Name: "s2", RestartPolicy: &always},
			{Name: "gone", RestartPolicy: &always}, {Name: "s3", RestartPolicy: &always},
		},
		Containers: []v1.Container{{Name: "a"}, {Name: "b"}, {Name: "exited"}},
	}}
	var live []*container.ContainerStatus
	for _, n := range []string{"s3", "s1", "a", "s2", "b"} { // any order
		live = append(live, &container.ContainerStatus{Name: n})
	}
	order := newTermination(pod, live)
	var (
		mu      sync.Mutex
		stopped []string
		wg      sync.WaitGroup
	)
	for _, cs := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			order.waitTurn(context.Background(), cs.Name, time.Hour)
			mu.Lock()
			stopped = append(stopped, cs.Name)
			mu.Unlock()
			order.stopped(cs.Name)
		}()
	}
	wg.Wait()
	got := strings.Join(stopped, ",")
	if got != "a,b,s3,s2,s1" && got != "b,a,s3,s2,s1" {
		t.Errorf("stop order = %s, want a and b, then s3, s2, s1", got)
	}
}

// TestTermination_GraceBoundsTheWait: a sidecar whose turn does not come
// within its grace period is stopped anyway; a cancelled context ends the
// wait too.
func TestTermination_GraceBoundsTheWait(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "s", RestartPolicy: &always}},
		Containers:     []v1.Container{{Name: "a"}},
	}}
	order := newTermination(pod, []*container.ContainerStatus{{Name: "a"}, {Name: "s"}})
	done := make(chan struct{})
	go func() {
		order.waitTurn(context.Background(), "s", time.Millisecond) // "a" never stops
		close(done)
	}()
	<-done
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	order.waitTurn(ctx, "s", time.Hour)
}

// TestPreStop_execOutlivesGrace: an exec preStop handler runs without a
// timeout (as the kubelet runs it) and the kill goes on once the grace
// period is spent, with the 2 s minimum left for the stop; the handler
// ends with the container.
func TestPreStop_execOutlivesGrace(t *testing.T) {
	m, _ := newTestManager(t)
	rs := withStreaming(m)
	ctx := context.Background()
	grace := int64(1)
	pod := testPod("prestop", v1.RestartPolicyAlways, "main")
	pod.Spec.TerminationGracePeriodSeconds = &grace
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"loop"}}}}
	st, _ := syncOnce(t, m, pod, NewBackOff())
	id := st.FindContainer("main").ID

	stopped := make(chan struct{})
	var execTimeout atomic.Int64
	execTimeout.Store(-1)
	rs.execSync = func(_ string, _ []string, timeout time.Duration) ([]byte, []byte, error) {
		execTimeout.Store(int64(timeout))
		<-stopped // the handler loops until the container dies
		return nil, nil, nil
	}
	stop := &stopRecorder{RuntimeService: rs, stopped: stopped}
	m.rs = stop
	if err := m.KillContainer(ctx, pod, "main", id, "test", nil); err != nil {
		t.Fatal(err)
	}
	if got := execTimeout.Load(); got != 0 {
		t.Errorf("preStop ExecSync timeout = %v, want 0 (none)", time.Duration(got))
	}
	if stop.timeout != MinimumGracePeriod {
		t.Errorf("StopContainer timeout = %d, want the %d s minimum once the grace period went to the handler", stop.timeout, MinimumGracePeriod)
	}
}

// stopRecorder records StopContainer's timeout and closes stopped.
type stopRecorder struct {
	cri.RuntimeService
	stopped chan struct{}
	timeout int64
}

func (s *stopRecorder) StopContainer(ctx context.Context, id string, timeout int64) error {
	s.timeout = timeout
	close(s.stopped)
	return s.RuntimeService.StopContainer(ctx, id, timeout)
}

// TestKillContainer_marksProbeKill: a container stopped through
// KillContainer (the prober's kill) reads back as KilledByProbe, so the
// next sync restarts it even under OnFailure with exit code 0; its
// successor does not carry the mark.
func TestKillContainer_marksProbeKill(t *testing.T) {
	m, _ := newTestManager(t)
	ctx := context.Background()
	pod := testPod("probekill", v1.RestartPolicyOnFailure, "main")
	st, _ := syncOnce(t, m, pod, nil)
	id := st.FindContainer("main").ID
	if err := m.KillContainer(ctx, pod, "main", id, "liveness", nil); err != nil {
		t.Fatal(err)
	}
	st = m.mustStatus(t, pod)
	if s := st.FindContainer("main"); s == nil || s.ID != id || !s.KilledByProbe {
		t.Fatalf("after the probe's kill: %+v, want %s marked KilledByProbe", s, id)
	}
	if !container.ShouldRestart(&pod.Spec.Containers[0], pod, st) {
		t.Fatal("a container killed by its probe under OnFailure is not restarted")
	}
	st, _ = syncOnce(t, m, pod, nil)
	if s := st.FindContainer("main"); s == nil || s.ID == id || s.State != container.StateRunning || s.KilledByProbe {
		t.Errorf("after the next sync: %+v, want a new running instance without the mark", s)
	}
}
