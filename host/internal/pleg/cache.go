package pleg

import (
	"context"
	"sync"
	"time"

	"github.com/wasmlet/wasmlet/host/internal/container"
	"k8s.io/apimachinery/pkg/types"
)

// Cache holds the latest runtime status of every pod, stamped with when it
// was read, so a pod worker can wait for a status newer than its last
// sync (the kubelet's kubecontainer.Cache). It is safe for concurrent use.
type Cache struct {
	mu     sync.Mutex
	pods   map[types.UID]cacheEntry
	global time.Time     // every pod's status is at least this fresh
	notify chan struct{} // closed and replaced on every change
}

type cacheEntry struct {
	status   *container.PodStatus
	err      error
	modified time.Time
}

// NewCache returns an empty cache.
func NewCache() *Cache {
	return &Cache{pods: map[types.UID]cacheEntry{}, notify: make(chan struct{})}
}

// Get returns the pod's cached status; an unknown pod has an empty status
// (the runtime holds nothing of it, as far as the cache knows).
func (c *Cache) Get(uid types.UID) (*container.PodStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.getLocked(uid)
}

func (c *Cache) getLocked(uid types.UID) (*container.PodStatus, error) {
	e, ok := c.pods[uid]
	if !ok {
		return &container.PodStatus{UID: uid, Timestamp: c.global}, nil
	}
	return e.status, e.err
}

// GetNewerThan blocks until the pod's status (or the whole cache) is newer
// than t, then returns it; it returns ctx's error if ctx ends first.
func (c *Cache) GetNewerThan(ctx context.Context, uid types.UID, t time.Time) (*container.PodStatus, error) {
	for {
		c.mu.Lock()
		e, ok := c.pods[uid]
		if (ok && e.modified.After(t)) || c.global.After(t) {
			s, err := c.getLocked(uid)
			c.mu.Unlock()
			return s, err
		}
		ch := c.notify
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Set records the pod's status (or the error reading it) as of t. An
// older status than the one held is ignored.
func (c *Cache) Set(uid types.UID, s *container.PodStatus, err error, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.pods[uid]; ok && e.modified.After(t) {
		return
	}
	c.pods[uid] = cacheEntry{status: s, err: err, modified: t}
	c.wakeLocked()
}

// UpdateTime marks every pod's status as fresh as of t (after a relist
// that found no change for them).
func (c *Cache) UpdateTime(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.global) {
		c.global = t
		c.wakeLocked()
	}
}

// Delete forgets the pod.
func (c *Cache) Delete(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pods, uid)
}

func (c *Cache) wakeLocked() {
	close(c.notify)
	c.notify = make(chan struct{})
}

// matches reports whether the cached status of the pod holds exactly the
// objects of a relist, in the same states.
func (c *Cache) matches(uid types.UID, pod *container.Pod) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.pods[uid]
	if !ok || e.err != nil || e.status == nil || len(e.status.Sandboxes)+len(e.status.Containers) != len(pod.Objects) {
		return false
	}
	states := make(map[string]container.ContainerState, len(pod.Objects))
	for _, s := range e.status.Sandboxes {
		st := container.StateExited
		if s.Ready {
			st = container.StateRunning
		}
		states[s.ID] = st
	}
	for _, ct := range e.status.Containers {
		states[ct.ID] = ct.State
	}
	for _, o := range pod.Objects {
		if st, ok := states[o.ID]; !ok || st != o.State {
			return false
		}
	}
	return true
}
