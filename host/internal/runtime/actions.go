package runtime

import (
	"github.com/wasmlet/wasmlet/host/internal/container"
	v1 "k8s.io/api/core/v1"
)

// podActions is what SyncPod must do to bring a pod to its spec (the
// kubelet's podActions).
type podActions struct {
	// KillPod: stop every container and the sandbox first.
	KillPod bool
	// CreateSandbox: start a new sandbox with Attempt.
	CreateSandbox bool
	// SandboxID is the current sandbox, when kept.
	SandboxID string
	Attempt   uint32
	// NextInitContainerToStart is the next init container, or nil.
	NextInitContainerToStart *v1.Container
	// SidecarsToRestart are restartable init containers (sidecars) that
	// exited after the pod was initialized; they restart beside the app
	// containers.
	SidecarsToRestart []*v1.Container
	// ContainersToStart are indexes into pod.Spec.Containers.
	ContainersToStart []int
	// EphemeralContainersToStart are indexes into pod.Spec.EphemeralContainers.
	EphemeralContainersToStart []int
	// ContainersToKill maps a container ID to why it is killed.
	ContainersToKill map[string]killInfo
}

type killInfo struct {
	name      string
	container *v1.Container
	message   string
}

func shouldRestartOnFailure(pod *v1.Pod) bool {
	return pod.Spec.RestartPolicy != v1.RestartPolicyNever
}

func containerSucceeded(c *v1.Container, st *container.PodStatus) bool {
	s := st.FindContainer(c.Name)
	return s != nil && s.State == container.StateExited && s.ExitCode == 0
}

// podSandboxChanged tells whether the pod needs a new sandbox, with the
// new attempt number and the current sandbox's ID. Unlike the kubelet it
// does not compare the sandbox's network namespace mode with the spec: a
// pod's hostNetwork cannot change without its UID changing (static pods
// hash their content, API pods cannot change it), and the embedded WASI
// runtime reports every sandbox on the node's network whatever was asked.
func podSandboxChanged(pod *v1.Pod, st *container.PodStatus) (bool, uint32, string) {
	if len(st.Sandboxes) == 0 {
		return true, 0, ""
	}
	ready := 0
	for _, s := range st.Sandboxes {
		if s.Ready {
			ready++
		}
	}
	newest := st.Sandboxes[0]
	switch {
	case ready > 1, !newest.Ready:
		return true, newest.Attempt + 1, newest.ID
	case !pod.Spec.HostNetwork && len(newest.IPs) == 0:
		return true, newest.Attempt + 1, newest.ID
	}
	return false, newest.Attempt, newest.ID
}

func isInitContainerFailed(s *container.ContainerStatus) bool {
	return (s.State == container.StateExited && s.ExitCode != 0) || s.State == container.StateUnknown
}

// findNextInitContainerToRun returns the status of the last failed init
// container (if any), the next init container to run, and whether all
// init containers are done. A sidecar is done once it runs and has
// started (its startup probe passed): the next init container does not
// wait for it to exit.
func findNextInitContainerToRun(pod *v1.Pod, st *container.PodStatus, started container.Started) (*container.ContainerStatus, *v1.Container, bool) {
	inits := pod.Spec.InitContainers
	if len(inits) == 0 {
		return nil, nil, true
	}
	// A running app container means the init containers ran.
	for i := range pod.Spec.Containers {
		if s := st.FindContainer(pod.Spec.Containers[i].Name); s != nil && s.State == container.StateRunning {
			return nil, nil, true
		}
	}
	for i := range inits {
		c := &inits[i]
		s := st.FindContainer(c.Name)
		if container.IsSidecar(c) {
			switch {
			case s == nil:
				return nil, c, false
			case s.State == container.StateRunning:
				if started != nil && !started(c, s) {
					return nil, nil, false
				}
				continue
			case s.State == container.StateCreated:
				return nil, nil, false
			}
			// Exited before the pod was initialized: start it again.
			return nil, c, false
		}
		switch {
		case s == nil:
			return nil, c, false
		case s.State == container.StateRunning || s.State == container.StateCreated:
			return nil, nil, false
		case isInitContainerFailed(s):
			return s, c, false
		}
		// Exited 0: the next one.
	}
	return nil, nil, true
}

// restartChangedSidecars kills and restarts, while the pod initializes,
// each sidecar that runs, has started, and whose spec changed (a new image),
// as the kubelet's computeInitContainerActions does: a later init container
// still running does not hold back the sidecars before it.
func restartChangedSidecars(pod *v1.Pod, st *container.PodStatus, started container.Started, a *podActions) {
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if !container.IsSidecar(c) {
			continue
		}
		s := st.FindContainer(c.Name)
		if s == nil || s.State != container.StateRunning || (started != nil && !started(c, s)) {
			// Not started yet: what follows it has not run.
			return
		}
		if sidecarChanged(c, s) {
			a.restartChangedSidecar(c, s)
		}
	}
}

// computePodActions is the kubelet's computePodActions, step 1 of SyncPod.
func computePodActions(pod *v1.Pod, st *container.PodStatus, started container.Started) podActions {
	create, attempt, sandboxID := podSandboxChanged(pod, st)
	a := podActions{KillPod: create, CreateSandbox: create, SandboxID: sandboxID, Attempt: attempt, ContainersToKill: map[string]killInfo{}}

	if create {
		if !shouldRestartOnFailure(pod) && attempt != 0 && len(st.Containers) != 0 {
			// The pod ran and must not be restarted: just make sure it is dead.
			a.CreateSandbox = false
			return a
		}
		var toStart []int
		for i := range pod.Spec.Containers {
			if pod.Spec.RestartPolicy == v1.RestartPolicyOnFailure && containerSucceeded(&pod.Spec.Containers[i], st) {
				continue
			}
			toStart = append(toStart, i)
		}
		if len(toStart) == 0 {
			if _, _, done := findNextInitContainerToRun(pod, st, started); done {
				a.CreateSandbox = false
				return a
			}
		}
		if len(pod.Spec.InitContainers) != 0 {
			a.NextInitContainerToStart = &pod.Spec.InitContainers[0]
			return a
		}
		a.ContainersToStart = toStart
		return a
	}

	for i := range pod.Spec.EphemeralContainers {
		if st.FindContainer(pod.Spec.EphemeralContainers[i].Name) == nil {
			a.EphemeralContainersToStart = append(a.EphemeralContainersToStart, i)
		}
	}

	initLast, next, done := findNextInitContainerToRun(pod, st, started)
	if !done {
		if next != nil {
			if initLast != nil && isInitContainerFailed(initLast) && !shouldRestartOnFailure(pod) {
				a.KillPod = true
			} else {
				if initLast != nil && initLast.State == container.StateUnknown {
					a.ContainersToKill[initLast.ID] = killInfo{name: next.Name, container: next, message: "Init container is in unknown state, try killing it before restart"}
				}
				a.NextInitContainerToStart = next
			}
		}
		if !a.KillPod {
			restartChangedSidecars(pod, st, started, &a)
		}
		return a
	}

	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if !container.IsSidecar(c) || pod.DeletionTimestamp != nil {
			continue
		}
		s := st.FindContainer(c.Name)
		switch {
		case s != nil && s.State != container.StateRunning:
			if s.State == container.StateUnknown || s.State == container.StateCreated {
				a.ContainersToKill[s.ID] = killInfo{name: c.Name, container: c, message: "Container is in " + string(s.State) + " state, try killing it before restart"}
			}
			a.SidecarsToRestart = append(a.SidecarsToRestart, c)
		case s != nil && sidecarChanged(c, s):
			a.restartChangedSidecar(c, s)
		}
	}
	keep := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		s := st.FindContainer(c.Name)
		if s != nil && (s.State == container.StateUnknown || s.State == container.StateCreated) {
			a.ContainersToKill[s.ID] = killInfo{name: c.Name, container: c, message: "Container is in " + string(s.State) + " state, try killing it before restart"}
		}
		if s == nil || s.State != container.StateRunning {
			if container.ShouldRestart(c, pod, st) {
				a.ContainersToStart = append(a.ContainersToStart, i)
			}
			continue
		}
		if s.Hash == HashContainer(c) {
			keep++
			continue
		}
		a.ContainersToStart = append(a.ContainersToStart, i)
		a.ContainersToKill[s.ID] = killInfo{name: c.Name, container: c, message: "Container " + c.Name + " definition changed, will be restarted"}
	}
	if keep == 0 && len(a.ContainersToStart) == 0 {
		a.KillPod = true
	}
	return a
}

// sidecarChanged reports whether the running sidecar s no longer runs c's
// spec (a new image).
func sidecarChanged(c *v1.Container, s *container.ContainerStatus) bool {
	return s.Hash != "" && s.Hash != HashContainer(c)
}

// restartChangedSidecar kills the sidecar s and starts c's spec in its
// place, as the kubelet restarts a sidecar whose definition changed.
func (a *podActions) restartChangedSidecar(c *v1.Container, s *container.ContainerStatus) {
	a.ContainersToKill[s.ID] = killInfo{name: c.Name, container: c, message: "Init container " + c.Name + " definition changed"}
	a.SidecarsToRestart = append(a.SidecarsToRestart, c)
}
