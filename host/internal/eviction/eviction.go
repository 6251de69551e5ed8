// Package eviction is the node's local-storage eviction, the kubelet's
// eviction manager with LocalStorageCapacityIsolation
// (pkg/kubelet/eviction: localStorageEviction): every period it reads the
// pods' storage stats and fails, at once, a pod whose emptyDir volume uses
// more than its sizeLimit, whose ephemeral storage exceeds the sum of its
// containers' ephemeral-storage limits, or one of whose containers uses
// more rootfs and logs than its own limit. An evicted pod is killed with
// grace period 0 and its status becomes phase Failed, reason Evicted, with
// the kubelet's message; a Warning event Evicted says the same. Critical
// pods (static and mirror pods, system-critical priority) are never
// evicted, as the kubelet refuses to.
//
// Node-pressure eviction (thresholds on the node's memory and disk) is not
// part of it.
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
	"k8s.io/apimachinery/pkg/util/wait"
	resourcehelper "k8s.io/component-helpers/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

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
type Signal string

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

// Config configures a Manager.
type Config struct {
	// Stats reads the pods' storage.
	Stats Stats
	// Pods, Statuses and Workers: the pods, their phases, their workers.
	Pods     Pods
	Statuses Statuses
	Workers  Workers
	// Events records the Evicted events.
	Events Recorder
	// Period is the monitoring period; 0 means 10 s, the kubelet's.
	Period time.Duration
	// Logger receives evictions and refusals; nil discards.
	Logger hclog.Logger
	// Registerer receives wasmlet_evictions_total; nil registers nothing.
	Registerer prometheus.Registerer
}

// Manager evicts pods over their local-storage limits. Build it with New,
// run it with Run.
type Manager struct {
	cfg       Config
	log       hclog.Logger
	evictions *prometheus.CounterVec

	mu      sync.Mutex
	refused map[types.UID]bool // critical pods over a limit, logged once
}

// New checks cfg and registers the eviction counter.
func New(cfg Config) (*Manager, error) {
	if cfg.Stats == nil || cfg.Pods == nil || cfg.Statuses == nil || cfg.Workers == nil || cfg.Events == nil {
		return nil, errors.New("eviction: Stats, Pods, Statuses, Workers and Events are required")
	}
	if cfg.Period <= 0 {
		cfg.Period = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	m := &Manager{
		cfg: cfg, log: cfg.Logger, refused: map[types.UID]bool{},
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

// Run checks the pods at once and then every Period until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	wait.UntilWithContext(ctx, func(ctx context.Context) { m.synchronize(ctx) }, m.cfg.Period)
	return nil
}

// Eviction is the decision to evict one pod.
type Eviction struct {
	// Signal is the limit the pod broke.
	Signal Signal
	// Message is the kubelet's message for it.
	Message string
}

// synchronize reads the pods' stats and evicts each active pod over a
// limit; it returns the UIDs of the pods it evicted.
func (m *Manager) synchronize(ctx context.Context) []types.UID {
	stats, err := m.cfg.Stats.PodStorage(ctx)
	if err != nil {
		m.log.Warn("eviction: pod stats not read; retried next period", "error", err)
		return nil
	}
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
		if m.evict(pod, e) {
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

// evict kills the pod with grace period 0 and the Evicted status, the
// kubelet's evictPod; a critical pod is refused (logged once while it
// runs) and false returned.
func (m *Manager) evict(pod *v1.Pod, e Eviction) bool {
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
	zero := int64(0)
	m.cfg.Workers.Update(worker.Update{
		Pod: pod, Kind: worker.Terminate, GracePeriodOverride: &zero,
		Failure: &worker.Failure{Reason: Reason, Message: e.Message},
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
