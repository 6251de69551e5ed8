// Package pleg is the pod lifecycle event generator: it relists the
// runtime every period, turns what changed into container events, and
// keeps the pod status cache the pod workers sync against (the kubelet's
// GenericPLEG). containerd 1.6 has no container event stream, so a relist
// is the only way.
package pleg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/wasmlet/wasmlet/host/internal/container"
	"k8s.io/apimachinery/pkg/types"
)

// EventType is the kind of a lifecycle event.
type EventType string

// The event types, as the kubelet's.
const (
	// ContainerStarted: a container (or sandbox) is now running.
	ContainerStarted EventType = "ContainerStarted"
	// ContainerDied: a container (or sandbox) stopped.
	ContainerDied EventType = "ContainerDied"
	// ContainerRemoved: a container is gone from the runtime.
	ContainerRemoved EventType = "ContainerRemoved"
	// ContainerChanged: a container is in another state (created, unknown).
	ContainerChanged EventType = "ContainerChanged"
)

// Event is one change of one pod.
type Event struct {
	// ID is the pod's UID.
	ID types.UID
	// Type is what happened.
	Type EventType
	// Data is the container's (or sandbox's) runtime ID.
	Data string
}

// Runtime is what the PLEG needs of the runtime; *runtime.Manager has it.
type Runtime interface {
	GetPods(ctx context.Context) ([]*container.Pod, error)
	// PodStatus reads the statuses of a pod the relist found, without
	// listing again, dated by the relist.
	PodStatus(ctx context.Context, pod *container.Pod, listedAt time.Time) (*container.PodStatus, error)
}

// Config configures a PLEG.
type Config struct {
	// Runtime is relisted.
	Runtime Runtime
	// RelistPeriod is the pause between relists; 0 means 1 s.
	RelistPeriod time.Duration
	// RelistThreshold is how long without a successful relist makes the
	// PLEG unhealthy; 0 means 3 min.
	RelistThreshold time.Duration
	// Parallelism bounds the pod status reads of one relist; 0 means 8.
	Parallelism int
	// EventBuffer is the capacity of the event channel; 0 means 1000.
	EventBuffer int
	// Logger receives relist errors; nil discards.
	Logger hclog.Logger
	// Registerer receives wasmlet_pleg_relist_duration_seconds; nil
	// registers nothing.
	Registerer prometheus.Registerer
}

// PLEG relists the runtime. Create it with New, start it with Run.
type PLEG struct {
	cfg      Config
	log      hclog.Logger
	cache    *Cache
	events   chan Event
	duration prometheus.Histogram

	lastRelist atomic.Int64 // unix nanos of the last successful relist
	// relistErr is the error of the last relist, nil when it succeeded.
	relistErr atomic.Pointer[relistFailure]
	// records is the last relist's view of each pod; only Run touches it.
	records   map[types.UID]*container.Pod
	reinspect map[types.UID]bool
}

// New returns a PLEG for cfg, registering its metric.
func New(cfg Config) (*PLEG, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("pleg: Config.Runtime is nil")
	}
	if cfg.RelistPeriod <= 0 {
		cfg.RelistPeriod = time.Second
	}
	if cfg.RelistThreshold <= 0 {
		cfg.RelistThreshold = 3 * time.Minute
	}
	if cfg.Parallelism <= 0 {
		cfg.Parallelism = 8
	}
	if cfg.EventBuffer <= 0 {
		cfg.EventBuffer = 1000
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	p := &PLEG{
		cfg:    cfg,
		log:    cfg.Logger,
		cache:  NewCache(),
		events: make(chan Event, cfg.EventBuffer),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "wasmlet_pleg_relist_duration_seconds",
			Help:    "Duration of one PLEG relist of the runtime.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		records:   map[types.UID]*container.Pod{},
		reinspect: map[types.UID]bool{},
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(p.duration); err != nil {
			return nil, fmt.Errorf("pleg: register metrics: %w", err)
		}
	}
	return p, nil
}

// Events is the channel of lifecycle events (ContainerChanged is not sent,
// as in the kubelet). When it is full, relist blocks.
func (p *PLEG) Events() <-chan Event { return p.events }

// Cache is the pod status cache the relist keeps.
func (p *PLEG) Cache() *Cache { return p.cache }

// Run relists every RelistPeriod until ctx is done.
func (p *PLEG) Run(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := p.Relist(ctx); err != nil && ctx.Err() == nil {
			p.log.Error("relist failed", "error", err)
		}
		t.Reset(p.cfg.RelistPeriod)
	}
}

// Healthy returns an error when no relist has succeeded for longer than
// RelistThreshold.
func (p *PLEG) Healthy() error {
	last := p.lastRelist.Load()
	if last == 0 {
		return nil // not started yet: the runtime check reports why
	}
	if d := time.Since(time.Unix(0, last)); d > p.cfg.RelistThreshold {
		return fmt.Errorf("pleg: last successful relist %v ago; threshold is %v", d.Round(time.Second), p.cfg.RelistThreshold)
	}
	return nil
}

// relistFailure is a failed relist: when the failures began, the last error.
type relistFailure struct {
	since time.Time
	err   error
}

// RelistError returns an error, at once, while the relists fail: what the
// last one said and since when. /healthz shows it, so a runtime that
// answers every list with an error (such as a listing larger than the gRPC
// message limit) turns it red at the first failure; Healthy, which the
// node's Ready condition follows, waits for RelistThreshold.
func (p *PLEG) RelistError() error {
	f := p.relistErr.Load()
	if f == nil {
		return nil
	}
	return fmt.Errorf("pleg: relists failing since %s: %w", f.since.UTC().Format(time.RFC3339), f.err)
}

// Relist lists the runtime once, updates the cache for pods that changed
// and sends their events. It is not safe to call concurrently with itself
// (Run calls it).
func (p *PLEG) Relist(ctx context.Context) error {
	ts := time.Now()
	defer func() { p.duration.Observe(time.Since(ts).Seconds()) }()
	pods, err := p.cfg.Runtime.GetPods(ctx)
	if err != nil {
		if ctx.Err() == nil {
			since := ts
			if f := p.relistErr.Load(); f != nil {
				since = f.since
			}
			p.relistErr.Store(&relistFailure{since: since, err: err})
		}
		return err
	}
	p.relistErr.Store(nil)
	p.lastRelist.Store(ts.UnixNano())

	current := make(map[types.UID]*container.Pod, len(pods))
	for _, pod := range pods {
		current[pod.UID] = pod
	}
	eventsByPod := map[types.UID][]Event{}
	for uid := range union(p.records, current) {
		if events := computeEvents(uid, p.records[uid], current[uid]); len(events) > 0 {
			eventsByPod[uid] = events
		}
	}
	// Pods to read: those with events and those whose last read failed.
	toRead := map[types.UID]*container.Pod{}
	for uid := range eventsByPod {
		toRead[uid] = current[uid]
	}
	for uid := range p.reinspect {
		if _, ok := toRead[uid]; !ok {
			toRead[uid] = current[uid] // as listed now; nil when gone
		}
	}
	failed := p.updateCache(ctx, toRead, ts)
	p.reinspect = map[types.UID]bool{}
	for uid := range toRead {
		if _, bad := failed[uid]; bad {
			// Keep the old record so the change is seen again next time.
			p.reinspect[uid] = true
			continue
		}
		if pod, ok := current[uid]; ok {
			p.records[uid] = pod
		} else {
			delete(p.records, uid)
		}
		for _, e := range eventsByPod[uid] {
			if e.Type == ContainerChanged {
				continue
			}
			select {
			case p.events <- e:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	// Pods without events keep their record as it was (identical).
	p.cache.UpdateTime(ts)
	return nil
}

// updateCache reads the status of each pod in parallel and stores it; it
// returns the pods whose read failed.
func (p *PLEG) updateCache(ctx context.Context, pods map[types.UID]*container.Pod, ts time.Time) map[types.UID]bool {
	var (
		mu     sync.Mutex
		failed = map[types.UID]bool{}
		wg     sync.WaitGroup
		sem    = make(chan struct{}, p.cfg.Parallelism)
	)
	for uid, pod := range pods {
		if pod != nil && p.cache.matches(uid, pod) {
			// The cache already shows this state (the agent read the pod
			// back right after changing it): no need to inspect again.
			continue
		}
		if pod == nil {
			// Gone from the runtime: an empty status.
			p.cache.Set(uid, &container.PodStatus{UID: uid, Timestamp: ts}, nil, ts)
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			s, err := p.cfg.Runtime.PodStatus(ctx, pod, ts)
			if err != nil {
				p.log.Warn("pod status", "pod", pod.Namespace+"/"+pod.Name, "uid", uid, "error", err)
				mu.Lock()
				failed[uid] = true
				mu.Unlock()
				return
			}
			p.cache.Set(uid, s, nil, ts)
		}()
	}
	wg.Wait()
	return failed
}

func union(a, b map[types.UID]*container.Pod) map[types.UID]bool {
	u := make(map[types.UID]bool, len(a)+len(b))
	for k := range a {
		u[k] = true
	}
	for k := range b {
		u[k] = true
	}
	return u
}

// computeEvents compares a pod's objects between two relists.
func computeEvents(uid types.UID, old, cur *container.Pod) []Event {
	state := func(p *container.Pod) map[string]container.ContainerState {
		m := map[string]container.ContainerState{}
		if p != nil {
			for _, o := range p.Objects {
				m[o.ID] = o.State
			}
		}
		return m
	}
	os, cs := state(old), state(cur)
	var events []Event
	for id, was := range os {
		now, ok := cs[id]
		switch {
		case !ok && was == container.StateExited:
			events = append(events, Event{uid, ContainerRemoved, id})
		case !ok:
			events = append(events, Event{uid, ContainerDied, id}, Event{uid, ContainerRemoved, id})
		case now != was:
			events = append(events, event(uid, now, id))
		}
	}
	for id, now := range cs {
		if _, ok := os[id]; !ok {
			events = append(events, event(uid, now, id))
		}
	}
	return events
}

func event(uid types.UID, s container.ContainerState, id string) Event {
	switch s {
	case container.StateRunning:
		return Event{uid, ContainerStarted, id}
	case container.StateExited:
		return Event{uid, ContainerDied, id}
	}
	return Event{uid, ContainerChanged, id}
}
