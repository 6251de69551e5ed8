// Package eviction is the node's eviction manager, the kubelet's
// (pkg/kubelet/eviction) in one pass every period:
//
//   - Node pressure: the signals memory.available (the root memory
//     cgroup's working set against the machine's memory),
//     nodefs.available and nodefs.inodesFree (the root directory's
//     filesystem), imagefs.available and imagefs.inodesFree (the
//     runtime's image filesystem) and pid.available are compared with the
//     hard and soft thresholds. A threshold met sets the node's
//     MemoryPressure, DiskPressure or PIDPressure condition, kept True for
//     the transition period after it was last met; once a threshold has
//     held for its grace period (none for a hard one) the manager records
//     an EvictionThresholdMet event on the Node, frees node-level disk
//     first (dead containers, then unused images, when the images live
//     on the pressured filesystem), and if the threshold is still met
//     evicts one pod, ranked as the kubelet ranks them, and waits
//     (bounded) for it to be killed. Pods are refused admission under
//     pressure as the kubelet refuses them (Admit).
//   - Local storage (LocalStorageCapacityIsolation): a pod whose emptyDir
//     volume uses more than its sizeLimit, whose ephemeral storage
//     exceeds the sum of its containers' ephemeral-storage limits, or one
//     of whose containers uses more rootfs and logs than its own limit is
//     failed at once; a pass that evicts for local storage evicts nothing
//     for pressure, the kubelet's order.
//
// An evicted pod is killed with the grace period the kubelet gives (1 s
// for a hard threshold and local storage, the pod's own up to
// evictionMaxPodGracePeriod for a soft one) and its status becomes phase
// Failed, reason Evicted, with the kubelet's message and a DisruptionTarget
// condition of reason TerminationByKubelet; a Warning event Evicted says
// the same, and wasmlet_evictions_total counts it by signal. Critical pods
// (static and mirror pods, system-critical priority) are never evicted,
// as the kubelet refuses to.
package eviction

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/wasmlet/wasmlet/host/internal/allocatable"
	"github.com/wasmlet/wasmlet/host/internal/config"
	"github.com/wasmlet/wasmlet/host/internal/worker"
)

// Reason is the status reason and event reason of an evicted pod.
const Reason = "Evicted"

// The kubelet's messages (pkg/kubelet/eviction/helpers.go), trailing
// space included.
const (
	emptyDirMessageFmt                  = "Usage of EmptyDir volume %q exceeds the limit %q. "
	podEphemeralStorageMessageFmt       = "Pod ephemeral local storage usage exceeds the total limit of containers %s. "
	containerEphemeralStorageMessageFmt = "Container %s exceeded its local ephemeral storage limit %q. "
)

// Signal names what an eviction was for: the eviction_signal label of
// wasmlet_evictions_total, the kubelet's signal names.
type Signal = allocatable.Signal

// The local-storage signals.
const (
	// SignalEmptyDirFsLimit: an emptyDir used more than its sizeLimit.
	SignalEmptyDirFsLimit Signal = "emptydirfs.limit"
	// SignalEphemeralPodFsLimit: the pod used more than its containers'
	// summed ephemeral-storage limits.
	SignalEphemeralPodFsLimit Signal = "ephemeralpodfs.limit"
	// SignalEphemeralContainerFsLimit: a container's rootfs and logs used
	// more than its ephemeral-storage limit.
	SignalEphemeralContainerFsLimit Signal = "ephemeralcontainerfs.limit"
)

// systemCriticalPriority is the priority from which a pod is critical
// (scheduling.SystemCriticalPriority, 2×10⁹: system-cluster-critical and
// system-node-critical).
const systemCriticalPriority = 2000000000

// Stats gives the running pods' storage stats (stats.Provider).
type Stats interface {
	// PodStorage is each running pod's containers, volumes and ephemeral
	// storage.
	PodStorage(ctx context.Context) ([]statsapi.PodStats, error)
}

// Pods are the pods the node runs (the pod manager).
type Pods interface {
	// Pods are the pods the sources want on the node.
	Pods() []*v1.Pod
	// PodByUID returns the pod with uid if a source still has it.
	PodByUID(uid types.UID) (*v1.Pod, bool)
}

// Statuses gives the pods' last status (status.Manager).
type Statuses interface {
	// PodStatus is the pod's last recorded status.
	PodStatus(uid types.UID) (v1.PodStatus, bool)
}

// Workers are the pod workers: an eviction is a Terminate with a Failure.
type Workers interface {
	// Update hands a pod to its worker.
	Update(u worker.Update)
	// IsTerminating reports whether the pod is being killed already.
	IsTerminating(uid types.UID) bool
}

// Recorder records Kubernetes Events about pods.
type Recorder interface {
	// Event records an event of eventType about pod.
	Event(pod *v1.Pod, eventType, reason, message string)
}

// Reclaim frees node-level disk before pods are evicted.
type Reclaim struct {
	// Containers removes the dead containers; nil removes none.
	Containers func(ctx context.Context) error
	// Images removes the unused images and returns the bytes freed; nil
	// removes none.
	Images func(ctx context.Context) (int64, error)
}

// MemoryNotifier is the kernel's memory threshold notification
// (nodememory.Notifier).
type MemoryNotifier interface {
	// Set arms it at a usage in bytes, page cache included.
	Set(usageBytes uint64) error
	// Run calls crossed at each crossing until ctx ends.
	Run(ctx context.Context, crossed func())
}

// Config configures a Manager.
type Config struct {
	// Stats reads the pods' storage and memory.
	Stats Stats
	// Pods, Statuses and Workers: the pods, their phases, their workers.
	Pods     Pods
	Statuses Statuses
	Workers  Workers
	// Events records the Evicted events.
	Events Recorder
	// NodeEvent records an event on the Node; nil records none.
	NodeEvent func(eventType, reason, message string)
	// NodeName names the node in the events of its pressure conditions.
	NodeName string
	// Thresholds are the node-pressure thresholds (ParseThresholds); with
	// none only local-storage limits are enforced.
	Thresholds []Threshold
	// Signals reads the node-pressure signals; required with Thresholds.
	Signals Signals
	// Reclaim frees node-level disk under disk pressure.
	Reclaim Reclaim
	// MaxPodGracePeriod is the most seconds a pod evicted for a soft
	// threshold gets to stop (evictionMaxPodGracePeriod).
	MaxPodGracePeriod int64
	// PressureTransitionPeriod is how long a condition stays True after
	// its threshold was last met; 0 drops it at the first pass without.
	PressureTransitionPeriod time.Duration
	// Notifier, with a memory.available threshold, has the kernel start a
	// pass when the node's memory crosses it; MemoryUsage gives the
	// reading it is armed from: usage, page cache included, and working
	// set, in bytes. Nil: the period alone.
	Notifier    MemoryNotifier
	MemoryUsage func() (capacity, usage, workingSet uint64, err error)
	// Period is the monitoring period; 0 means 10 s, the kubelet's.
	Period time.Duration
	// CleanupTimeout bounds the wait for an evicted pod to be killed
	// (0: 30 s), polled every CleanupPoll (0: 1 s), the kubelet's.
	CleanupTimeout, CleanupPoll time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Logger receives evictions and refusals; nil discards.
	Logger hclog.Logger
	// Registerer receives wasmlet_evictions_total; nil registers nothing.
	Registerer prometheus.Registerer
}

// Manager evicts pods under node pressure and over their local-storage
// limits. Build it with New, run it with Run.
type Manager struct {
	cfg       Config
	log       hclog.Logger
	evictions *prometheus.CounterVec
	wake      chan struct{} // a pass now (the memory notifier)

	mu      sync.Mutex
	refused map[types.UID]bool // critical pods over a limit, logged once
	p       pressure
}

// New checks cfg and registers the eviction counter.
func New(cfg Config) (*Manager, error) {
	if cfg.Stats == nil || cfg.Pods == nil || cfg.Statuses == nil || cfg.Workers == nil || cfg.Events == nil {
		return nil, errors.New("eviction: Stats, Pods, Statuses, Workers and Events are required")
	}
	if len(cfg.Thresholds) > 0 && cfg.Signals == nil {
		return nil, errors.New("eviction: Signals is required with thresholds")
	}
	if cfg.Period <= 0 {
		cfg.Period = 10 * time.Second
	}
	if cfg.CleanupTimeout <= 0 {
		cfg.CleanupTimeout = 30 * time.Second
	}
	if cfg.CleanupPoll <= 0 {
		cfg.CleanupPoll = time.Second
	}
	if cfg.NodeEvent == nil {
		cfg.NodeEvent = func(string, string, string) {}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	m := &Manager{
		cfg: cfg, log: cfg.Logger, refused: map[types.UID]bool{}, wake: make(chan struct{}, 1),
		p: pressure{firstObserved: map[key]time.Time{}, lastObserved: map[v1.NodeConditionType]time.Time{}},
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmlet_evictions_total",
			Help: "Pods evicted by the node, by eviction signal (the kubelet's evictions counter).",
		}, []string{"eviction_signal"}),
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(m.evictions); err != nil {
			return nil, fmt.Errorf("eviction: register metrics: %w", err)
		}
	}
	return m, nil
}

// Run makes a pass at once, then every Period and whenever the memory
// notifier fires, until ctx ends. After a pass that evicts a pod it waits
// (bounded) for the pod to be killed before the next.
func (m *Manager) Run(ctx context.Context) error {
	if m.cfg.Notifier != nil && m.memoryThreshold() != nil {
		go m.cfg.Notifier.Run(ctx, func() {
			m.log.Info("eviction: the kernel signalled memory.available crossing its threshold")
			select {
			case m.wake <- struct{}{}:
			default:
			}
		})
	}
	t := time.NewTicker(m.cfg.Period)
	defer t.Stop()
	for {
		m.armNotifier()
		if pod := m.synchronize(ctx); pod != nil {
			m.waitKilled(ctx, pod)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-m.wake:
		}
	}
}

// memoryThreshold is the hard memory.available threshold, or else the
// first soft one; nil without.
func (m *Manager) memoryThreshold() *Threshold {
	var soft *Threshold
	for i, t := range m.cfg.Thresholds {
		if t.Signal != SignalMemoryAvailable {
			continue
		}
		if t.Hard() {
			return &m.cfg.Thresholds[i]
		}
		if soft == nil {
			soft = &m.cfg.Thresholds[i]
		}
	}
	return soft
}

// armNotifier sets the notifier at the usage at which memory.available
// meets its threshold, as the kubelet arms it: capacity less the
// threshold, plus the page cache the working set leaves out.
func (m *Manager) armNotifier() {
	t := m.memoryThreshold()
	if m.cfg.Notifier == nil || m.cfg.MemoryUsage == nil || t == nil {
		return
	}
	capacity, usage, ws, err := m.cfg.MemoryUsage()
	if err != nil {
		m.log.Warn("eviction: memory not read; the memory notifier keeps its threshold", "error", err)
		return
	}
	q := t.Value.Of(int64(capacity))
	if q < 0 || uint64(q) > capacity {
		return
	}
	at := capacity - uint64(q) + (usage - min(ws, usage))
	if err := m.cfg.Notifier.Set(at); err != nil {
		m.log.Warn("eviction: memory notifier not armed", "error", err)
	}
}

// Eviction is the decision to evict one pod.
type Eviction struct {
	// Signal is the limit the pod broke.
	Signal Signal
	// Message is the kubelet's message for it.
	Message string
}

// synchronize is one pass: it reads the signals and updates the
// pressure conditions, evicts the pods over a local-storage limit, and,
// if none was, acts on the thresholds met. It returns the pod evicted for
// pressure, if any.
func (m *Manager) synchronize(ctx context.Context) *v1.Pod {
	act, obs, observed := m.observe(ctx)
	podStats, err := m.cfg.Stats.PodStorage(ctx)
	if err != nil {
		m.log.Warn("eviction: pod stats not read; retried next period", "error", err)
		return nil
	}
	stats := make(map[types.UID]*statsapi.PodStats, len(podStats))
	for i := range podStats {
		stats[types.UID(podStats[i].PodRef.UID)] = &podStats[i]
	}
	if len(m.localStorage(podStats)) > 0 || !observed || len(act) == 0 {
		return nil
	}
	return m.relieve(ctx, act, obs, stats)
}

// localStorage evicts each active pod over a local-storage limit, in the
// stats' order; it returns the UIDs of the pods it evicted.
func (m *Manager) localStorage(stats []statsapi.PodStats) []types.UID {
	var evicted []types.UID
	live := make(map[types.UID]bool, len(stats))
	for i := range stats {
		ps := &stats[i]
		uid := types.UID(ps.PodRef.UID)
		live[uid] = true
		pod, ok := m.cfg.Pods.PodByUID(uid)
		if !ok || !m.active(pod) {
			continue
		}
		e, over := Decide(pod, ps)
		if !over {
			continue
		}
		if m.evict(pod, e, hardGracePeriod) {
			evicted = append(evicted, uid)
		}
	}
	m.mu.Lock()
	for uid := range m.refused {
		if !live[uid] {
			delete(m.refused, uid)
		}
	}
	m.mu.Unlock()
	return evicted
}

// active reports whether the pod may be evicted now: not in a terminal
// phase and not being killed already (the kubelet's active pods).
func (m *Manager) active(pod *v1.Pod) bool {
	if pod.DeletionTimestamp != nil || m.cfg.Workers.IsTerminating(pod.UID) {
		return false
	}
	st, ok := m.cfg.Statuses.PodStatus(pod.UID)
	return !ok || (st.Phase != v1.PodFailed && st.Phase != v1.PodSucceeded)
}

// evict kills the pod with the grace period (seconds) and the Evicted
// status and DisruptionTarget condition, the kubelet's evictPod; a
// critical pod is refused (logged once while it runs) and false returned.
func (m *Manager) evict(pod *v1.Pod, e Eviction, grace int64) bool {
	name := pod.Namespace + "/" + pod.Name
	if IsCritical(pod) {
		m.mu.Lock()
		first := !m.refused[pod.UID]
		m.refused[pod.UID] = true
		m.mu.Unlock()
		if first {
			m.log.Error("eviction: cannot evict a critical pod (static, mirror or system-critical priority)", "pod", name, "uid", pod.UID, "signal", e.Signal, "message", e.Message)
		}
		return false
	}
	m.log.Warn("event: pod evicted", "event", Reason, "pod", name, "uid", pod.UID, "signal", e.Signal, "message", e.Message)
	m.cfg.Events.Event(pod, v1.EventTypeWarning, Reason, e.Message)
	m.cfg.Workers.Update(worker.Update{
		Pod: pod, Kind: worker.Terminate, GracePeriodOverride: &grace,
		Failure: &worker.Failure{Reason: Reason, Message: e.Message, Condition: &v1.PodCondition{
			Type: v1.DisruptionTarget, Status: v1.ConditionTrue, ObservedGeneration: pod.Generation,
			Reason: v1.PodReasonTerminationByKubelet, Message: e.Message,
		}},
	})
	m.evictions.WithLabelValues(string(e.Signal)).Inc()
	return true
}

// IsCritical reports whether the kubelet would refuse to evict the pod
// (kubelettypes.IsCriticalPod): a static pod, a mirror pod, or a pod of
// system-critical priority.
func IsCritical(pod *v1.Pod) bool {
	return config.IsStatic(pod) || config.IsMirror(pod) || (pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority)
}

// Decide is the kubelet's localStorageEviction for one pod and its stats,
// checked in the kubelet's order: an emptyDir over its sizeLimit, then
// the pod over the sum of its containers' limits, then a container over
// its own limit (rootfs and logs; the node has no dedicated image
// filesystem). It returns the first limit broken, if any.
func Decide(pod *v1.Pod, ps *statsapi.PodStats) (Eviction, bool) {
	if e, ok := emptyDirOver(pod, ps); ok {
		return e, true
	}
	if e, ok := podOver(pod, ps); ok {
		return e, true
	}
	return containerOver(pod, ps)
}

func emptyDirOver(pod *v1.Pod, ps *statsapi.PodStats) (Eviction, bool) {
	used := map[string]*resource.Quantity{}
	for _, v := range ps.VolumeStats {
		if v.UsedBytes != nil {
			used[v.Name] = resource.NewQuantity(int64(*v.UsedBytes), resource.BinarySI)
		}
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.EmptyDir == nil {
			continue
		}
		size, u := v.EmptyDir.SizeLimit, used[v.Name]
		if u != nil && size != nil && size.Sign() == 1 && u.Cmp(*size) > 0 {
			return Eviction{SignalEmptyDirFsLimit, fmt.Sprintf(emptyDirMessageFmt, v.Name, size.String())}, true
		}
	}
	return Eviction{}, false
}

func podOver(pod *v1.Pod, ps *statsapi.PodStats) (Eviction, bool) {
	limit, found := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})[v1.ResourceEphemeralStorage]
	if !found {
		return Eviction{}, false
	}
	used := resource.Quantity{}
	if ps.EphemeralStorage != nil && ps.EphemeralStorage.UsedBytes != nil {
		used = *resource.NewQuantity(int64(*ps.EphemeralStorage.UsedBytes), resource.BinarySI)
	}
	if used.Cmp(limit) > 0 {
		return Eviction{SignalEphemeralPodFsLimit, fmt.Sprintf(podEphemeralStorageMessageFmt, limit.String())}, true
	}
	return Eviction{}, false
}

func containerOver(pod *v1.Pod, ps *statsapi.PodStats) (Eviction, bool) {
	limits := map[string]*resource.Quantity{}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if l := c.Resources.Limits.StorageEphemeral(); l != nil && l.Value() != 0 {
			limits[c.Name] = l
		}
	}
	for _, cs := range ps.Containers {
		limit, ok := limits[cs.Name]
		if !ok {
			continue
		}
		used := used(cs.Logs) + used(cs.Rootfs)
		if limit.Cmp(*resource.NewQuantity(int64(used), resource.BinarySI)) < 0 {
			return Eviction{SignalEphemeralContainerFsLimit, fmt.Sprintf(containerEphemeralStorageMessageFmt, cs.Name, limit.String())}, true
		}
	}
	return Eviction{}, false
}

// used is a filesystem's used bytes, 0 when unknown.
func used(fs *statsapi.FsStats) uint64 {
	if fs == nil || fs.UsedBytes == nil {
		return 0
	}
	return *fs.UsedBytes
}
