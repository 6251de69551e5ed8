package container

import (
	v1 "k8s.io/api/core/v1"
)

// IsSidecar reports whether an init container is restartable (a sidecar:
// restartPolicy Always), which keeps running beside the app containers.
func IsSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// ShouldRestart reports whether a sync will (re)start the container, as
// the kubelet's ShouldContainerBeRestarted: it never ran, or it is dead
// and the restart policy says so. Status uses it to show a back-off as
// Waiting.
func ShouldRestart(c *v1.Container, pod *v1.Pod, st *PodStatus) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	s := st.FindContainer(c.Name)
	if s == nil {
		return true
	}
	switch s.State {
	case StateRunning:
		return false
	case StateUnknown, StateCreated:
		return true
	}
	if IsSidecar(c) {
		return true // a sidecar always restarts
	}
	if s.KilledByProbe && pod.Spec.RestartPolicy != v1.RestartPolicyNever {
		return true
	}
	switch pod.Spec.RestartPolicy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return s.ExitCode != 0
	}
	return true
}

// Started tells whether a running container instance has passed its
// startup probe (the prober's answer); nil means every running container
// has.
type Started func(c *v1.Container, s *ContainerStatus) bool
