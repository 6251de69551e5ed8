// Package podsync is what a pod worker does with a pod, the kubelet's
// SyncPod and SyncTerminatingPod: bring a pod to its spec (status from the
// newest runtime state, runtime.SyncPod, status again when anything was
// done) or stop it within its grace period, and observe the pod start
// latency.
package podsync

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/wasmlet/wasmlet/host/internal/config"
	"github.com/wasmlet/wasmlet/host/internal/container"
	"github.com/wasmlet/wasmlet/host/internal/pacer"
	"github.com/wasmlet/wasmlet/host/internal/podstate"
	"github.com/wasmlet/wasmlet/host/internal/status"
	"github.com/wasmlet/wasmlet/host/internal/worker"
)

// Runtime is the part of the runtime manager a sync uses.
type Runtime interface {
	// Name is the runtime's name, the scheme of container IDs.
	Name() string
	// SyncPod brings the pod's sandbox and containers to its spec.
	SyncPod(ctx context.Context, pod *v1.Pod, status *container.PodStatus, backOff *flowcontrol.Backoff) container.SyncResult
	// KillPod stops the pod's containers and sandbox.
	KillPod(ctx context.Context, pod *v1.Pod, status *container.PodStatus, gracePeriodOverride *int64) error
	// GetPodStatus reads the pod's state from the runtime.
	GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*container.PodStatus, error)
	// WaitingReason is the reason of a container's last failed start.
	WaitingReason(uid types.UID, container string) (reason, message string, ok bool)
}

// Cache is the PLEG's cache of runtime pod states.
type Cache interface {
	// GetNewerThan blocks until the pod's state is newer than t.
	GetNewerThan(ctx context.Context, uid types.UID, t time.Time) (*container.PodStatus, error)
	// Set records the pod's state as of t.
	Set(uid types.UID, s *container.PodStatus, err error, t time.Time)
}

// Statuses keeps the latest API status of every pod.
type Statuses interface {
	// SetPodStatus records the pod's status.
	SetPodStatus(pod *v1.Pod, s v1.PodStatus) bool
	// PodStatus is the pod's last recorded status.
	PodStatus(uid types.UID) (v1.PodStatus, bool)
}

// Pods are the pods the sources want on the node.
type Pods interface {
	// PodByUID returns the pod with uid if a source still has it.
	PodByUID(uid types.UID) (*v1.Pod, bool)
}

// Volumes sets up a pod's volumes (volumes.Manager).
type Volumes interface {
	// Mount sets up every volume of the pod, or brings it up to date.
	Mount(ctx context.Context, pod *v1.Pod) error
	// Unmount tears down the volumes of a pod whose containers are gone.
	Unmount(pod *v1.Pod) error
}

// Probes runs the containers' probes (prober.Manager).
type Probes interface {
	status.Probes
	// UpdatePod starts the workers of the pod's probes.
	UpdatePod(pod *v1.Pod)
	// RemovePod stops them.
	RemovePod(uid types.UID)
}

// Recorder records Kubernetes Events about pods.
type Recorder interface {
	// Event records an event of eventType about pod.
	Event(pod *v1.Pod, eventType, reason, message string)
}

// Allocation decides pods' resizes and keeps their allocations
// (allocation.Manager).
type Allocation interface {
	status.Resources
	// Resize decides the resize the pod's spec asks for, if any, and
	// returns the pod at its allocation, the one to run.
	Resize(ctx context.Context, pod *v1.Pod) *v1.Pod
	// Done is told the outcome of the sync's resize (err) and the pod's
	// state read back from the runtime.
	Done(pod *v1.Pod, rs *container.PodStatus, err error)
}

// Config configures a Syncer.
type Config struct {
	// Runtime runs the pods.
	Runtime Runtime
	// Cache is the PLEG's cache a sync reads the pod's state from.
	Cache Cache
	// Statuses receives every status a sync generates.
	Statuses Statuses
	// Pods tells whether a source still has a pod.
	Pods Pods
	// Records is the per-pod bookkeeping: last sync, first seen, started.
	Records *podstate.Store
	// BackOff is the crash-loop and image-pull back-off shared by all pods.
	BackOff *flowcontrol.Backoff
	// HostIPs are the node's internal IPs, for the pod status.
	HostIPs []string
	// Volumes, when set, sets up a pod's volumes before its containers
	// are made; a failure is a FailedMount event and a failed sync.
	Volumes Volumes
	// Probes, when set, probes the pod's containers while it runs; its
	// results make the containers' Started and Ready.
	Probes Probes
	// Events records the Killing and Started events.
	Events Recorder
	// Terminated, when set, is told of every pod a worker finished
	// terminating (the status sync may then delete it from the API server).
	Terminated func(pod *v1.Pod)
	// Registerer receives wasmlet_pod_start_duration_seconds.
	Registerer prometheus.Registerer
	// Allocation, when set, decides resizes: the runtime runs each pod at
	// its allocation, and the status shows the resize conditions and the
	// containers' allocated and actual resources.
	Allocation Allocation
	// Pacer, when set, paces pod starts: a pod with nothing running waits
	// for a slot before its sandbox and containers are made, and holds it
	// until they are.
	Pacer *pacer.Pacer
}

// Syncer syncs and terminates pods for the pod workers.
type Syncer struct {
	cfg      Config
	podStart prometheus.Histogram
}

// New checks cfg and registers the syncer's metric.
func New(cfg Config) (*Syncer, error) {
	if cfg.Runtime == nil || cfg.Cache == nil || cfg.Statuses == nil || cfg.Pods == nil || cfg.Records == nil || cfg.Events == nil {
		return nil, fmt.Errorf("podsync: Runtime, Cache, Statuses, Pods, Records and Events are required")
	}
	s := &Syncer{cfg: cfg, podStart: prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "wasmlet_pod_start_duration_seconds",
		Help:    "Time from the agent first seeing a pod to all its containers running.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
	})}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(s.podStart); err != nil {
			return nil, fmt.Errorf("podsync: register metrics: %w", err)
		}
	}
	return s, nil
}

// InitialStatus is the status of a pod just admitted: Pending with nothing
// in the runtime, or — for a pod from the API server that already has a
// status (after an agent restart) — that status, kept until the first
// sync so no stale Pending is pushed.
func (s *Syncer) InitialStatus(p *v1.Pod) v1.PodStatus {
	if p.Status.Phase != "" && !config.IsStatic(p) {
		return *p.Status.DeepCopy()
	}
	return s.generate(p, nil, nil)
}

// Sync is the pod workers' sync function: Terminate kills the pod, Sync
// brings it to its spec.
func (s *Syncer) Sync(ctx context.Context, w worker.Work) error {
	if w.Kind == worker.Terminate {
		return s.terminate(ctx, w.Pod, w.GracePeriod, w.Failure)
	}
	return s.sync(ctx, w.Pod)
}

// sync: status → runtime.SyncPod (hooks and directories are the
// runtime's) → status again if anything changed.
func (s *Syncer) sync(ctx context.Context, p *v1.Pod) error {
	// A status newer than the last sync: after a restart this waits for
	// the first relist, so running containers are seen, not recreated.
	rs, err := s.cfg.Cache.GetNewerThan(ctx, p.UID, s.cfg.Records.LastSync(p.UID))
	if err != nil {
		return err
	}
	api := s.generate(p, rs, s.previous(p.UID))
	if status.PastActiveDeadline(p, &api, time.Now()) {
		// The kubelet's active deadline handler: the pod fails and is
		// stopped with its own grace period.
		api.Phase, api.Reason, api.Message = v1.PodFailed, status.ReasonDeadlineExceeded, status.MessageDeadlineExceeded
		s.cfg.Events.Event(p, v1.EventTypeNormal, status.ReasonDeadlineExceeded, api.Message)
	}
	defer func() { s.cfg.Records.Synced(p.UID, time.Now()) }()
	if api.Phase == v1.PodSucceeded || api.Phase == v1.PodFailed {
		// A pod in a terminal phase only gets its remains stopped (its
		// sidecars, say), and then its volumes torn down, as the
		// kubelet's.
		if rs.Running() {
			if err := s.stopRemains(ctx, p, rs, api); err != nil {
				return err
			}
		} else {
			s.cfg.Statuses.SetPodStatus(p, api)
		}
		if s.cfg.Volumes != nil {
			return s.cfg.Volumes.Unmount(p)
		}
		return nil
	}
	run := p
	if s.cfg.Allocation != nil {
		// The resize is decided before the first status of this sync is
		// recorded: a status carries the pod's generation as observed, so
		// it must carry that generation's resize conditions and
		// allocation too. Otherwise a client sees the new generation
		// observed with no resize in progress and the old resources (the
		// kubelet decides a resize as the pod update arrives, before its
		// sync writes a status).
		run = s.cfg.Allocation.Resize(ctx, p)
		api = s.generate(p, rs, s.previous(p.UID))
	}
	s.cfg.Statuses.SetPodStatus(p, api)
	if s.cfg.Volumes != nil {
		if err := s.cfg.Volumes.Mount(ctx, p); err != nil {
			s.cfg.Events.Event(p, v1.EventTypeWarning, "FailedMount", err.Error())
			return fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	var slot *pacer.Slot
	if s.cfg.Pacer != nil && !rs.Running() {
		if slot, err = s.cfg.Pacer.Acquire(ctx); err != nil {
			return err
		}
	}
	res := s.cfg.Runtime.SyncPod(ctx, run, rs, s.cfg.BackOff)
	slot.Done(res.Error() == nil)
	s.stepEvents(p, res)
	if s.cfg.Probes != nil {
		s.cfg.Probes.UpdatePod(p)
	}
	after := rs
	if len(res.Steps) > 0 {
		// Read the pod back at once, so its status shows what was just done
		// without waiting for the next relist.
		if fresh, ok := s.readBack(ctx, p); ok {
			after = fresh
		}
	}
	if s.cfg.Allocation != nil {
		s.cfg.Allocation.Done(p, after, resizeError(res))
	}
	if after != rs || s.cfg.Allocation != nil {
		api = s.generate(p, after, &api)
		s.cfg.Statuses.SetPodStatus(p, api)
	}
	s.observeStart(p, &api)
	return res.Error()
}

// resizeError is the error of the sync's in-place resize, nil when it
// made none or it succeeded.
func resizeError(res container.SyncResult) error {
	for _, st := range res.Steps {
		if st.Action == "ResizePod" && st.Err != nil {
			return errors.New(st.Message)
		}
	}
	return nil
}

// stopRemains stops what still runs of a pod whose phase became terminal
// (final). Until they are stopped the pod keeps the phase it had, as the
// kubelet reports a terminal phase only once none of the pod's containers
// can run (its status manager's mergePodStatus): a client that sees the
// phase then sees every container's end too. The status after the stop is
// final's phase with the containers' ends.
func (s *Syncer) stopRemains(ctx context.Context, p *v1.Pod, rs *container.PodStatus, final v1.PodStatus) error {
	held := final
	held.Phase, held.Reason, held.Message = v1.PodPending, "", ""
	if prev := s.previous(p.UID); prev != nil {
		held.Phase, held.Reason, held.Message = prev.Phase, prev.Reason, prev.Message
	}
	s.cfg.Statuses.SetPodStatus(p, held)
	if err := s.cfg.Runtime.KillPod(ctx, p, rs, nil); err != nil {
		return err
	}
	if fresh, ok := s.readBack(ctx, p); ok {
		phase, reason, message := final.Phase, final.Reason, final.Message
		final = s.generateWith(p, fresh, &held, !config.IsStatic(p))
		final.Phase, final.Reason, final.Message = phase, reason, message
	}
	s.cfg.Statuses.SetPodStatus(p, final)
	return nil
}

// stepEvents records the kubelet's events for failed steps:
// "FailedCreatePodSandBox" when the pod's sandbox could not be made (an
// unknown RuntimeClass, a runtime error), "Failed" ("Error: <message>")
// when a container could not be made or run, "BackOff" while it is in
// crash-loop or image-pull back-off.
func (s *Syncer) stepEvents(p *v1.Pod, res container.SyncResult) {
	for _, st := range res.Steps {
		switch {
		case st.Err == nil:
		case errors.Is(st.Err, container.ErrCrashLoopBackOff):
			s.cfg.Events.Event(p, v1.EventTypeWarning, "BackOff", "Back-off restarting failed container "+st.Target+" in pod "+p.Name+"_"+p.Namespace+"("+string(p.UID)+")")
		case errors.Is(st.Err, container.ErrImagePullBackOff):
			s.cfg.Events.Event(p, v1.EventTypeNormal, "BackOff", st.Message)
		case st.Action == "CreatePodSandbox":
			s.cfg.Events.Event(p, v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: "+st.Message)
		case st.Action == "StartContainer":
			s.cfg.Events.Event(p, v1.EventTypeWarning, "Failed", "Error: "+st.Message)
		}
	}
}

// observeStart records the pod start latency once all containers run.
func (s *Syncer) observeStart(p *v1.Pod, st *v1.PodStatus) {
	if len(st.ContainerStatuses) == 0 {
		return
	}
	for _, c := range st.ContainerStatuses {
		if c.State.Running == nil {
			return
		}
	}
	seen, first := s.cfg.Records.Started(p.UID)
	if !first {
		return
	}
	if !seen.IsZero() {
		s.podStart.Observe(time.Since(seen).Seconds())
	}
	s.cfg.Events.Event(p, v1.EventTypeNormal, "Started", "all containers running")
}

// terminate kills the pod with the worker's grace period (the pod's own
// unless an override shortened it) and records its final status. With a
// failure (an eviction) the pod's status becomes phase Failed with its
// reason and message first, as the kubelet's syncTerminatingPod applies
// the kill's status function before it stops anything; a terminal phase
// is never left, so the status stays so.
func (s *Syncer) terminate(ctx context.Context, p *v1.Pod, grace time.Duration, failure *worker.Failure) error {
	rs, err := s.cfg.Runtime.GetPodStatus(ctx, p.UID, p.Name, p.Namespace)
	if err != nil {
		return err
	}
	if failure != nil {
		st := s.generate(p, rs, s.previous(p.UID))
		st.Phase, st.Reason, st.Message = v1.PodFailed, failure.Reason, failure.Message
		if c := failure.Condition; c != nil && !hasCondition(st.Conditions, c.Type) {
			cond := *c
			cond.LastTransitionTime = metav1.Now()
			st.Conditions = append(st.Conditions, cond)
		}
		s.cfg.Statuses.SetPodStatus(p, st)
	}
	if rs.Running() {
		s.cfg.Events.Event(p, v1.EventTypeNormal, "Killing", fmt.Sprintf("stopping the pod's containers with a %v grace period", grace))
	}
	if s.cfg.Probes != nil {
		s.cfg.Probes.RemovePod(p.UID)
	}
	var override *int64
	if grace != worker.GracePeriod(p, nil) {
		sec := int64(grace / time.Second)
		override = &sec
	}
	if err := s.cfg.Runtime.KillPod(ctx, p, rs, override); err != nil {
		return fmt.Errorf("kill pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	// Its containers gone, the pod's volumes go too, as the kubelet
	// unmounts a terminated pod's (a memory-backed emptyDir frees its RAM).
	if s.cfg.Volumes != nil {
		if err := s.cfg.Volumes.Unmount(p); err != nil {
			return err
		}
	}
	if _, ok := s.cfg.Pods.PodByUID(p.UID); ok {
		if fresh, ok := s.readBack(ctx, p); ok {
			// The pod is stopped for good: its final status is terminal
			// (a static pod's is left to its restart policy, as the
			// kubelet leaves it).
			s.cfg.Statuses.SetPodStatus(p, s.generateWith(p, fresh, s.previous(p.UID), !config.IsStatic(p)))
		}
	}
	return nil
}

// Terminated is the pod workers' callback once a pod is dead: the cluster
// is told, and a pod no source has any more is forgotten.
func (s *Syncer) Terminated(p *v1.Pod) {
	if s.cfg.Terminated != nil {
		s.cfg.Terminated(p)
	}
	if _, ok := s.cfg.Pods.PodByUID(p.UID); !ok {
		s.cfg.Records.Forget(p.UID)
	}
}

// readBack reads the pod's runtime status right after the agent changed
// it and puts it in the PLEG cache as of when it was read; false when the
// read failed (the next relist reads it).
func (s *Syncer) readBack(ctx context.Context, p *v1.Pod) (*container.PodStatus, bool) {
	fresh, err := s.cfg.Runtime.GetPodStatus(ctx, p.UID, p.Name, p.Namespace)
	if err != nil {
		return nil, false
	}
	s.cfg.Cache.Set(p.UID, fresh, nil, fresh.Timestamp)
	return fresh, true
}

func (s *Syncer) generate(p *v1.Pod, rs *container.PodStatus, prev *v1.PodStatus) v1.PodStatus {
	return s.generateWith(p, rs, prev, false)
}

// generateWith is generate for a pod the workers stopped for good when
// terminal is true (status.Input.Terminal).
func (s *Syncer) generateWith(p *v1.Pod, rs *container.PodStatus, prev *v1.PodStatus, terminal bool) v1.PodStatus {
	in := status.Input{Pod: p, Runtime: rs, Previous: prev, RuntimeName: s.cfg.Runtime.Name(), HostIPs: s.cfg.HostIPs, Waiting: s.cfg.Runtime.WaitingReason, Terminal: terminal}
	if r, ok := s.cfg.Runtime.(interface {
		RecursiveReadOnly(*v1.Pod, v1.VolumeMount) (bool, error)
	}); ok {
		in.RecursiveReadOnly = r.RecursiveReadOnly
	}
	if s.cfg.Probes != nil {
		in.Probes = s.cfg.Probes
	}
	if s.cfg.Allocation != nil {
		in.Resources = s.cfg.Allocation
	}
	return status.Generate(in)
}

// hasCondition reports whether conds has one of type t (a retried kill
// finds the DisruptionTarget it set before).
func hasCondition(conds []v1.PodCondition, t v1.PodConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return true
		}
	}
	return false
}

// previous is the pod's last generated status, nil when it has none.
func (s *Syncer) previous(uid types.UID) *v1.PodStatus {
	if st, ok := s.cfg.Statuses.PodStatus(uid); ok {
		return &st
	}
	return nil
}
