// Package housekeeping is the kubelet's HandlePodCleanups: once every
// source has been seen, pods in the runtime that no source has are killed,
// the records of forgotten pods dropped, and — at most once per GC period,
// as the kubelet's container garbage collection runs — dead containers,
// sandboxes and pod directories collected.
package housekeeping

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/wasmlet/wasmlet/host/internal/container"
	"github.com/wasmlet/wasmlet/host/internal/worker"
)

// Pods are the pods the sources want on the node.
type Pods interface {
	// Pods are the wanted pods.
	Pods() []*v1.Pod
	// PodByUID returns the pod with uid if a source has it.
	PodByUID(uid types.UID) (*v1.Pod, bool)
}

// Workers are the pod workers.
type Workers interface {
	// Known are the UIDs of the pods that have a worker.
	Known() []types.UID
	// Update hands a pod to its worker.
	Update(u worker.Update)
	// IsTerminating reports whether the pod's worker is still killing it.
	IsTerminating(uid types.UID) bool
}

// Runtime lists and collects the runtime's pods.
type Runtime interface {
	// GetPods lists the pods in the runtime.
	GetPods(ctx context.Context) ([]*container.Pod, error)
	// GarbageCollect removes dead containers and sandboxes, and the
	// directories of pods keep does not keep.
	GarbageCollect(ctx context.Context, pods []*container.Pod, keep func(types.UID) bool) error
}

// Statuses are the pods with a recorded status.
type Statuses interface {
	// Pods returns the pods with their latest status.
	Pods() []v1.Pod
}

// Config configures a Cleaner.
type Config struct {
	// Pods are the pods the sources want.
	Pods Pods
	// Workers kill the orphans.
	Workers Workers
	// Runtime is listed for orphans and garbage collected.
	Runtime Runtime
	// Statuses are checked for pods no one wants any more.
	Statuses Statuses
	// Forget drops everything kept about a pod.
	Forget func(types.UID)
	// BackOff is the crash-loop back-off, whose stale entries are dropped.
	BackOff *flowcontrol.Backoff
	// Logger receives the orphans killed and the errors.
	Logger hclog.Logger
	// GCPeriod is the least time between two collections of dead
	// containers, sandboxes and pod directories (the kubelet collects
	// every minute); zero collects in every pass. Removing containers and
	// sandboxes costs the runtime as much as stopping them: done every
	// pass, it competed with the stops of a burst of deleted pods.
	GCPeriod time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Cleaner runs housekeeping passes in the background, one at a time.
type Cleaner struct {
	cfg     Config
	running atomic.Bool
	wg      sync.WaitGroup
	gcMu    sync.Mutex // one collection at a time: a pass's or DeleteUnusedContainers'
	lastGC  time.Time  // of the collection that ran last
}

// DeleteUnusedContainers collects dead containers and sandboxes now,
// whatever GCPeriod says: the eviction manager's reclaim under disk
// pressure (the kubelet's DeleteAllUnusedContainers). A pod the sources or
// the workers have keeps what the collection keeps for it, unless it has
// finished: its status is Succeeded or Failed and its worker is no longer
// killing it. Its containers will never run again, and the kubelet's
// reclaim removes the runtime objects of such pods too (their runtime
// "should be removed"), where its periodic collection keeps them.
func (c *Cleaner) DeleteUnusedContainers(ctx context.Context) error {
	working := map[types.UID]bool{}
	for _, uid := range c.cfg.Workers.Known() {
		working[uid] = true
	}
	finished := map[types.UID]bool{}
	for _, p := range c.cfg.Statuses.Pods() {
		if (p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed) && !c.cfg.Workers.IsTerminating(p.UID) {
			finished[p.UID] = true
		}
	}
	keep := func(uid types.UID) bool {
		if finished[uid] {
			return false
		}
		_, ok := c.cfg.Pods.PodByUID(uid)
		return ok || working[uid]
	}
	running, err := c.cfg.Runtime.GetPods(ctx)
	if err != nil {
		return fmt.Errorf("housekeeping: list runtime pods: %w", err)
	}
	c.gcMu.Lock()
	defer c.gcMu.Unlock()
	c.lastGC = c.cfg.Now()
	return c.cfg.Runtime.GarbageCollect(ctx, running, keep)
}

// New returns a Cleaner.
func New(cfg Config) *Cleaner {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Cleaner{cfg: cfg}
}

// Start begins a housekeeping pass in the background unless one is still
// running.
func (c *Cleaner) Start(ctx context.Context) {
	if !c.running.CompareAndSwap(false, true) {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.running.Store(false)
		c.clean(ctx)
	}()
}

// Wait waits for the running pass, if any.
func (c *Cleaner) Wait() { c.wg.Wait() }

func (c *Cleaner) clean(ctx context.Context) {
	desired := map[types.UID]bool{}
	for _, p := range c.cfg.Pods.Pods() {
		desired[p.UID] = true
	}
	working := map[types.UID]bool{}
	for _, uid := range c.cfg.Workers.Known() {
		working[uid] = true
	}
	// A pod counts as wanted if it was in the snapshots above or is in the
	// pod manager now: a pod added since the snapshot already has a worker
	// making its sandbox and directories.
	keep := func(uid types.UID) bool {
		if desired[uid] || working[uid] {
			return true
		}
		_, ok := c.cfg.Pods.PodByUID(uid)
		return ok
	}
	running, err := c.cfg.Runtime.GetPods(ctx)
	if err != nil {
		c.cfg.Logger.Error("housekeeping: list runtime pods", "error", err)
		return
	}
	for _, rp := range running {
		if keep(rp.UID) || !live(rp) {
			continue
		}
		c.cfg.Logger.Info("killing orphaned pod", "pod", rp.Namespace+"/"+rp.Name, "uid", rp.UID)
		orphan := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: rp.Name, Namespace: rp.Namespace, UID: rp.UID}}
		c.cfg.Workers.Update(worker.Update{Pod: orphan, Kind: worker.Terminate})
		working[rp.UID] = true
	}
	for _, p := range c.cfg.Statuses.Pods() {
		if !keep(p.UID) {
			c.cfg.Forget(p.UID)
		}
	}
	c.gcMu.Lock()
	if now := c.cfg.Now(); c.lastGC.IsZero() || now.Sub(c.lastGC) >= c.cfg.GCPeriod {
		c.lastGC = now
		if err := c.cfg.Runtime.GarbageCollect(ctx, running, keep); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("housekeeping: garbage collection", "error", err)
		}
	}
	c.gcMu.Unlock()
	c.cfg.BackOff.GC()
}

// live reports whether any of the pod's sandboxes or containers runs or
// is about to.
func live(p *container.Pod) bool {
	for _, o := range p.Objects {
		if o.State == container.StateRunning || o.State == container.StateCreated {
			return true
		}
	}
	return false
}
