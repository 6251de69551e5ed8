package node

import (
	"context"
	"maps"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Watcher keeps this node's object as the API server has it, through one
// list and watch with a field selector on the node's name — the kubelet's
// node lister — so a label an operator sets reaches the agent at once,
// not at its next status post.
type Watcher struct {
	informer cache.SharedIndexInformer

	mu        sync.Mutex
	onLabels  []func()
	lastLabel map[string]string
}

// NewWatcher returns a Watcher of the node named name; Run drives it.
func NewWatcher(client kubernetes.Interface, name string) *Watcher {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return client.CoreV1().Nodes().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return client.CoreV1().Nodes().Watch(ctx, o)
		},
	}
	w := &Watcher{informer: cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, client), &v1.Node{}, resyncNever, cache.Indexers{})}
	changed := func(obj any) {
		n, ok := obj.(*v1.Node)
		if !ok {
			return
		}
		w.mu.Lock()
		same := w.lastLabel != nil && maps.Equal(w.lastLabel, n.Labels)
		w.lastLabel = maps.Clone(n.Labels)
		if w.lastLabel == nil {
			w.lastLabel = map[string]string{}
		}
		fs := append([]func(){}, w.onLabels...)
		w.mu.Unlock()
		if same {
			return
		}
		for _, f := range fs {
			f()
		}
	}
	w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    changed,
		UpdateFunc: func(_, obj any) { changed(obj) },
	})
	return w
}

// OnLabelsChange calls f (from the watch's goroutine) whenever the node's
// labels change, and when the node is first seen.
func (w *Watcher) OnLabelsChange(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.onLabels = append(w.onLabels, f)
}

// Run watches until ctx is done.
func (w *Watcher) Run(ctx context.Context) error {
	w.informer.Run(ctx.Done())
	return nil
}

// Synced reports whether the first list has been read.
func (w *Watcher) Synced() bool { return w.informer.HasSynced() }

// Node is the node as last seen; false before it is seen (not registered
// yet, or the first list not read).
func (w *Watcher) Node() (*v1.Node, bool) {
	for _, o := range w.informer.GetStore().List() {
		if n, ok := o.(*v1.Node); ok {
			return n, true
		}
	}
	return nil, false
}

// resyncNever documents that the watcher never resyncs: a watch delivers
// every change.
const resyncNever = time.Duration(0)
