package status

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// The status a pod past its spec.activeDeadlineSeconds gets, the
// kubelet's (pkg/kubelet/active_deadline.go).
const (
	// ReasonDeadlineExceeded is the pod's status reason and its event's.
	ReasonDeadlineExceeded = "DeadlineExceeded"
	// MessageDeadlineExceeded is the pod's status message and its event's.
	MessageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// PastActiveDeadline reports whether a pod not yet in a terminal phase has
// been active longer than its activeDeadlineSeconds, counted from st's
// start time, at now. The pod workers' sync fails such a pod
// (DeadlineExceeded) and the sync loop checks every pod every second, so
// a pod is stopped within a second of its deadline.
func PastActiveDeadline(p *v1.Pod, st *v1.PodStatus, now time.Time) bool {
	if p.Spec.ActiveDeadlineSeconds == nil || st.StartTime == nil || st.Phase == v1.PodFailed || st.Phase == v1.PodSucceeded {
		return false
	}
	return now.Sub(st.StartTime.Time) >= time.Duration(*p.Spec.ActiveDeadlineSeconds)*time.Second
}
