package status

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// SyncerConfig configures NewSyncer.
type SyncerConfig struct {
	// Client talks to the API server with the node's credentials; its
	// rest.Config QPS and Burst bound the request rate.
	Client kubernetes.Interface
	// Statuses is the status manager whose statuses are pushed.
	Statuses *Manager
	// APIPod returns the API server's object for a pod the agent runs, as
	// the API source last saw it: the pod itself, or for a static pod its
	// mirror pod (the pod manager's static ↔ mirror translation). false
	// means there is none (yet): nothing is pushed for the pod.
	APIPod func(pod *v1.Pod) (*v1.Pod, bool)
	// ResyncInterval is the period at which every pod's status is compared
	// with the API server's copy and pushed again if they differ (the
	// kubelet's status manager: 10 s).
	ResyncInterval time.Duration
	// Logger receives the syncer's logs; nil discards.
	Logger hclog.Logger
}

// Syncer pushes the pods' statuses from a Manager to the API server's pod
// status subresource, as the kubelet's status manager does: at once when a
// status changes, and on a periodic resync when the API server's copy
// differs. The patch is a strategic merge patch of the whole status with the
// pod's UID as a precondition: conditions merge by type, so conditions other
// writers own are kept, and a pod recreated under the same name is never
// written with another pod's status. A pod being deleted (deletionTimestamp)
// is deleted with grace period 0 and a UID precondition once PodTerminated
// says its containers are dead.
type Syncer struct {
	cfg SyncerConfig
	log hclog.Logger

	mu         sync.Mutex
	synced     map[types.UID]synced // what was pushed (or found equal), by pod UID
	terminated map[types.UID]bool
	deleted    map[types.UID]bool
	kick       chan struct{}
}

// NewSyncer returns a Syncer for cfg; Run drives it.
func NewSyncer(cfg SyncerConfig) *Syncer {
	if cfg.ResyncInterval <= 0 {
		cfg.ResyncInterval = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Syncer{
		cfg: cfg, log: cfg.Logger,
		synced:     map[types.UID]synced{},
		terminated: map[types.UID]bool{},
		deleted:    map[types.UID]bool{},
		kick:       make(chan struct{}, 1),
	}
}

// PodTerminated tells the syncer the pod's containers are dead, so a pod
// with a deletion timestamp may now be deleted from the API server.
func (s *Syncer) PodTerminated(uid types.UID) {
	s.mu.Lock()
	s.terminated[uid] = true
	s.mu.Unlock()
	s.Kick()
}

// Kick asks for a pass over every pod now (a mirror pod appeared, say).
func (s *Syncer) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Run pushes statuses until ctx is done.
func (s *Syncer) Run(ctx context.Context) error {
	t := time.NewTicker(s.cfg.ResyncInterval)
	defer t.Stop()
	for {
		resync := false
		select {
		case <-ctx.Done():
			return nil
		case <-s.cfg.Statuses.changed:
		case <-s.kick:
		case <-t.C:
			resync = true
		}
		s.pass(ctx, resync)
	}
}

// synced is the status version pushed to which API object (a static pod's
// mirror is replaced with a new UID when a user deletes it).
type synced struct {
	version uint64
	target  types.UID
}

type pending struct {
	pod     *v1.Pod
	status  v1.PodStatus
	version uint64
}

// parallel is how many pods' requests a pass has in flight at once; the
// client's QPS and burst still bound the rate. One at a time, a burst of
// 30 new pods waited ~0.7 s for the first round of patches on a loaded
// 2-core machine.
const parallel = 8

// pass pushes every status not yet pushed (every status that differs from
// the API server's copy when resync is set) and deletes terminated pods.
func (s *Syncer) pass(ctx context.Context, resync bool) {
	m := s.cfg.Statuses
	m.mu.RLock()
	all := make([]pending, 0, len(m.pods))
	for _, e := range m.pods {
		all = append(all, pending{pod: e.pod, version: e.version})
	}
	m.mu.RUnlock()
	// Targets are looked up without the status lock (they take the pod
	// manager's).
	targets := make([]types.UID, len(all))
	for i, w := range all {
		if api, ok := s.cfg.APIPod(w.pod); ok {
			targets[i] = api.UID
		}
	}
	var work []types.UID
	live := make(map[types.UID]bool, len(all))
	s.mu.Lock()
	for i, w := range all {
		uid := w.pod.UID
		live[uid] = true
		if targets[i] == "" || s.deleted[uid] {
			continue
		}
		if resync || s.synced[uid] != (synced{w.version, targets[i]}) || (s.terminated[uid] && w.pod.DeletionTimestamp != nil) {
			work = append(work, uid)
		}
	}
	for uid := range s.synced {
		if !live[uid] {
			delete(s.synced, uid)
			delete(s.terminated, uid)
			delete(s.deleted, uid)
		}
	}
	s.mu.Unlock()
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, uid := range work {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			// The latest status, read now: a pod that went from
			// ContainerCreating to Running meanwhile is pushed once.
			m.mu.RLock()
			e, ok := m.pods[uid]
			var w pending
			if ok {
				w = pending{pod: e.pod, status: e.status, version: e.version}
			}
			m.mu.RUnlock()
			if !ok {
				return
			}
			if err := s.sync(ctx, w); err != nil {
				s.log.Warn("pod status not pushed; retried on the next resync", "pod", w.pod.Namespace+"/"+w.pod.Name, "uid", w.pod.UID, "error", err)
			}
		}()
	}
	wg.Wait()
}

// sync pushes one pod's status if the API server's copy differs, then
// deletes the pod if it is being deleted and terminated.
func (s *Syncer) sync(ctx context.Context, w pending) error {
	api, ok := s.cfg.APIPod(w.pod)
	if !ok {
		return nil // no API object (a static pod whose mirror is not there yet)
	}
	s.mu.Lock()
	gone := s.deleted[w.pod.UID]
	s.mu.Unlock()
	if gone {
		return nil // deleted by us; the watch has not said so yet
	}
	if !sameStatus(api.Status, w.status) {
		if s.log.IsTrace() {
			s.log.Trace("pod status differs from the API server's", "pod", api.Namespace+"/"+api.Name, "diff", diff.Diff(api.Status, w.status))
		}
		patch, err := statusPatch(api, w.status)
		if err != nil {
			return err
		}
		_, err = s.cfg.Client.CoreV1().Pods(api.Namespace).Patch(ctx, api.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		switch {
		case apierrors.IsNotFound(err):
			s.log.Debug("pod gone from the API server; status not pushed", "pod", api.Namespace+"/"+api.Name, "uid", api.UID)
		case err != nil:
			return fmt.Errorf("patch status of %s/%s: %w", api.Namespace, api.Name, err)
		default:
			s.log.Trace("pod status pushed", "pod", api.Namespace+"/"+api.Name, "phase", w.status.Phase)
		}
	}
	s.mu.Lock()
	s.synced[w.pod.UID] = synced{w.version, api.UID}
	del := s.terminated[w.pod.UID] && !s.deleted[w.pod.UID] && w.pod.DeletionTimestamp != nil && api.UID == w.pod.UID
	s.mu.Unlock()
	if !del {
		return nil
	}
	// Grace 0 with the UID as precondition: the object goes now, and never
	// a pod recreated under the same name.
	err := s.cfg.Client.CoreV1().Pods(api.Namespace).Delete(ctx, api.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To(int64(0)),
		Preconditions:      metav1.NewUIDPreconditions(string(api.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete %s/%s: %w", api.Namespace, api.Name, err)
	}
	s.mu.Lock()
	s.deleted[w.pod.UID] = true
	s.mu.Unlock()
	s.log.Debug("pod deleted from the API server", "pod", api.Namespace+"/"+api.Name, "uid", api.UID)
	return nil
}

// statusPatch is the kubelet's status patch: a two-way strategic merge
// patch from the API server's status to ours, so fields we no longer set
// (a condition's reason once it is True) are removed, with the conditions
// of types we do not own kept, and metadata.uid as a precondition (a patch
// that would change the UID fails).
func statusPatch(api *v1.Pod, ours v1.PodStatus) ([]byte, error) {
	merged := ours.DeepCopy()
	owned := ownedConditions(ours.Conditions)
	for _, c := range api.Status.Conditions {
		if !owned[c.Type] {
			merged.Conditions = append(merged.Conditions, c)
		}
	}
	oldData, err := json.Marshal(v1.Pod{Status: api.Status})
	if err != nil {
		return nil, err
	}
	newData, err := json.Marshal(v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: api.UID}, Status: *merged})
	if err != nil {
		return nil, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, v1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("status patch of %s/%s: %w", api.Namespace, api.Name, err)
	}
	return patch, nil
}

// ownedConditions are the condition types the agent's status speaks for:
// those it has, and the resize conditions, which the agent alone sets and
// removes (a resize done takes its condition off the API status).
func ownedConditions(ours []v1.PodCondition) map[v1.PodConditionType]bool {
	owned := map[v1.PodConditionType]bool{v1.PodResizePending: true, v1.PodResizeInProgress: true}
	for _, c := range ours {
		owned[c.Type] = true
	}
	return owned
}

// sameStatus reports whether the API server's status already says what
// ours says: ours as it would read back (times at second precision),
// against theirs restricted to the condition types ours has (other writers'
// conditions are theirs to keep).
func sameStatus(theirs, ours v1.PodStatus) bool {
	b, err := json.Marshal(ours)
	if err != nil {
		return false
	}
	var back v1.PodStatus
	if err := json.Unmarshal(b, &back); err != nil {
		return false
	}
	owned := ownedConditions(back.Conditions)
	t := theirs.DeepCopy()
	t.Conditions = t.Conditions[:0]
	for _, c := range theirs.Conditions {
		if owned[c.Type] {
			t.Conditions = append(t.Conditions, c)
		}
	}
	if len(t.Conditions) == 0 {
		t.Conditions = nil
	}
	if len(back.Conditions) == 0 {
		back.Conditions = nil
	}
	return equality.Semantic.DeepEqual(*t, back)
}
