// Package container is the runtime's vocabulary, as the kubelet's
// pkg/kubelet/container is: a pod's and a container's state in the runtime,
// the objects of a relist, the outcome of a sync, the lifecycle points and
// adjustments of sync hooks, container logs and stats, and the predicates
// every consumer shares (IsSidecar, ShouldRestart). It is a leaf: the CRI
// runtime manager (host/internal/runtime) fills these types, and pleg,
// stats, logrotate, housekeeping, the prober, podsync and status read them
// without depending on the manager.
package container

import (
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ContainerState is a container's state as the runtime reports it.
type ContainerState string

// The container states, as kubecontainer names them.
const (
	StateCreated ContainerState = "created"
	StateRunning ContainerState = "running"
	StateExited  ContainerState = "exited"
	StateUnknown ContainerState = "unknown"
)

// SandboxStatus is one pod sandbox of a pod.
type SandboxStatus struct {
	// ID is the runtime's sandbox ID.
	ID string
	// Attempt is the sandbox's attempt number (metadata.attempt).
	Attempt uint32
	// Ready is true when the runtime reports SANDBOX_READY.
	Ready bool
	// CreatedAt is the sandbox's creation time.
	CreatedAt time.Time
	// IPs are the sandbox's IPs, primary first; empty on the host network.
	IPs []string
	// HostNetwork is true when the sandbox shares the node's network namespace.
	HostNetwork bool
	// RuntimeHandler is the CRI runtime handler the sandbox was run with
	// ("" is the runtime's default), from its pod's RuntimeClass.
	RuntimeHandler string
}

// ContainerStatus is one container instance of a pod, running or dead.
type ContainerStatus struct {
	// ID is the runtime's container ID.
	ID string
	// SandboxID is the sandbox the container lives in.
	SandboxID string
	// Name is the container's name in the pod spec.
	Name string
	// State is the container's state.
	State ContainerState
	// CreatedAt, StartedAt, FinishedAt are zero when unknown.
	CreatedAt, StartedAt, FinishedAt time.Time
	// ExitCode is valid once State is StateExited.
	ExitCode int32
	// Reason and Message come from the runtime (e.g. "Completed", "Error",
	// "OOMKilled") or from the termination message file.
	Reason, Message string
	// Image is the image as the runtime names it; ImageRef is its digest/ID.
	Image, ImageRef string
	// Hash is the container spec hash the instance was created from.
	Hash string
	// RestartCount is the restart count the instance was created with.
	RestartCount int
	// GracePeriod is the pod's grace period when the instance was created
	// (from its annotations), or nil; it lets an agent that lost the pod
	// spec still stop the container gracefully.
	GracePeriod *int64
	// KilledByProbe says the agent stopped this instance because its
	// liveness or startup probe failed: it restarts unless the restart
	// policy is Never, whatever its exit code, as the kubelet restarts a
	// container it killed for a probe.
	KilledByProbe bool
}

// PodStatus is a pod's state in the runtime: every sandbox and every
// container instance (newest first), as kubecontainer.PodStatus.
type PodStatus struct {
	// UID, Name and Namespace identify the pod.
	UID       types.UID
	Name      string
	Namespace string
	// IPs are the IPs of the newest ready sandbox.
	IPs []string
	// Sandboxes, newest first.
	Sandboxes []*SandboxStatus
	// Containers, newest first.
	Containers []*ContainerStatus
	// Timestamp is when the status was read from the runtime.
	Timestamp time.Time
}

// FindContainer returns the newest instance of the named container, or nil.
func (s *PodStatus) FindContainer(name string) *ContainerStatus {
	if s == nil {
		return nil
	}
	for _, c := range s.Containers {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Running reports whether the pod has a ready sandbox or a running container.
func (s *PodStatus) Running() bool {
	if s == nil {
		return false
	}
	for _, sb := range s.Sandboxes {
		if sb.Ready {
			return true
		}
	}
	for _, c := range s.Containers {
		if c.State == StateRunning {
			return true
		}
	}
	return false
}

// Object is a sandbox or container in a relist: just enough to tell what
// changed.
type Object struct {
	// ID is the runtime's ID.
	ID string
	// Name is the container name ("" for a sandbox).
	Name string
	// Sandbox is true for a pod sandbox.
	Sandbox bool
	// SandboxID is a container's sandbox.
	SandboxID string
	// State is the object's state (a ready sandbox is StateRunning, a
	// not-ready one StateExited).
	State ContainerState
	// CreatedAt is the creation time.
	CreatedAt time.Time
	// Attempt and RuntimeHandler are a sandbox's metadata attempt and
	// runtime handler (zero for a container).
	Attempt        uint32
	RuntimeHandler string
}

// Pod is one pod found in a relist: its sandboxes and containers.
type Pod struct {
	// UID, Name and Namespace come from the objects' labels.
	UID       types.UID
	Name      string
	Namespace string
	// Objects are the pod's sandboxes and containers.
	Objects []Object
}

// Errors a sync reports; the status of the container names them as the
// kubelet does (waiting reason).
var (
	// ErrCrashLoopBackOff: a container is in crash-loop back-off.
	ErrCrashLoopBackOff = errors.New("CrashLoopBackOff")
	// ErrImagePull: an image pull failed.
	ErrImagePull = errors.New("ErrImagePull")
	// ErrImagePullBackOff: an image pull is backing off.
	ErrImagePullBackOff = errors.New("ImagePullBackOff")
	// ErrImageNeverPull: the image is absent and the policy is Never.
	ErrImageNeverPull = errors.New("ErrImageNeverPull")
	// ErrPostStartHook: the container's postStart handler failed and the
	// container was killed.
	ErrPostStartHook = errors.New("PostStartHookError")
	// ErrCreateContainerConfig: the container config could not be made.
	ErrCreateContainerConfig = errors.New("CreateContainerConfigError")
	// ErrCreateContainer: CreateContainer failed.
	ErrCreateContainer = errors.New("CreateContainerError")
	// ErrRunContainer: StartContainer failed.
	ErrRunContainer = errors.New("RunContainerError")
	// ErrPreCreateHook: a PreCreate hook failed.
	ErrPreCreateHook = errors.New("PreCreateHookError")
	// ErrCreateSandbox: RunPodSandbox failed.
	ErrCreateSandbox = errors.New("CreatePodSandboxError")
	// ErrKillContainer: StopContainer failed.
	ErrKillContainer = errors.New("KillContainerError")
	// ErrResizePod: applying a pod's new resources to its running
	// containers failed.
	ErrResizePod = errors.New("ResizePodError")
	// ErrKillPod: stopping a pod failed.
	ErrKillPod = errors.New("KillPodError")
)

// StepResult is the outcome of one step of a sync on one target.
type StepResult struct {
	// Action is what was done: "KillPod", "KillContainer", "ResizePod",
	// "CreatePodSandbox", "StartContainer".
	Action string
	// Target names the container or pod.
	Target string
	// Err is nil on success; else wraps one of the Err* reasons.
	Err error
	// Message explains Err.
	Message string
}

// SyncResult is the outcome of SyncPod.
type SyncResult struct {
	// Steps in the order they ran.
	Steps []StepResult
}

// Add records one step.
func (r *SyncResult) Add(action, target string, err error, msg string) {
	r.Steps = append(r.Steps, StepResult{Action: action, Target: target, Err: err, Message: msg})
}

// Error returns every failed step joined, or nil.
func (r *SyncResult) Error() error {
	var errs []error
	for _, s := range r.Steps {
		if s.Err != nil {
			errs = append(errs, s.Err)
		}
	}
	return errors.Join(errs...)
}
