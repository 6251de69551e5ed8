package eviction

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/wasmlet/wasmlet/host/internal/admission"
	"github.com/wasmlet/wasmlet/host/internal/qos"
)

// Name names the manager as an admitter.
func (m *Manager) Name() string { return "eviction" }

// Admit implements admission.Admitter as the kubelet's eviction manager
// admits: with no pressure every pod; a critical pod always; under memory
// pressure alone a pod that is not BestEffort, or a BestEffort one that
// tolerates the memory-pressure taint; under disk or PID pressure no
// other pod. A refusal has reason Evicted and the kubelet's message.
func (m *Manager) Admit(_ context.Context, attrs admission.Attributes) (admission.Result, error) {
	conds := m.Conditions()
	pod := attrs.Pod
	if len(conds) == 0 || IsCritical(pod) {
		return admission.Result{Admit: true}, nil
	}
	if slices.Equal(conds, []v1.NodeConditionType{v1.NodeMemoryPressure}) {
		if qos.Class(pod) != v1.PodQOSBestEffort {
			return admission.Result{Admit: true}, nil
		}
		taint := &v1.Taint{Key: v1.TaintNodeMemoryPressure, Effect: v1.TaintEffectNoSchedule}
		if corev1helpers.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations, taint, false) {
			return admission.Result{Admit: true}, nil
		}
	}
	return admission.Result{Reason: Reason, Message: fmt.Sprintf(nodeConditionMessageFmt, conds)}, nil
}

var _ admission.Admitter = (*Manager)(nil)
