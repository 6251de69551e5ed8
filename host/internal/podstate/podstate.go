// Package podstate is the agent's own bookkeeping about each pod it has
// been given: one record per pod (when it was first seen, when it was last
// synced, whether its start was observed, whether admission rejected it),
// and the one place that forgets a pod everywhere at once.
package podstate

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Config configures a Store.
type Config struct {
	// OnForget are called, in order, with the UID of every pod Forget
	// drops: the other stores that keep something per pod (statuses, the
	// runtime's waiting reasons, the PLEG cache).
	OnForget []func(types.UID)
}

// Store holds one record per pod. It is safe for concurrent use.
type Store struct {
	onForget []func(types.UID)

	mu   sync.Mutex
	pods map[types.UID]*record
}

// record is what the agent keeps about one pod.
type record struct {
	firstSeen time.Time // when the pod was first handed to admission
	lastSync  time.Time // end of the last sync; zero before the first
	started   bool      // the pod start latency has been observed
	rejected  bool      // admission rejected the pod: nothing runs for it
}

// New returns an empty Store.
func New(cfg Config) *Store {
	return &Store{onForget: cfg.OnForget, pods: map[types.UID]*record{}}
}

// get returns uid's record, creating it; s.mu must be held.
func (s *Store) get(uid types.UID) *record {
	r, ok := s.pods[uid]
	if !ok {
		r = &record{}
		s.pods[uid] = r
	}
	return r
}

// Seen records that the pod was first seen at t, unless it was seen before.
func (s *Store) Seen(uid types.UID, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.get(uid); r.firstSeen.IsZero() {
		r.firstSeen = t
	}
}

// Reject records that admission rejected the pod.
func (s *Store) Reject(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.get(uid).rejected = true
}

// Rejected reports whether admission rejected the pod.
func (s *Store) Rejected(uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.pods[uid]
	return ok && r.rejected
}

// Synced records that a sync of the pod ended at t.
func (s *Store) Synced(uid types.UID, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.get(uid).lastSync = t
}

// LastSync is when the pod's last sync ended; zero before its first.
func (s *Store) LastSync(uid types.UID) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.pods[uid]; ok {
		return r.lastSync
	}
	return time.Time{}
}

// Due returns the pods, of those given, that were synced before and whose
// last sync is at least every old at now; rejected pods are never due.
func (s *Store) Due(pods []*v1.Pod, now time.Time, every time.Duration) []*v1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	var due []*v1.Pod
	for _, p := range pods {
		r, ok := s.pods[p.UID]
		if !ok || r.rejected || r.lastSync.IsZero() {
			continue
		}
		if now.Sub(r.lastSync) >= every {
			due = append(due, p)
		}
	}
	return due
}

// Started records that all the pod's containers run. It returns when the
// pod was first seen (zero if never) and whether this is the first call
// for the pod, so the start latency is observed once.
func (s *Store) Started(uid types.UID) (firstSeen time.Time, first bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.get(uid)
	if r.started {
		return time.Time{}, false
	}
	r.started = true
	return r.firstSeen, true
}

// Forget drops the pod's record and calls every OnForget with its UID.
func (s *Store) Forget(uid types.UID) {
	for _, f := range s.onForget {
		f(uid)
	}
	s.mu.Lock()
	delete(s.pods, uid)
	s.mu.Unlock()
}
