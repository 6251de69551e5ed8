package main

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestObserver_Starts_reported(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := func(name string, phase v1.PodPhase, started ...time.Duration) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0)}, Status: v1.PodStatus{Phase: phase}}
		for _, d := range started {
			cs := v1.ContainerStatus{}
			if d >= 0 {
				cs.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(t0.Add(d))}
			}
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, cs)
		}
		return p
	}
	o := &Observer{running: map[string]podStart{}, pods: map[string]bool{}}
	o.pod(pod("pending", v1.PodPending))
	o.pod(pod("one", v1.PodRunning, 2*time.Second))
	o.pod(pod("two", v1.PodRunning, time.Second, 3*time.Second))
	// Running with a container not running (a sidecar that restarts):
	// no reported start.
	o.pod(pod("half", v1.PodRunning, time.Second, -1))
	// Seen Running again later: the first sighting counts.
	o.pod(pod("one", v1.PodRunning, 9*time.Second))

	slo, _, reported := o.Starts(nil)
	if len(slo) != 3 {
		t.Errorf("%d starts seen, want 3 (pending is not Running)", len(slo))
	}
	got := map[time.Duration]int{}
	for _, d := range reported {
		got[d]++
	}
	if len(reported) != 2 || got[2*time.Second] != 1 || got[3*time.Second] != 1 {
		t.Errorf("reported = %v, want 2s (one) and 3s (two: its last container)", reported)
	}
}
