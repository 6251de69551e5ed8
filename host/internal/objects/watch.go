package objects

import (
	"context"
	"errors"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// Resources of the objects a Cluster watches.
const (
	resConfigMaps = "configmaps"
	resSecrets    = "secrets"
)

// objectKey names one ConfigMap or Secret.
type objectKey struct {
	resource  string // resConfigMaps or resSecrets
	namespace string
	name      string
}

// String is how errors and logs name the object: "configmap ns/name".
func (k objectKey) String() string {
	kind := "configmap"
	if k.resource == resSecrets {
		kind = "secret"
	}
	return kind + " " + k.namespace + "/" + k.name
}

// storeKey is the object's key in a cache.Store (cache.MetaNamespaceKeyFunc).
func (k objectKey) storeKey() string {
	if k.namespace == "" {
		return k.name
	}
	return k.namespace + "/" + k.name
}

// watched is the reflector of one object that registered pods reference:
// it lists and watches that single object (a metadata.name field selector
// in its namespace, which the Node authorizer allows) into store.
type watched struct {
	key   objectKey
	refs  int // registered pods referencing it; guarded by Cluster.mu
	store cache.Store

	synced     chan struct{} // closed once the first list reached store
	syncedOnce sync.Once

	stop    chan struct{} // closed to stop the reflector
	stopped bool          // guarded by Cluster.mu

	mu      sync.Mutex
	lastErr error  // of the last list/watch call; nil after a success
	logged  string // text of the last error logged, to log each once
}

// markSynced records that the store holds a complete list.
func (w *watched) markSynced() {
	w.syncedOnce.Do(func() { close(w.synced) })
}

// err returns the last list or watch error, if the last call failed.
func (w *watched) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastErr
}

// syncStore is a cache.Store that tells its watched when the reflector
// first replaced its contents (the initial list).
type syncStore struct {
	cache.Store
	w *watched
}

// Replace replaces the contents and marks the object synced.
func (s syncStore) Replace(list []interface{}, resourceVersion string) error {
	if err := s.Store.Replace(list, resourceVersion); err != nil {
		return err
	}
	s.w.markSynced()
	return nil
}

// minWatchTimeout is the reflector's minimum watch timeout, as the
// kubelet's watch-based manager sets it, to not recreate watches often.
const minWatchTimeout = 30 * time.Minute

// newWatched returns the reflector state of k; when start is set, it also
// starts the reflector, which runs until stop is closed. client-go's
// backoff paces retries of a list or watch that fails (e.g. Forbidden).
func (c *Cluster) newWatched(k objectKey, start bool) *watched {
	w := &watched{
		key:    k,
		store:  cache.NewStore(cache.MetaNamespaceKeyFunc),
		synced: make(chan struct{}),
		stop:   make(chan struct{}),
	}
	if !start {
		close(w.stop)
		w.stopped = true
		return w
	}
	selector := fields.OneTermEqualSelector("metadata.name", k.name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			obj, err := c.list(ctx, k, opts)
			c.noteResult(w, "list", err)
			return obj, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			wi, err := c.watch(ctx, k, opts)
			c.noteResult(w, "watch", err)
			return wi, err
		},
	}
	var expected runtime.Object = &v1.ConfigMap{}
	if k.resource == resSecrets {
		expected = &v1.Secret{}
	}
	r := cache.NewReflectorWithOptions(
		cache.ToListWatcherWithWatchListSemantics(lw, c.client),
		expected,
		syncStore{Store: w.store, w: w},
		cache.ReflectorOptions{Name: k.String(), MinWatchTimeout: minWatchTimeout},
	)
	go r.Run(w.stop)
	return w
}

// noteResult records the outcome of a list or watch call of w and logs a
// failure once per distinct error.
func (c *Cluster) noteResult(w *watched, op string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if errors.Is(err, context.Canceled) {
		return // the reflector is being stopped
	}
	w.lastErr = err
	if err == nil {
		w.logged = ""
		return
	}
	if text := err.Error(); text != w.logged {
		w.logged = text
		c.log.Warn("cannot "+op+" "+w.key.String()+"; retrying with backoff", "error", err)
	}
}

// list lists k's namespace with opts.
func (c *Cluster) list(ctx context.Context, k objectKey, opts metav1.ListOptions) (runtime.Object, error) {
	if k.resource == resSecrets {
		return c.client.CoreV1().Secrets(k.namespace).List(ctx, opts)
	}
	return c.client.CoreV1().ConfigMaps(k.namespace).List(ctx, opts)
}

// watch watches k's namespace with opts.
func (c *Cluster) watch(ctx context.Context, k objectKey, opts metav1.ListOptions) (watch.Interface, error) {
	if k.resource == resSecrets {
		return c.client.CoreV1().Secrets(k.namespace).Watch(ctx, opts)
	}
	return c.client.CoreV1().ConfigMaps(k.namespace).Watch(ctx, opts)
}

// get fetches k once.
func (c *Cluster) get(ctx context.Context, k objectKey) (runtime.Object, error) {
	if k.resource == resSecrets {
		return c.client.CoreV1().Secrets(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
	}
	return c.client.CoreV1().ConfigMaps(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
}
