// Package mirror keeps a mirror pod in the API server for every static pod
// (a pod from the file source or a source plugin), as the kubelet's
// mirror_client.go and syncPod do: the mirror is a copy of the static pod
// with the kubernetes.io/config.mirror annotation (the static pod's config
// hash) and an owner reference to the Node (controller true, the Node's
// UID), which is what NodeRestriction lets a node create. A mirror that no
// longer matches its static pod, or that a user deleted, is deleted (grace 0,
// UID precondition) and created again; a mirror whose static pod is gone is
// deleted. As the kubelet, a mirror stays while a static pod of its name
// that started is not yet terminated (removed, or replaced by a changed
// manifest, whose new pod waits to start meanwhile): it goes, or is
// replaced, once that pod's containers are gone. The mirrors come back to the agent through the API pod source
// and are kept in the pod manager, which pairs them with their static pods.
package mirror

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/wasmlet/wasmlet/host/internal/config"
	"github.com/wasmlet/wasmlet/host/internal/pod"
)

// Config configures New.
type Config struct {
	// Client talks to the API server with the node's credentials.
	Client kubernetes.Interface
	// Pods is the pod manager: the static pods, and the mirror pods the API
	// source delivered.
	Pods *pod.Manager
	// Node returns the registered Node (its UID goes in the owner
	// reference); false means not registered yet, and nothing is done.
	Node func() (*v1.Node, bool)
	// SourcesSeen reports whether every pod source has delivered its pods;
	// until then no mirror counts as orphaned (its static pod may still be
	// on its way). Nil means always.
	SourcesSeen func() bool
	// Started returns the static pods started and not yet terminated (the
	// pod workers'): the mirror of a pod among them is kept until it is
	// done, even when a static pod replacing it is waiting. Nil means none.
	Started func() []*v1.Pod
	// Period is how often the mirrors are reconciled besides Kick (1 s).
	Period time.Duration
	// Logger receives the manager's logs; nil discards.
	Logger hclog.Logger
}

// Manager reconciles mirror pods with static pods. Build it with New; Run
// drives it.
type Manager struct {
	cfg  Config
	log  hclog.Logger
	kick chan struct{}

	mu      sync.Mutex
	created map[types.UID]time.Time // static pod UID → when its mirror was created
	deleted map[types.UID]bool      // mirror UIDs deleted, awaiting the watch
}

// New returns a Manager for cfg.
func New(cfg Config) *Manager {
	if cfg.Period <= 0 {
		cfg.Period = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.SourcesSeen == nil {
		cfg.SourcesSeen = func() bool { return true }
	}
	if cfg.Started == nil {
		cfg.Started = func() []*v1.Pod { return nil }
	}
	return &Manager{cfg: cfg, log: cfg.Logger, kick: make(chan struct{}, 1),
		created: map[types.UID]time.Time{}, deleted: map[types.UID]bool{}}
}

// Kick asks for a reconcile now (pods changed).
func (m *Manager) Kick() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Run reconciles on every Kick and every Period until ctx is done.
func (m *Manager) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-m.kick:
		}
		m.Sync(ctx)
	}
}

// pendingFor is how long a created mirror is awaited from the watch before
// it is created again.
const pendingFor = 10 * time.Second

// Sync makes the mirror pods match the static pods once.
func (m *Manager) Sync(ctx context.Context) {
	node, ok := m.cfg.Node()
	if !ok {
		return
	}
	pods, mirrors := m.cfg.Pods.PodsAndMirrorPods()
	now := time.Now()
	// The static pods started and not terminated, by full name: their
	// mirrors are kept until they are done.
	holders := map[string]types.UID{}
	for _, p := range m.cfg.Started() {
		if config.IsStatic(p) {
			holders[config.FullName(p)] = p.UID
		}
	}
	statics := map[types.UID]bool{}
	for _, p := range pods {
		if !config.IsStatic(p) {
			continue
		}
		statics[p.UID] = true
		mp, ok := m.cfg.Pods.MirrorPodByPod(p)
		if ok && mp.DeletionTimestamp == nil && !pod.IsMirrorPodOf(mp, p) {
			if uid, busy := holders[config.FullName(p)]; busy && uid != p.UID {
				continue // the mirror of the pod this one replaces, which is not done yet
			}
		}
		if ok && (mp.DeletionTimestamp != nil || !pod.IsMirrorPodOf(mp, p)) {
			m.delete(ctx, mp, "mirror pod outdated or being deleted")
			ok = false
		}
		if ok {
			m.mu.Lock()
			delete(m.created, p.UID)
			m.mu.Unlock()
			continue
		}
		if p.DeletionTimestamp != nil {
			continue
		}
		m.mu.Lock()
		at, pending := m.created[p.UID]
		m.mu.Unlock()
		if pending && now.Sub(at) < pendingFor {
			continue
		}
		if err := m.create(ctx, p, node); err != nil {
			m.log.Warn("mirror pod not created", "pod", p.Namespace+"/"+p.Name, "error", err)
			continue
		}
		m.mu.Lock()
		m.created[p.UID] = now
		m.mu.Unlock()
	}
	m.mu.Lock()
	for uid := range m.created {
		if !statics[uid] {
			delete(m.created, uid)
		}
	}
	live := map[types.UID]bool{}
	for _, mp := range mirrors {
		live[mp.UID] = true
	}
	for uid := range m.deleted {
		if !live[uid] {
			delete(m.deleted, uid)
		}
	}
	m.mu.Unlock()
	if !m.cfg.SourcesSeen() {
		return
	}
	orphans := map[string]bool{}
	for _, fn := range m.cfg.Pods.OrphanedMirrorPodNames() {
		orphans[fn] = true
	}
	for _, mp := range mirrors {
		fn := config.FullName(mp)
		if _, busy := holders[fn]; orphans[fn] && !busy {
			m.delete(ctx, mp, "static pod gone")
		}
	}
}

// Mirror returns the mirror pod of a static pod for the node: a copy with
// the config.mirror annotation and the Node as controlling owner.
func Mirror(static *v1.Pod, node *v1.Node) *v1.Pod {
	mp := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: static.Name, Namespace: static.Namespace,
			Labels:      static.Labels,
			Annotations: map[string]string{},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true),
			}},
		},
		Spec: *static.Spec.DeepCopy(),
	}
	for k, v := range static.Annotations {
		mp.Annotations[k] = v
	}
	mp.Annotations[config.AnnotationMirror] = pod.Hash(static)
	mp.Spec.NodeName = node.Name
	return mp
}

func (m *Manager) create(ctx context.Context, static *v1.Pod, node *v1.Node) error {
	mp := Mirror(static, node)
	if mp.Namespace == "" {
		mp.Namespace = v1.NamespaceDefault
	}
	got, err := m.cfg.Client.CoreV1().Pods(mp.Namespace).Create(ctx, mp, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Ours from before a restart, or a stale one the watch will show.
		return nil
	}
	if err != nil {
		return fmt.Errorf("create mirror pod %s/%s: %w", mp.Namespace, mp.Name, err)
	}
	m.log.Info("mirror pod created", "pod", got.Namespace+"/"+got.Name, "uid", got.UID, "static_uid", static.UID)
	return nil
}

// delete deletes a mirror pod now (grace 0) if it is still the one of that
// UID.
func (m *Manager) delete(ctx context.Context, mp *v1.Pod, why string) {
	m.mu.Lock()
	done := m.deleted[mp.UID]
	m.deleted[mp.UID] = true
	m.mu.Unlock()
	if done {
		return
	}
	err := m.cfg.Client.CoreV1().Pods(mp.Namespace).Delete(ctx, mp.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To(int64(0)),
		Preconditions:      metav1.NewUIDPreconditions(string(mp.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		m.mu.Lock()
		delete(m.deleted, mp.UID)
		m.mu.Unlock()
		m.log.Warn("mirror pod not deleted", "pod", mp.Namespace+"/"+mp.Name, "uid", mp.UID, "error", err)
		return
	}
	m.log.Info("mirror pod deleted", "pod", mp.Namespace+"/"+mp.Name, "uid", mp.UID, "why", why)
}
