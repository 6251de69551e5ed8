package kubeletapi

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

// LogsFunc adapts a function to Logs.
type LogsFunc func(ctx context.Context, namespace, pod, container string, previous bool) (path string, running func() bool, err error)

// LogFile implements Logs.
func (f LogsFunc) LogFile(ctx context.Context, namespace, pod, container string, previous bool) (string, func() bool, error) {
	return f(ctx, namespace, pod, container, previous)
}

// PodLogs is Logs for an agent that finds its pods by namespace and name
// (pod) and a log file by pod (logFile, such as the runtime manager's
// LogFile). Like the kubelet's containerLogs it answers a pod pod does not
// know with PodNotFound and a container the pod's spec does not name (among
// its containers, init containers and ephemeral containers) with
// ContainerNotFound, before asking logFile.
func PodLogs(pod func(namespace, name string) (*v1.Pod, bool), logFile func(ctx context.Context, pod *v1.Pod, container string, previous bool) (string, func() bool, error)) Logs {
	return LogsFunc(func(ctx context.Context, namespace, name, container string, previous bool) (string, func() bool, error) {
		p, ok := pod(namespace, name)
		if !ok {
			return "", nil, PodNotFound(name)
		}
		if !hasContainer(p, container) {
			return "", nil, ContainerNotFound(container, name)
		}
		return logFile(ctx, p, container, previous)
	})
}

// hasContainer reports whether the pod's spec names the container.
func hasContainer(p *v1.Pod, name string) bool {
	for _, c := range p.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range p.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range p.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}
