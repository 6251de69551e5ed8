// Package pod is the agent's pod manager, with the kubelet's basicManager
// semantics: the desired pods indexed by UID and by full name, mirror pods
// (the API server's copies of static pods) indexed the same way; a static
// pod and its mirror pair up by full name.
package pod

import (
	"cmp"
	"slices"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmlet/wasmlet/host/internal/config"
)

// Manager stores the pods bound to this node. Create it with New; it is safe
// for concurrent use. The pods it returns are the pointers it was given:
// callers must not modify them.
type Manager struct {
	mu                  sync.RWMutex
	podByUID            map[types.UID]*v1.Pod
	podByFullName       map[string]*v1.Pod
	mirrorPodByUID      map[types.UID]*v1.Pod
	mirrorPodByFullName map[string]*v1.Pod
}

// New returns an empty Manager.
func New() *Manager {
	m := &Manager{}
	m.reset()
	return m
}

func (m *Manager) reset() {
	m.podByUID = map[types.UID]*v1.Pod{}
	m.podByFullName = map[string]*v1.Pod{}
	m.mirrorPodByUID = map[types.UID]*v1.Pod{}
	m.mirrorPodByFullName = map[string]*v1.Pod{}
}

// SetPods replaces every pod and mirror pod with pods.
func (m *Manager) SetPods(pods []*v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reset()
	m.update(pods...)
}

// AddPod adds pod (a regular or a mirror pod); it is UpdatePod.
func (m *Manager) AddPod(pod *v1.Pod) { m.UpdatePod(pod) }

// UpdatePod stores pod, replacing the pod of the same UID.
func (m *Manager) UpdatePod(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.update(pod)
}

func (m *Manager) update(pods ...*v1.Pod) {
	for _, p := range pods {
		fn := config.FullName(p)
		if config.IsMirror(p) {
			m.mirrorPodByUID[p.UID] = p
			m.mirrorPodByFullName[fn] = p
			continue
		}
		if old, ok := m.podByUID[p.UID]; ok && config.FullName(old) != fn {
			delete(m.podByFullName, config.FullName(old))
		}
		m.podByUID[p.UID] = p
		m.podByFullName[fn] = p
	}
}

// RemovePod removes pod (a regular or a mirror pod) from its indexes.
func (m *Manager) RemovePod(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fn := config.FullName(pod)
	if config.IsMirror(pod) {
		delete(m.mirrorPodByUID, pod.UID)
		if cur, ok := m.mirrorPodByFullName[fn]; ok && cur.UID == pod.UID {
			delete(m.mirrorPodByFullName, fn)
		}
		return
	}
	delete(m.podByUID, pod.UID)
	if cur, ok := m.podByFullName[fn]; ok && cur.UID == pod.UID {
		delete(m.podByFullName, fn)
	}
}

// Pods returns the regular (non-mirror) pods, sorted by name and namespace.
func (m *Manager) Pods() []*v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return sorted(m.podByUID)
}

// PodsAndMirrorPods returns the regular pods and the mirror pods, each
// sorted by name and namespace.
func (m *Manager) PodsAndMirrorPods() (pods, mirrorPods []*v1.Pod) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return sorted(m.podByUID), sorted(m.mirrorPodByUID)
}

// PodByUID returns the regular pod of the UID.
func (m *Manager) PodByUID(uid types.UID) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.podByUID[uid]
	return p, ok
}

// PodByFullName returns the regular pod of the full name ("<name>_<namespace>").
func (m *Manager) PodByFullName(fullName string) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.podByFullName[fullName]
	return p, ok
}

// PodByName returns the regular pod of the namespace and name.
func (m *Manager) PodByName(namespace, name string) (*v1.Pod, bool) {
	return m.PodByFullName(name + "_" + namespace)
}

// MirrorPodByPod returns the mirror pod of a static pod.
func (m *Manager) MirrorPodByPod(pod *v1.Pod) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.mirrorPodByFullName[config.FullName(pod)]
	return p, ok
}

// PodByMirrorPod returns the static pod of a mirror pod.
func (m *Manager) PodByMirrorPod(mirror *v1.Pod) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.podByFullName[config.FullName(mirror)]
	return p, ok
}

// OrphanedMirrorPodNames returns the full names of mirror pods whose static
// pod is gone, sorted; the agent deletes them from the API server.
func (m *Manager) OrphanedMirrorPodNames() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var names []string
	for fn := range m.mirrorPodByFullName {
		if _, ok := m.podByFullName[fn]; !ok {
			names = append(names, fn)
		}
	}
	sort.Strings(names)
	return names
}

// IsMirrorPodOf reports whether mirror is the mirror of pod: same name and
// namespace, and the mirror's config.mirror annotation is pod's hash.
func IsMirrorPodOf(mirror, pod *v1.Pod) bool {
	if pod.Name != mirror.Name || pod.Namespace != mirror.Namespace {
		return false
	}
	h, ok := mirror.Annotations[config.AnnotationMirror]
	if !ok {
		return false
	}
	return h == Hash(pod)
}

// Hash is a static pod's config hash: its kubernetes.io/config.hash
// annotation, or its UID when the annotation is missing.
func Hash(pod *v1.Pod) string {
	if h, ok := pod.Annotations[config.AnnotationHash]; ok {
		return h
	}
	return string(pod.UID)
}

// sorted returns the pods ordered by name, namespace and UID.
func sorted(byUID map[types.UID]*v1.Pod) []*v1.Pod {
	out := make([]*v1.Pod, 0, len(byUID))
	for _, p := range byUID {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *v1.Pod) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.UID, b.UID))
	})
	return out
}
