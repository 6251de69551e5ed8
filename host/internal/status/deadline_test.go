package status

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestPastActiveDeadline(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := &v1.Pod{Spec: v1.PodSpec{ActiveDeadlineSeconds: ptr.To(int64(5))}}
	running := &v1.PodStatus{Phase: v1.PodRunning, StartTime: &metav1.Time{Time: start}}
	for _, c := range []struct {
		name string
		pod  *v1.Pod
		st   *v1.PodStatus
		at   time.Duration
		want bool
	}{
		{"before", pod, running, 4 * time.Second, false},
		{"at the deadline", pod, running, 5 * time.Second, true},
		{"past it", pod, running, time.Hour, true},
		{"pending pod past it", pod, &v1.PodStatus{Phase: v1.PodPending, StartTime: &metav1.Time{Time: start}}, 6 * time.Second, true},
		{"no deadline", &v1.Pod{}, running, time.Hour, false},
		{"not started", pod, &v1.PodStatus{Phase: v1.PodPending}, time.Hour, false},
		{"already failed", pod, &v1.PodStatus{Phase: v1.PodFailed, StartTime: &metav1.Time{Time: start}}, time.Hour, false},
		{"succeeded", pod, &v1.PodStatus{Phase: v1.PodSucceeded, StartTime: &metav1.Time{Time: start}}, time.Hour, false},
	} {
		if got := PastActiveDeadline(c.pod, c.st, start.Add(c.at)); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
