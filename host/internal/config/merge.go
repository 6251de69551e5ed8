package config

import (
	"context"
	"errors"
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Config configures a PodConfig.
type Config struct {
	// Sources are run by Run; their names must be unique.
	Sources []Source
	// Logger receives one line per skipped pod and per source error; nil
	// discards.
	Logger hclog.Logger
	// Now is the clock for kubernetes.io/config.seen; nil means time.Now.
	Now func() time.Time
}

// PodConfig merges the updates of its sources into one stream. Create it with
// New; it is safe for concurrent use.
type PodConfig struct {
	cfg     Config
	log     hclog.Logger
	updates chan PodUpdate

	// mu serialises merges and the delivery of their updates, so the stream
	// keeps each source's order.
	mu   sync.Mutex
	pods map[string]map[types.UID]*v1.Pod

	// seenMu guards seen apart from mu: the agent asks SeenAllSources from the
	// goroutine that receives the updates, while a merge may hold mu and
	// wait for that goroutine.
	seenMu sync.Mutex
	seen   map[string]bool
	names  []string
}

// New returns a PodConfig for cfg's sources. Run starts them.
func New(cfg Config) *PodConfig {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &PodConfig{
		cfg: cfg,
		log: cfg.Logger,
		// Unbuffered on purpose: when a source counts as seen, the agent has
		// received its first update, so cleanup gated on SeenAllSources never
		// races ahead of pods still sitting in a buffer.
		updates: make(chan PodUpdate),
		pods:    map[string]map[types.UID]*v1.Pod{},
		seen:    map[string]bool{},
	}
	for _, s := range cfg.Sources {
		c.names = append(c.names, s.Name())
	}
	return c
}

// Updates is the merged stream. It never carries SET. It is closed when Run
// returns.
func (c *PodConfig) Updates() <-chan PodUpdate { return c.updates }

// Run runs every source and merges what they send until ctx is done, then
// closes Updates. A source that returns early is logged; the others go on.
func (c *PodConfig) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, s := range c.cfg.Sources {
		ch := make(chan PodUpdate)
		name := s.Name()
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer close(ch)
			if err := s.Run(ctx, ch); err != nil && !errors.Is(err, context.Canceled) {
				c.log.Error("pod source stopped", "source", name, "error", err)
			}
		}()
		go func() {
			defer wg.Done()
			for u := range ch {
				// A merge that fails only does so because ctx is done; keep
				// draining so the source can return.
				_ = c.Merge(ctx, name, u)
			}
		}()
	}
	// With no sources (or when every source returned early) the stream
	// stays open until ctx is done: a closed stream ends the sync loop.
	<-ctx.Done()
	wg.Wait()
	close(c.updates)
	return ctx.Err()
}

// Merge applies one update from the named source and delivers the resulting
// updates on Updates, blocking until they are received or ctx is done.
func (c *PodConfig) Merge(ctx context.Context, source string, u PodUpdate) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seenMu.Lock()
	first := !c.seen[source]
	c.seenMu.Unlock()

	r := c.merge(source, u)
	out := make([]PodUpdate, 0, 5)
	for _, x := range []struct {
		op   Op
		pods []*v1.Pod
	}{{OpRemove, r.removes}, {OpAdd, r.adds}, {OpUpdate, r.updates}, {OpDelete, r.deletes}} {
		if len(x.pods) > 0 {
			out = append(out, PodUpdate{Op: x.op, Source: source, Pods: copies(x.pods)})
		}
	}
	if first && len(r.adds)+len(r.updates)+len(r.deletes) == 0 {
		// Tell the agent the source is ready even though it brought nothing.
		out = append(out, PodUpdate{Op: OpAdd, Source: source})
	}
	if len(r.reconciles) > 0 {
		out = append(out, PodUpdate{Op: OpReconcile, Source: source, Pods: copies(r.reconciles)})
	}
	for i, o := range out {
		select {
		case c.updates <- o:
		case <-ctx.Done():
			return ctx.Err()
		}
		if i == 0 && first {
			c.seenMu.Lock()
			c.seen[source] = true
			c.seenMu.Unlock()
		}
	}
	return nil
}

// SeenAllSources reports whether every source given in Config has delivered
// its first update. Until then the agent must not remove pods or containers
// that no source knows: they may belong to a source not heard from yet. A
// source counts as seen just after its first update has been received from
// Updates, never before, so cleanup may start one iteration late but never
// ahead of pods still on their way.
func (c *PodConfig) SeenAllSources() bool {
	c.seenMu.Lock()
	defer c.seenMu.Unlock()
	for _, n := range c.names {
		if !c.seen[n] {
			return false
		}
	}
	return true
}

// Pods returns copies of every pod the sources currently hold, sorted by
// full name.
func (c *PodConfig) Pods() []*v1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	var all []*v1.Pod
	for _, m := range c.pods {
		for _, p := range m {
			all = append(all, p.DeepCopy())
		}
	}
	sort.Slice(all, func(i, j int) bool { return FullName(all[i]) < FullName(all[j]) })
	return all
}

type mergeResult struct {
	adds, updates, deletes, removes, reconciles []*v1.Pod
}

// merge applies u to the source's state; the caller holds mu.
func (c *PodConfig) merge(source string, u PodUpdate) mergeResult {
	var r mergeResult
	pods := c.pods[source]
	if pods == nil {
		pods = map[types.UID]*v1.Pod{}
	}
	apply := func(newPods []*v1.Pod, old, into map[types.UID]*v1.Pod) {
		// An incremental update must not bring a second pod of a name the
		// source already has (a SET replaces the set, so filter suffices).
		var held map[string]types.UID
		if len(into) > 0 {
			held = make(map[string]types.UID, len(into))
			for uid, p := range into {
				held[FullName(p)] = uid
			}
		}
		for _, ref := range c.filter(source, newPods) {
			if uid, ok := held[FullName(ref)]; ok && uid != ref.UID {
				c.log.Error("pod skipped: the source already has a pod of that name", "source", source, "pod", FullName(ref), "uid", ref.UID, "held_by", uid)
				continue
			}
			if ref.Annotations == nil {
				ref.Annotations = map[string]string{}
			}
			ref.Annotations[AnnotationSource] = source
			if existing, ok := old[ref.UID]; ok {
				into[ref.UID] = existing
				switch checkAndUpdate(existing, ref) {
				case changeSpec:
					r.updates = append(r.updates, existing)
				case changeStatus:
					r.reconciles = append(r.reconciles, existing)
				case changeDelete:
					r.deletes = append(r.deletes, existing)
				}
				continue
			}
			if _, ok := ref.Annotations[AnnotationSeen]; !ok {
				ref.Annotations[AnnotationSeen] = c.cfg.Now().Format(time.RFC3339Nano)
			}
			into[ref.UID] = ref
			r.adds = append(r.adds, ref)
		}
	}
	switch u.Op {
	case OpAdd, OpUpdate, OpDelete:
		apply(u.Pods, pods, pods)
	case OpRemove:
		for _, p := range u.Pods {
			if existing, ok := pods[p.UID]; ok {
				delete(pods, p.UID)
				r.removes = append(r.removes, existing)
			}
		}
	case OpSet:
		next := map[types.UID]*v1.Pod{}
		apply(u.Pods, pods, next)
		for uid, existing := range pods {
			if _, ok := next[uid]; !ok {
				r.removes = append(r.removes, existing)
			}
		}
		pods = next
	default:
		c.log.Error("pod source sent an unknown operation; ignored", "source", source, "op", string(u.Op))
	}
	c.pods[source] = pods
	return r
}

// filter drops invalid pods (static pods: by the API server's rules) and pods whose full name repeats within the
// update, logging each; it returns the source's pods as private copies.
func (c *PodConfig) filter(source string, pods []*v1.Pod) []*v1.Pod {
	names := make(map[string]bool, len(pods))
	out := make([]*v1.Pod, 0, len(pods))
	for _, p := range pods {
		if p == nil {
			continue
		}
		if err := Validate(p); err != nil {
			c.log.Error("invalid pod skipped", "source", source, "error", err)
			continue
		}
		p = p.DeepCopy()
		ApplyPodDefaults(p)
		if source != APIServerSource {
			// A static pod never went through an API server: hold it to
			// the API server's rules here (a plugin source's pods; the
			// file source refuses them already, naming the file).
			if err := ValidateStatic(p); err != nil {
				c.log.Error("invalid pod skipped: the API server would refuse it", "source", source, "pod", FullName(p), "error", err)
				continue
			}
		}
		fn := FullName(p)
		if names[fn] {
			c.log.Error("pod skipped: another pod of the source has the same name", "source", source, "pod", fn)
			continue
		}
		names[fn] = true
		out = append(out, p)
	}
	return out
}

type change int

const (
	changeNone change = iota
	changeSpec
	changeStatus
	changeDelete
)

// checkAndUpdate folds ref into existing and says what kind of change it was:
// a semantic change (spec, labels, annotations other than the agent's own,
// deletion fields) is an update, or a graceful delete when DeletionTimestamp
// is set; otherwise a status change is a reconcile.
func checkAndUpdate(existing, ref *v1.Pod) change {
	if !differSemantically(existing, ref) {
		if !reflect.DeepEqual(existing.Status, ref.Status) {
			existing.Status = ref.Status
			return changeStatus
		}
		return changeNone
	}
	// The first-seen time stays the first one.
	if seen, ok := existing.Annotations[AnnotationSeen]; ok {
		ref.Annotations[AnnotationSeen] = seen
	}
	existing.Spec = ref.Spec
	existing.Labels = ref.Labels
	existing.DeletionTimestamp = ref.DeletionTimestamp
	existing.DeletionGracePeriodSeconds = ref.DeletionGracePeriodSeconds
	existing.Generation = ref.Generation
	existing.Status = ref.Status
	existing.Annotations = ref.Annotations
	if ref.DeletionTimestamp != nil {
		return changeDelete
	}
	return changeSpec
}

func differSemantically(existing, ref *v1.Pod) bool {
	return !(reflect.DeepEqual(existing.Spec, ref.Spec) &&
		reflect.DeepEqual(existing.Labels, ref.Labels) &&
		reflect.DeepEqual(existing.DeletionTimestamp, ref.DeletionTimestamp) &&
		reflect.DeepEqual(existing.DeletionGracePeriodSeconds, ref.DeletionGracePeriodSeconds) &&
		annotationsEqual(existing.Annotations, ref.Annotations))
}

// localAnnotations are the agent's own; a source changing them is no update.
var localAnnotations = map[string]bool{AnnotationSource: true, AnnotationSeen: true, AnnotationMirror: true}

func annotationsEqual(a, b map[string]string) bool {
	count := 0
	for k, v := range a {
		if localAnnotations[k] {
			continue
		}
		if w, ok := b[k]; !ok || w != v {
			return false
		}
		count++
	}
	for k := range b {
		if !localAnnotations[k] {
			count--
		}
	}
	return count == 0
}

func copies(pods []*v1.Pod) []*v1.Pod {
	out := make([]*v1.Pod, len(pods))
	for i, p := range pods {
		out[i] = p.DeepCopy()
	}
	return out
}
