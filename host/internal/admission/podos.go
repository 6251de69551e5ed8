package admission

import (
	"context"
	"runtime"

	v1 "k8s.io/api/core/v1"
)

// PodOSName is the name of the PodOS admitter.
const PodOSName = "PodOS"

// PodOS rejects a pod meant for another operating system, as the kubelet
// does: its kubernetes.io/os label differs from the node's (reason
// "PodOSSelectorNodeLabelDoesNotMatch"), or its spec.os.name is not this
// node's OS (reason "PodOSNotSupported").
func PodOS() Admitter { return podOS{} }

type podOS struct{}

func (podOS) Name() string { return PodOSName }

func (podOS) Admit(_ context.Context, a Attributes) (Result, error) {
	nodeOS := runtime.GOOS
	if a.Node != nil && a.Node.Labels[v1.LabelOSStable] == runtime.GOOS {
		nodeOS = a.Node.Labels[v1.LabelOSStable]
	}
	if want, ok := a.Pod.Labels[v1.LabelOSStable]; ok && want != nodeOS {
		return Result{Reason: "PodOSSelectorNodeLabelDoesNotMatch", Message: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"}, nil
	}
	if os := a.Pod.Spec.OS; os != nil && string(os.Name) != runtime.GOOS {
		return Result{Reason: "PodOSNotSupported", Message: "Failed to admit pod as the OS field doesn't match node OS"}, nil
	}
	return Result{Admit: true}, nil
}
