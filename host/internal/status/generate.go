// Package status computes a pod's v1.PodStatus from its spec and its state
// in the runtime, as the kubelet's generateAPIPodStatus does (phase,
// conditions, container statuses, IPs, start time, QoS class), and keeps
// the latest status of every pod (Manager).
package status

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmlet/wasmlet/host/internal/container"
	"github.com/wasmlet/wasmlet/host/internal/qos"
)

// Input is what Generate needs.
type Input struct {
	// Pod is the pod's spec.
	Pod *v1.Pod
	// Runtime is the pod's state in the runtime; nil means nothing yet.
	Runtime *container.PodStatus
	// Previous is the pod's last status (start time, terminal phase and
	// container states are kept from it); nil for a new pod.
	Previous *v1.PodStatus
	// RuntimeName is the scheme of container IDs ("containerd").
	RuntimeName string
	// HostIPs are the node's IPs (hostIP, and podIP of host-network pods).
	HostIPs []string
	// Waiting returns the reason of a container's last failed start
	// (CrashLoopBackOff, ErrImagePull …); nil means none.
	Waiting func(uid types.UID, container string) (reason, message string, ok bool)
	// Probes, when set, gives the startup and readiness probe results of
	// running containers; nil means every running container is started
	// and ready.
	Probes Probes
	// Now is the time of the status; zero means time.Now().
	Now time.Time
	// Terminal says the pod workers stopped the pod for good (it was
	// deleted, evicted or finished): its containers will not restart
	// whatever the restart policy, so a pod whose containers all stopped
	// is Succeeded or Failed, and one still Pending or Running is Failed
	// with every container that never ended marked ContainerStatusUnknown
	// (exit code 137), as the kubelet's status manager terminates a pod.
	// Callers leave it false for static pods, as the kubelet does.
	Terminal bool
	// RecursiveReadOnly resolves a read-only volume mount's recursive
	// read-only mode as the runtime applies it (the containers' status
	// volumeMounts say Enabled or Disabled); nil counts as unsupported.
	RecursiveReadOnly func(pod *v1.Pod, vm v1.VolumeMount) (bool, error)
	// Resources, when set, gives the containers' allocated and actuated
	// resources and the pod's resize conditions (allocation.Manager); nil
	// shows the spec's resources as both.
	Resources Resources
}

// Resources are the pods' allocations (allocation.Manager).
type Resources interface {
	// Allocated is the container's allocation.
	Allocated(uid types.UID, name string) (v1.ResourceRequirements, bool)
	// Actuated are the resources the container runs with.
	Actuated(uid types.UID, name string) (v1.ResourceRequirements, bool)
	// Conditions are the pod's PodResizePending and PodResizeInProgress
	// conditions.
	Conditions(uid types.UID) []v1.PodCondition
}

// Probes gives probe results (prober.Manager).
type Probes interface {
	// Started reports whether the container instance passed its startup
	// probe (true without one).
	Started(c *v1.Container, containerID string) bool
	// Ready reports whether it is started and passes its readiness probe.
	Ready(c *v1.Container, containerID string) bool
}

// Generate returns the pod's v1.PodStatus.
func Generate(in Input) v1.PodStatus {
	pod := in.Pod
	now := in.Now
	if now.IsZero() {
		now = time.Now()
	}
	rs := in.Runtime
	if rs == nil {
		rs = &container.PodStatus{UID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	prev := in.Previous
	if prev == nil {
		prev = &v1.PodStatus{}
	}
	s := v1.PodStatus{QOSClass: qos.Class(pod), ObservedGeneration: pod.Generation}
	s.InitContainerStatuses = containerStatuses(in, rs, pod.Spec.InitContainers, prev.InitContainerStatuses, true)
	s.ContainerStatuses = containerStatuses(in, rs, pod.Spec.Containers, prev.ContainerStatuses, false)
	if len(pod.Spec.EphemeralContainers) > 0 {
		eph := make([]v1.Container, len(pod.Spec.EphemeralContainers))
		for i := range pod.Spec.EphemeralContainers {
			eph[i] = v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		}
		s.EphemeralContainerStatuses = containerStatuses(in, rs, eph, prev.EphemeralContainerStatuses, false)
	}

	s.Phase = phase(pod, s.InitContainerStatuses, s.ContainerStatuses, in.Terminal, probeRestarts(pod, rs))
	// A pod never leaves a terminal phase.
	if prev.Phase == v1.PodFailed || prev.Phase == v1.PodSucceeded {
		s.Phase = prev.Phase
		s.Reason, s.Message = prev.Reason, prev.Message
	}

	if len(in.HostIPs) > 0 {
		s.HostIP = in.HostIPs[0]
		for _, ip := range in.HostIPs {
			s.HostIPs = append(s.HostIPs, v1.HostIP{IP: ip})
		}
	}
	ips := rs.IPs
	if pod.Spec.HostNetwork {
		ips = in.HostIPs
	}
	if len(ips) > 0 {
		s.PodIP = ips[0]
		for _, ip := range ips {
			s.PodIPs = append(s.PodIPs, v1.PodIP{IP: ip})
		}
	} else if prev.PodIP != "" && !sandboxReady(rs) {
		// A pod whose sandbox stopped keeps the IPs it had, as the
		// kubelet's PLEG keeps an exited pod's: a terminating or
		// terminated pod still shows where it ran.
		s.PodIP, s.PodIPs = prev.PodIP, prev.PodIPs
	}

	s.StartTime = prev.StartTime
	if s.StartTime == nil {
		t := metav1.NewTime(now)
		s.StartTime = &t
	}
	s.Conditions = conditions(pod, rs, &s, prev, now)
	for i := range s.Conditions {
		s.Conditions[i].ObservedGeneration = pod.Generation
	}
	if in.Resources != nil {
		s.Conditions = append(s.Conditions, in.Resources.Conditions(pod.UID)...)
	}
	// A DisruptionTarget the node gave (an eviction) stays, as the
	// kubelet keeps it from the pod's status.
	for _, c := range prev.Conditions {
		if c.Type == v1.DisruptionTarget {
			s.Conditions = append(s.Conditions, c)
		}
	}
	if in.Terminal {
		terminate(&s)
	}
	return s
}

// Rejected is the status of a pod admission rejected: phase Failed with
// the admitter's reason and message, as the kubelet's rejectPod.
func Rejected(pod *v1.Pod, reason, message string) v1.PodStatus {
	return v1.PodStatus{Phase: v1.PodFailed, Reason: reason, Message: "Pod was rejected: " + message, QOSClass: qos.Class(pod)}
}

func containerStatuses(in Input, rs *container.PodStatus, specs []v1.Container, prev []v1.ContainerStatus, init bool) []v1.ContainerStatus {
	if len(specs) == 0 {
		return nil
	}
	pod := in.Pod
	out := make([]v1.ContainerStatus, 0, len(specs))
	for i := range specs {
		c := &specs[i]
		// Started is always set, false until the container runs and passes
		// its startup probe, as the kubelet's prober manager reports it
		// (clients dereference it).
		notStarted := false
		cs := v1.ContainerStatus{Name: c.Name, Image: c.Image, Started: &notStarted}
		// The kubelet's default waiting reason, for app and init
		// containers alike: PodInitializing when the pod has init
		// containers.
		waitReason := "ContainerCreating"
		if len(pod.Spec.InitContainers) > 0 {
			waitReason = "PodInitializing"
		}
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: waitReason}
		// The newest instance is the state, the one before the last state.
		var cur, last *container.ContainerStatus
		for _, r := range rs.Containers {
			if r.Name != c.Name {
				continue
			}
			if cur == nil {
				cur = r
			} else {
				last = r
				break
			}
		}
		if cur != nil {
			cs.ContainerID = in.RuntimeName + "://" + cur.ID
			cs.Image = cur.Image
			cs.ImageID = cur.ImageRef
			cs.RestartCount = int32(cur.RestartCount)
			cs.State = apiState(cur, in.RuntimeName)
			if cur.State == container.StateRunning {
				started, ready := true, true
				if in.Probes != nil {
					started, ready = in.Probes.Started(c, cs.ContainerID), in.Probes.Ready(c, cs.ContainerID)
				}
				cs.Started = &started
				cs.Ready = ready
			}
		} else if p := findStatus(prev, c.Name); p != nil && p.ContainerID != "" {
			// The runtime forgot it (GC'd); keep what we knew.
			cs = *p
			cs.Ready, cs.Started = false, &notStarted
		}
		if last != nil && last.State == container.StateExited {
			cs.LastTerminationState = apiState(last, in.RuntimeName)
		}
		if in.Waiting != nil && container.ShouldRestart(c, pod, rs) {
			if reason, msg, ok := in.Waiting(pod.UID, c.Name); ok {
				if cs.State.Terminated != nil {
					cs.LastTerminationState = cs.State
				}
				cs.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason, Message: msg}}
				cs.Ready = false
			}
		}
		cs.VolumeMounts = volumeMountStatuses(in, c)
		setResources(in, c, &cs, init)
		if init && !container.IsSidecar(c) {
			// An init container is ready once it has completed, as the
			// kubelet reports it; a running one is not.
			cs.Ready = cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
		}
		out = append(out, cs)
	}
	return out
}

// setResources fills a container status' allocatedResources (the
// allocation's requests) and, while it runs, its resources (those it runs
// with: cpu and memory requests and limits, and ephemeral storage), as the
// kubelet reports them for the containers it resizes (app containers and
// sidecars).
func setResources(in Input, c *v1.Container, cs *v1.ContainerStatus, init bool) {
	if init && !container.IsSidecar(c) {
		return
	}
	alloc, act := c.Resources, c.Resources
	if in.Resources != nil {
		if a, ok := in.Resources.Allocated(in.Pod.UID, c.Name); ok {
			alloc, act = a, a
		}
		if a, ok := in.Resources.Actuated(in.Pod.UID, c.Name); ok {
			act = a
		}
	}
	if len(alloc.Requests) > 0 {
		cs.AllocatedResources = alloc.Requests.DeepCopy()
	}
	if cs.State.Running == nil {
		return
	}
	r := &v1.ResourceRequirements{}
	pick := func(l v1.ResourceList) v1.ResourceList {
		if l == nil {
			return nil
		}
		out := v1.ResourceList{}
		for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage} {
			if q, ok := l[name]; ok {
				out[name] = q.DeepCopy()
			}
		}
		return out
	}
	r.Requests, r.Limits = pick(act.Requests), pick(act.Limits)
	cs.Resources = r
}

// volumeMountStatuses are the container's volume mounts as the kubelet
// reports them: each read-only one with its recursive read-only mode
// resolved (Enabled or Disabled), a read-write one without.
func volumeMountStatuses(in Input, c *v1.Container) []v1.VolumeMountStatus {
	var out []v1.VolumeMountStatus
	for _, vm := range c.VolumeMounts {
		s := v1.VolumeMountStatus{Name: vm.Name, MountPath: vm.MountPath, ReadOnly: vm.ReadOnly}
		if vm.ReadOnly {
			mode := v1.RecursiveReadOnlyDisabled
			if in.RecursiveReadOnly != nil {
				if rro, err := in.RecursiveReadOnly(in.Pod, vm); err == nil && rro {
					mode = v1.RecursiveReadOnlyEnabled
				}
			}
			s.RecursiveReadOnly = &mode
		}
		out = append(out, s)
	}
	return out
}

func findStatus(list []v1.ContainerStatus, name string) *v1.ContainerStatus {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

func apiState(r *container.ContainerStatus, runtimeName string) v1.ContainerState {
	switch r.State {
	case container.StateRunning:
		return v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(r.StartedAt)}}
	case container.StateExited:
		reason := r.Reason
		if reason == "" {
			reason = "Completed"
			if r.ExitCode != 0 {
				reason = "Error"
			}
		}
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			ExitCode: r.ExitCode, Reason: reason, Message: r.Message,
			StartedAt: metav1.NewTime(r.StartedAt), FinishedAt: metav1.NewTime(r.FinishedAt),
			ContainerID: runtimeName + "://" + r.ID,
		}}
	case container.StateUnknown:
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			ExitCode: 137, Reason: "ContainerStatusUnknown",
			Message:     "The container could not be located when the pod was terminated",
			ContainerID: runtimeName + "://" + r.ID,
		}}
	}
	return v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}
}

// sandboxReady reports whether one of the pod's sandboxes is ready.
func sandboxReady(rs *container.PodStatus) bool {
	for _, sb := range rs.Sandboxes {
		if sb.Ready {
			return true
		}
	}
	return false
}

// statusUnknownMessage is the kubelet's message for a container that never
// ended when its pod was terminated.
const statusUnknownMessage = "The container could not be located when the pod was terminated"

// terminate is the kubelet status manager's TerminatePod on a generated
// status: a container of an initialized pod (and an init container before
// the last one that ran) that never ended is marked terminated with
// ContainerStatusUnknown, and a phase that is not yet terminal becomes
// Failed.
func terminate(s *v1.PodStatus) {
	unknown := func(cs *v1.ContainerStatus) {
		if cs.State.Terminated == nil {
			cs.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
				Reason: "ContainerStatusUnknown", Message: statusUnknownMessage, ExitCode: 137,
			}}
		}
	}
	initialized := false
	for _, c := range s.Conditions {
		if c.Type == v1.PodInitialized && c.Status == v1.ConditionTrue {
			initialized = true
		}
	}
	if initialized {
		for i := range s.ContainerStatuses {
			unknown(&s.ContainerStatuses[i])
		}
	}
	// Init containers up to the last one with evidence of a start.
	last := -1
	for i, cs := range s.InitContainerStatuses {
		if cs.State.Running != nil || cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil {
			last = i
		}
	}
	for i := 0; i < last; i++ {
		unknown(&s.InitContainerStatuses[i])
	}
	if s.Phase != v1.PodSucceeded && s.Phase != v1.PodFailed {
		s.Phase = v1.PodFailed
	}
}

// Phase is the kubelet's getPhase: Pending until every container has run,
// Running while one runs (or will restart), Succeeded/Failed per the
// restart policy once all have stopped.
func Phase(pod *v1.Pod, inits, containers []v1.ContainerStatus) v1.PodPhase {
	return phase(pod, inits, containers, false, nil)
}

// probeRestarts are the regular containers whose last instance the agent
// stopped for a failed probe and that will restart: their exit is not a
// success (the kubelet restarts such a container in the sync that kills
// it, so its pod never shows it as done).
func probeRestarts(pod *v1.Pod, rs *container.PodStatus) map[string]bool {
	var out map[string]bool
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if s := rs.FindContainer(c.Name); s != nil && s.KilledByProbe && s.State == container.StateExited && container.ShouldRestart(c, pod, rs) {
			if out == nil {
				out = map[string]bool{}
			}
			out[c.Name] = true
		}
	}
	return out
}

// phase is Phase; for a terminal pod (see Input.Terminal) whose containers
// all stopped it is Succeeded when every one succeeded, else Failed,
// whatever the restart policy.
func phase(pod *v1.Pod, inits, containers []v1.ContainerStatus, terminal bool, restarting map[string]bool) v1.PodPhase {
	pendingInit, failedInit := 0, 0
	appRan := false
	for _, c := range containers {
		appRan = appRan || c.ContainerID != ""
	}
	for _, c := range pod.Spec.InitContainers {
		s := findStatus(inits, c.Name)
		if container.IsSidecar(&c) {
			// A sidecar counts once it runs and has started, or once the
			// app containers ran (it is then restarted beside them).
			if !appRan && (s == nil || s.State.Running == nil || s.Started == nil || !*s.Started) {
				pendingInit++
			}
			continue
		}
		switch {
		case s == nil:
			pendingInit++
		case s.State.Running != nil:
			pendingInit++
		case s.State.Terminated != nil:
			if s.State.Terminated.ExitCode != 0 {
				failedInit++
			}
		case s.State.Waiting != nil:
			if s.LastTerminationState.Terminated != nil {
				if s.LastTerminationState.Terminated.ExitCode != 0 {
					failedInit++
				}
			} else {
				pendingInit++
			}
		default:
			pendingInit++
		}
	}
	unknown, running, waiting, stopped, succeeded := 0, 0, 0, 0, 0
	for _, c := range pod.Spec.Containers {
		s := findStatus(containers, c.Name)
		switch {
		case s == nil:
			unknown++
		case s.State.Running != nil:
			running++
		case s.State.Terminated != nil:
			stopped++
			if s.State.Terminated.ExitCode == 0 && !restarting[c.Name] {
				succeeded++
			}
		case s.State.Waiting != nil:
			if s.LastTerminationState.Terminated != nil {
				stopped++
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}
	if failedInit > 0 && pod.Spec.RestartPolicy == v1.RestartPolicyNever {
		return v1.PodFailed
	}
	switch {
	case pendingInit > 0, waiting > 0:
		return v1.PodPending
	case running > 0 && unknown == 0:
		return v1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if terminal {
			if stopped == succeeded {
				return v1.PodSucceeded
			}
			return v1.PodFailed
		}
		if pod.Spec.RestartPolicy == v1.RestartPolicyAlways {
			return v1.PodRunning
		}
		if stopped == succeeded {
			return v1.PodSucceeded
		}
		if pod.Spec.RestartPolicy == v1.RestartPolicyNever {
			return v1.PodFailed
		}
		return v1.PodRunning
	}
	return v1.PodPending
}

// conditions are the kubelet's five, in its order: PodReadyToStartContainers,
// Initialized, Ready, ContainersReady, PodScheduled.
func conditions(pod *v1.Pod, rs *container.PodStatus, s *v1.PodStatus, prev *v1.PodStatus, now time.Time) []v1.PodCondition {
	cond := func(t v1.PodConditionType, ok bool, reason, msg string) v1.PodCondition {
		c := v1.PodCondition{Type: t, Status: v1.ConditionFalse, Reason: reason, Message: msg}
		if ok {
			c.Status, c.Reason, c.Message = v1.ConditionTrue, "", ""
		}
		c.LastTransitionTime = metav1.NewTime(now)
		for _, p := range prev.Conditions {
			if p.Type == t && p.Status == c.Status {
				c.LastTransitionTime = p.LastTransitionTime
			}
		}
		return c
	}
	sandboxReady := len(rs.Sandboxes) > 0 && rs.Sandboxes[0].Ready

	var notInit []string
	for _, c := range pod.Spec.InitContainers {
		st := findStatus(s.InitContainerStatuses, c.Name)
		if container.IsSidecar(&c) {
			if st == nil || st.State.Running == nil || st.Started == nil || !*st.Started {
				notInit = append(notInit, c.Name)
			}
			continue
		}
		if st == nil || st.State.Terminated == nil || st.State.Terminated.ExitCode != 0 {
			notInit = append(notInit, c.Name)
		}
	}
	// Running app containers mean initialization completed.
	for _, c := range s.ContainerStatuses {
		if c.State.Running != nil || c.LastTerminationState.Terminated != nil || c.State.Terminated != nil {
			notInit = nil
			break
		}
	}
	// Sidecars count for readiness too, before the app containers.
	var notReady []string
	for _, c := range pod.Spec.InitContainers {
		if st := findStatus(s.InitContainerStatuses, c.Name); container.IsSidecar(&c) && (st == nil || !st.Ready) {
			notReady = append(notReady, c.Name)
		}
	}
	for _, c := range pod.Spec.Containers {
		st := findStatus(s.ContainerStatuses, c.Name)
		if st == nil || !st.Ready {
			notReady = append(notReady, c.Name)
		}
	}
	readyReason, readyMsg := "", ""
	if len(notReady) > 0 {
		readyReason, readyMsg = "ContainersNotReady", fmt.Sprintf("containers with unready status: [%s]", strings.Join(notReady, " "))
	}
	containersReady := len(notReady) == 0
	ready := containersReady
	cReason, cMsg := readyReason, readyMsg
	// Readiness gates: conditions other controllers set on the pod's API
	// status must be True too (they do not touch ContainersReady).
	if gateMsg := readinessGates(pod); ready && gateMsg != "" {
		ready, readyReason, readyMsg = false, "ReadinessGatesNotReady", gateMsg
	}
	if s.Phase == v1.PodSucceeded || s.Phase == v1.PodFailed {
		ready, readyReason, readyMsg = false, "PodCompleted", ""
		containersReady, cReason, cMsg = false, "PodCompleted", ""
	}
	initReason, initMsg := "", ""
	if len(notInit) > 0 {
		initReason, initMsg = "ContainersNotInitialized", fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(notInit, " "))
	}
	if s.Phase == v1.PodSucceeded && len(notInit) > 0 {
		notInit, initReason, initMsg = nil, "PodCompleted", ""
	}
	initCond := cond(v1.PodInitialized, len(notInit) == 0, initReason, initMsg)
	if initReason == "PodCompleted" {
		initCond.Reason = initReason
	}
	return []v1.PodCondition{
		cond(v1.PodReadyToStartContainers, sandboxReady, "", ""),
		initCond,
		cond(v1.PodReady, ready, readyReason, readyMsg),
		cond(v1.ContainersReady, containersReady, cReason, cMsg),
		cond(v1.PodScheduled, true, "", ""),
	}
}

// readinessGates is why the pod's readiness gates keep it not ready (the
// kubelet's messages), "" when every gate's condition is True.
func readinessGates(pod *v1.Pod) string {
	var msgs []string
	for _, g := range pod.Spec.ReadinessGates {
		var found *v1.PodCondition
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == g.ConditionType {
				found = &pod.Status.Conditions[i]
			}
		}
		switch {
		case found == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", g.ConditionType))
		case found.Status != v1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", g.ConditionType, found.Status))
		}
	}
	return strings.Join(msgs, ", ")
}
