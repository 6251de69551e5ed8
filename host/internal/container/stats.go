package container

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RuntimeStats is the runtime's side of the node's stats summary: the
// managed sandboxes and containers with the CRI stats the runtime keeps.
type RuntimeStats struct {
	// Sandboxes are the managed pod sandboxes (ready or not).
	Sandboxes []*runtimeapi.PodSandbox
	// Containers are the managed containers (running or not).
	Containers []*runtimeapi.Container
	// ContainerStats are the running managed containers' stats, by
	// container ID; empty when the runtime keeps none (the embedded WASI
	// runtime).
	ContainerStats map[string]*runtimeapi.ContainerStats
	// SandboxStats are the sandboxes' stats, by sandbox ID; nil when the
	// runtime does not answer ListPodSandboxStats (containerd 1.6 fails it
	// for a sandbox without a cgroup of its own), and then pods are summed
	// from their containers.
	SandboxStats map[string]*runtimeapi.PodSandboxStats
	// SandboxStatsErr is why SandboxStats is nil, if the runtime said.
	SandboxStatsErr error
}

// ContainerLog is a running container's CRI log file, for log rotation.
type ContainerLog struct {
	// ID is the runtime's container ID.
	ID string
	// Path is the log file's absolute path.
	Path string
}
