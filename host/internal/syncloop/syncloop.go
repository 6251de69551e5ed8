// Package syncloop is the kubelet's syncLoop: one select over the merged
// pod updates, PLEG events, the sync ticker and housekeeping, and the
// handlers it dispatches to — admission of new pods (a rejected pod gets
// phase Failed and an event), updates, removals, reconciles and resyncs,
// each ending in work for the pod workers.
package syncloop

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmlet/wasmlet/host/internal/admission"
	"github.com/wasmlet/wasmlet/host/internal/config"
	"github.com/wasmlet/wasmlet/host/internal/pleg"
	"github.com/wasmlet/wasmlet/host/internal/podspec"
	"github.com/wasmlet/wasmlet/host/internal/podstate"
	"github.com/wasmlet/wasmlet/host/internal/status"
	"github.com/wasmlet/wasmlet/host/internal/worker"
)

// Pods is the pod manager: the pods the sources want, static and mirror
// pods paired.
type Pods interface {
	// AddPod records a new pod.
	AddPod(pod *v1.Pod)
	// UpdatePod records a changed pod.
	UpdatePod(pod *v1.Pod)
	// RemovePod forgets a pod.
	RemovePod(pod *v1.Pod)
	// Pods are the wanted pods, mirror pods excluded.
	Pods() []*v1.Pod
	// PodByUID returns the pod with uid.
	PodByUID(uid types.UID) (*v1.Pod, bool)
	// PodByMirrorPod returns the static pod a mirror pod mirrors.
	PodByMirrorPod(mirror *v1.Pod) (*v1.Pod, bool)
}

// Statuses keeps the latest API status of every pod.
type Statuses interface {
	// SetPodStatus records the pod's status.
	SetPodStatus(pod *v1.Pod, s v1.PodStatus) bool
	// PodStatus is the pod's last recorded status.
	PodStatus(uid types.UID) (v1.PodStatus, bool)
}

// Admitter decides whether the node runs a pod; *admission.Chain is one.
type Admitter interface {
	// Admit asks every admitter in turn; the first rejection wins.
	Admit(ctx context.Context, attrs admission.Attributes) admission.Result
}

// Workers are the pod workers.
type Workers interface {
	// Update hands a pod to its worker.
	Update(u worker.Update)
	// Waits reports whether the pod, handed to its worker now, would wait
	// to start (a static pod whose full name another static pod holds).
	Waits(pod *v1.Pod) bool
}

// Recorder records Kubernetes Events about pods.
type Recorder interface {
	// Event records an event of eventType about pod.
	Event(pod *v1.Pod, eventType, reason, message string)
}

// Cluster is told what the API server side may need to act on; nil-safe
// implementations do nothing when standalone.
type Cluster interface {
	// Changed is called after each pod update (mirror pods and statuses
	// may need work).
	Changed()
	// Terminated is called for a rejected pod being deleted: nothing runs,
	// so it may be deleted from the API server at once.
	Terminated(pod *v1.Pod)
}

// Config configures a Loop.
type Config struct {
	// Updates is the merged stream of the pod sources.
	Updates <-chan config.PodUpdate
	// Events are the PLEG's lifecycle events.
	Events <-chan pleg.Event
	// ProbeResults, when set, names pods whose probe results changed:
	// each is synced, so its status shows the new readiness.
	ProbeResults <-chan types.UID
	// SeenAllSources gates housekeeping until every source has spoken.
	SeenAllSources func() bool
	// Pods is the pod manager.
	Pods Pods
	// Records is the per-pod bookkeeping (first seen, last sync, rejected).
	Records *podstate.Store
	// Statuses receives a rejected pod's status and an admitted pod's first.
	Statuses Statuses
	// Admit is the admission chain.
	Admit Admitter
	// Node returns this node, for admission.
	Node func() *v1.Node
	// InitialStatus is the status of a pod just admitted.
	InitialStatus func(*v1.Pod) v1.PodStatus
	// Workers run the pods.
	Workers Workers
	// Housekeeping starts a background cleanup pass.
	Housekeeping func(ctx context.Context)
	// Recorder records rejections.
	Recorder Recorder
	// Cluster is told of changes; required (a no-op one when standalone).
	Cluster Cluster
	// SyncFrequency is the period at which every pod is re-synced.
	SyncFrequency time.Duration
	// HousekeepingInterval is the period of housekeeping.
	HousekeepingInterval time.Duration
	// Logger receives the loop's lines.
	Logger hclog.Logger
	// Registerer receives the loop's metrics; nil registers nowhere.
	Registerer prometheus.Registerer
}

// Loop is the sync loop. Build it with New and run it with Run.
type Loop struct {
	cfg            Config
	log            hclog.Logger
	iterations     *prometheus.CounterVec
	rejected       prometheus.Counter
	iterationStart atomic.Int64 // unix nanos of the running iteration, 0 when idle
}

// New checks cfg and registers the loop's metrics.
func New(cfg Config) (*Loop, error) {
	if cfg.Updates == nil || cfg.Events == nil || cfg.Pods == nil || cfg.Records == nil || cfg.Statuses == nil ||
		cfg.Admit == nil || cfg.Node == nil || cfg.InitialStatus == nil || cfg.Workers == nil ||
		cfg.Housekeeping == nil || cfg.SeenAllSources == nil || cfg.Recorder == nil || cfg.Cluster == nil {
		return nil, fmt.Errorf("syncloop: a required Config field is nil")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	l := &Loop{
		cfg: cfg,
		log: cfg.Logger,
		iterations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmlet_sync_loop_iterations_total",
			Help: "Sync loop iterations by what woke the loop (config, pleg, sync, housekeeping).",
		}, []string{"source"}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wasmlet_pods_rejected_total",
			Help: "Pods admission rejected.",
		}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{l.iterations, l.rejected} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("syncloop: register metrics: %w", err)
			}
		}
	}
	return l, nil
}

// Healthy fails when an iteration has been running for over two minutes.
func (l *Loop) Healthy() error {
	if s := l.iterationStart.Load(); s != 0 && time.Since(time.Unix(0, s)) > 2*time.Minute {
		return fmt.Errorf("sync loop stuck for %v", time.Since(time.Unix(0, s)).Round(time.Second))
	}
	return nil
}

// Run runs the loop until ctx ends or the update stream closes.
func (l *Loop) Run(ctx context.Context) error {
	syncTicker := time.NewTicker(time.Second)
	defer syncTicker.Stop()
	hk := time.NewTicker(l.cfg.HousekeepingInterval)
	defer hk.Stop()
	for {
		var src string
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-l.cfg.Updates:
			if !ok {
				return nil
			}
			l.iterationStart.Store(time.Now().UnixNano())
			src = "config"
			l.dispatch(ctx, u)
		case e := <-l.cfg.Events:
			l.iterationStart.Store(time.Now().UnixNano())
			src = "pleg"
			if p, ok := l.cfg.Pods.PodByUID(e.ID); ok {
				l.log.Trace("SyncLoop (PLEG)", "pod", podspec.Name(p), "event", e.Type, "id", e.Data)
				l.syncs([]*v1.Pod{p})
			}
		case uid := <-l.cfg.ProbeResults:
			l.iterationStart.Store(time.Now().UnixNano())
			src = "probe"
			if p, ok := l.cfg.Pods.PodByUID(uid); ok {
				l.syncs([]*v1.Pod{p})
			}
		case <-syncTicker.C:
			l.iterationStart.Store(time.Now().UnixNano())
			src = "sync"
			if due := l.podsToSync(time.Now()); len(due) > 0 {
				l.syncs(due)
			}
		case <-hk.C:
			l.iterationStart.Store(time.Now().UnixNano())
			src = "housekeeping"
			if l.cfg.SeenAllSources() {
				l.cfg.Housekeeping(ctx)
			}
		}
		l.iterations.WithLabelValues(src).Inc()
		l.iterationStart.Store(0)
	}
}

func (l *Loop) dispatch(ctx context.Context, u config.PodUpdate) {
	switch u.Op {
	case config.OpAdd:
		l.log.Debug("SyncLoop (ADD)", "source", u.Source, "pods", podNames(u.Pods))
		l.additions(ctx, u.Pods)
	case config.OpUpdate, config.OpDelete:
		// DELETE is an UPDATE because of graceful deletion.
		l.log.Debug("SyncLoop ("+string(u.Op)+")", "source", u.Source, "pods", podNames(u.Pods))
		l.updates(u.Pods)
	case config.OpRemove:
		l.log.Debug("SyncLoop (REMOVE)", "source", u.Source, "pods", podNames(u.Pods))
		l.removes(u.Pods)
	case config.OpReconcile:
		l.reconcile(u.Pods)
	case config.OpSet:
		l.log.Error("SyncLoop (SET): the merged stream never carries SET; ignored", "source", u.Source)
	}
	l.cfg.Cluster.Changed()
}

// ActivePods returns the pods that hold the node's resources, as the
// kubelet's GetActivePods: the pod manager's regular pods that admission
// did not reject and whose phase is not terminal (Succeeded or Failed).
// Admission counts them, and the pod-resources API lists them.
func (l *Loop) ActivePods() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range l.cfg.Pods.Pods() {
		if l.cfg.Records.Rejected(p.UID) {
			continue
		}
		if s, ok := l.cfg.Statuses.PodStatus(p.UID); ok && (s.Phase == v1.PodSucceeded || s.Phase == v1.PodFailed) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// additions admits new pods (oldest first) and hands the admitted ones to
// their workers; a rejected pod gets phase Failed with the admitter's
// reason and message.
func (l *Loop) additions(ctx context.Context, pods []*v1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool { return pods[i].CreationTimestamp.Before(&pods[j].CreationTimestamp) })
	now := time.Now()
	// The admitted pods, computed once per batch and grown as pods are
	// admitted: recomputing it per pod is quadratic in locks.
	adding := make(map[types.UID]bool, len(pods))
	for _, p := range pods {
		adding[p.UID] = true
	}
	var active []*v1.Pod
	for _, p := range l.ActivePods() {
		if !adding[p.UID] {
			active = append(active, p)
		}
	}
	node := l.cfg.Node()
	for _, p := range pods {
		l.cfg.Pods.AddPod(p)
		if config.IsMirror(p) {
			l.syncStaticOf(p)
			continue
		}
		l.cfg.Records.Seen(p.UID, now)
		r := l.cfg.Admit.Admit(ctx, admission.Attributes{Pod: p, Node: node, Pods: active})
		if !r.Admit {
			l.cfg.Records.Reject(p.UID)
			l.cfg.Statuses.SetPodStatus(p, status.Rejected(p, r.Reason, r.Message))
			l.rejected.Inc()
			l.log.Warn("event: pod rejected", "event", "PodRejected", "pod", podspec.Name(p), "uid", p.UID, "admitter", r.Admitter, "reason", r.Reason, "message", r.Message)
			l.cfg.Recorder.Event(p, v1.EventTypeWarning, r.Reason, r.Message)
			continue
		}
		active = append(active, p)
		// A static pod waiting for its full name gets no status until it
		// starts: its mirror pod, which it shares with the pod it
		// replaces, keeps that pod's status meanwhile.
		if _, ok := l.cfg.Statuses.PodStatus(p.UID); !ok && !l.cfg.Workers.Waits(p) {
			l.cfg.Statuses.SetPodStatus(p, l.cfg.InitialStatus(p))
		}
		l.cfg.Workers.Update(worker.Update{Pod: p, Kind: syncKind(p), Recreate: true})
	}
}

// podsToSync are the pods a sync tick at now syncs, the kubelet's
// getPodsToSync: those whose last sync is SyncFrequency old, and those
// past their activeDeadlineSeconds (the kubelet's active deadline sync
// loop handler), so such a pod is failed within a tick of its deadline.
func (l *Loop) podsToSync(now time.Time) []*v1.Pod {
	pods := l.cfg.Pods.Pods()
	due := l.cfg.Records.Due(pods, now, l.cfg.SyncFrequency)
	var more []*v1.Pod
	for _, p := range pods {
		if p.Spec.ActiveDeadlineSeconds == nil || l.cfg.Records.Rejected(p.UID) {
			continue
		}
		if st, ok := l.cfg.Statuses.PodStatus(p.UID); ok && status.PastActiveDeadline(p, &st, now) {
			more = append(more, p)
		}
	}
	if len(more) == 0 {
		return due
	}
	in := make(map[types.UID]bool, len(due))
	for _, p := range due {
		in[p.UID] = true
	}
	for _, p := range more {
		if !in[p.UID] {
			due = append(due, p)
		}
	}
	return due
}

// syncStaticOf syncs the static pod a mirror pod mirrors.
func (l *Loop) syncStaticOf(mirror *v1.Pod) {
	if p, ok := l.cfg.Pods.PodByMirrorPod(mirror); ok {
		l.syncs([]*v1.Pod{p})
	}
}

// updates hands changed pods to their workers; a pod with a deletion
// timestamp is terminated.
func (l *Loop) updates(pods []*v1.Pod) {
	for _, p := range pods {
		l.cfg.Pods.UpdatePod(p)
		if config.IsMirror(p) {
			l.syncStaticOf(p)
			continue
		}
		if l.cfg.Records.Rejected(p.UID) {
			if p.DeletionTimestamp != nil {
				// Nothing runs: the pod may be deleted from the API server.
				if st, ok := l.cfg.Statuses.PodStatus(p.UID); ok {
					l.cfg.Statuses.SetPodStatus(p, st)
				}
				l.cfg.Cluster.Terminated(p)
			}
			continue
		}
		l.cfg.Workers.Update(worker.Update{Pod: p, Kind: syncKind(p)})
	}
}

// removes forgets pods and has their workers kill them.
func (l *Loop) removes(pods []*v1.Pod) {
	for _, p := range pods {
		l.cfg.Pods.RemovePod(p)
		if config.IsMirror(p) {
			l.syncStaticOf(p)
			continue
		}
		if l.cfg.Records.Rejected(p.UID) {
			l.cfg.Records.Forget(p.UID)
			continue
		}
		l.cfg.Workers.Update(worker.Update{Pod: p, Kind: worker.Terminate})
	}
}

// reconcile records pods of which only the status changed.
func (l *Loop) reconcile(pods []*v1.Pod) {
	var gated []*v1.Pod
	for _, p := range pods {
		l.cfg.Pods.UpdatePod(p)
		if len(p.Spec.ReadinessGates) > 0 {
			gated = append(gated, p)
		}
	}
	// A status change of a pod with readiness gates may flip its Ready
	// condition: sync it now, as the kubelet reconciles pod readiness.
	l.syncs(gated)
}

// syncs asks the pods' workers for a sync (a termination for a pod being
// deleted: a sync would start it again).
func (l *Loop) syncs(pods []*v1.Pod) {
	for _, p := range pods {
		if l.cfg.Records.Rejected(p.UID) {
			continue
		}
		l.cfg.Workers.Update(worker.Update{Pod: p, Kind: syncKind(p)})
	}
}

// syncKind is Terminate for a pod being deleted, else Sync.
func syncKind(p *v1.Pod) worker.Kind {
	if p.DeletionTimestamp != nil {
		return worker.Terminate
	}
	return worker.Sync
}

func podNames(pods []*v1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = podspec.Name(p)
	}
	return out
}
