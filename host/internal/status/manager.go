package status

import (
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
)

// Manager holds the latest status of every pod by UID, for /pods now and
// for the API server later (the kubelet's status manager without the
// API client). It is safe for concurrent use.
type Manager struct {
	mu   sync.RWMutex
	pods map[types.UID]*entry
	// changed gets a token whenever a status changes (the API sync waits on
	// it, see Syncer).
	changed chan struct{}
}

type entry struct {
	pod     *v1.Pod
	status  v1.PodStatus
	version uint64
}

// NewManager returns an empty Manager.
func NewManager() *Manager {
	return &Manager{pods: map[types.UID]*entry{}, changed: make(chan struct{}, 1)}
}

// SetPodStatus records pod's status. A status equal to the last one is
// ignored (its version does not move); SetPodStatus reports whether the
// status changed.
func (m *Manager) SetPodStatus(pod *v1.Pod, s v1.PodStatus) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.pods[pod.UID]
	if ok && equality.Semantic.DeepEqual(e.status, s) {
		e.pod = pod
		return false
	}
	if !ok {
		e = &entry{}
		m.pods[pod.UID] = e
	}
	e.pod, e.status = pod, s
	e.version++
	select {
	case m.changed <- struct{}{}:
	default:
	}
	return true
}

// PodStatus returns the pod's latest status.
func (m *Manager) PodStatus(uid types.UID) (v1.PodStatus, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.pods[uid]
	if !ok {
		return v1.PodStatus{}, false
	}
	return e.status, true
}

// RemovePod forgets the pod.
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pods, uid)
}

// Pods returns a copy of every pod with its latest status, ordered by
// namespace and name (what /pods serves).
func (m *Manager) Pods() []v1.Pod {
	m.mu.RLock()
	entries := make([]*entry, 0, len(m.pods))
	for _, e := range m.pods {
		entries = append(entries, e)
	}
	// Sort the pointers, not the pods: a v1.Pod is a large value.
	sort.Slice(entries, func(i, j int) bool {
		a, b := entries[i].pod, entries[j].pod
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	out := make([]v1.Pod, len(entries))
	for i, e := range entries {
		out[i] = *e.pod
		out[i].Status = e.status
	}
	m.mu.RUnlock()
	return out
}
