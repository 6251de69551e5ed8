package objects

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// ClusterConfig configures a Cluster.
type ClusterConfig struct {
	// Client talks to the API server with the node's credentials.
	// Required: without it every lookup fails.
	Client kubernetes.Interface
	// Logger receives failing watches and token refresh errors; nil
	// discards.
	Logger hclog.Logger
	// SyncTimeout bounds how long ConfigMap and Secret wait for a newly
	// started watch to deliver its first list, whatever ctx allows; 0
	// means 10 s. (The kubelet waits 1 s, then fails the pod sync, which
	// is retried.)
	SyncTimeout time.Duration
}

// defaultSyncTimeout is ClusterConfig.SyncTimeout's default.
const defaultSyncTimeout = 10 * time.Second

// errNoClient is returned by a Cluster built without a client.
var errNoClient = errors.New("no API client configured")

// Cluster is the Source, Tokens and Services of a node joined to a
// cluster. ConfigMaps and Secrets that registered pods reference are
// watched one by one, as the kubelet's watch-based managers do, so
// lookups read a local cache; other objects are fetched with a single
// GET. Tokens come from the TokenRequest API, cached per pod. Services
// come from a shared informer started by Run.
type Cluster struct {
	client      kubernetes.Interface
	log         hclog.Logger
	syncTimeout time.Duration
	now         func() time.Time // the token cache's clock; tests replace it
	// wait is how Token waits before asking again; tests replace it.
	wait func(ctx context.Context, d time.Duration) error

	mu   sync.Mutex
	pods map[string]map[objectKey]struct{} // pod key → what it references
	// arrived is when each registered pod was first registered, by UID:
	// a pod's first token waits until it is firstTokenHold old.
	arrived map[types.UID]time.Time
	watches map[objectKey]*watched
	stopped bool // Run has returned: no new reflectors

	factory     informers.SharedInformerFactory
	svcInformer cache.SharedIndexInformer
	svcLister   corelisters.ServiceLister

	tokMu  sync.Mutex
	tokens map[tokenKey]cachedToken
}

var (
	_ Source   = (*Cluster)(nil)
	_ Tokens   = (*Cluster)(nil)
	_ Services = (*Cluster)(nil)
)

// NewCluster returns a Cluster using cfg. Watches of referenced objects
// start as pods are registered; Run starts the Services informer.
func NewCluster(cfg ClusterConfig) *Cluster {
	c := &Cluster{
		client:      cfg.Client,
		log:         cfg.Logger,
		syncTimeout: cfg.SyncTimeout,
		now:         time.Now,
		wait:        sleep,
		pods:        make(map[string]map[objectKey]struct{}),
		arrived:     make(map[types.UID]time.Time),
		watches:     make(map[objectKey]*watched),
		tokens:      make(map[tokenKey]cachedToken),
	}
	if c.log == nil {
		c.log = hclog.NewNullLogger()
	}
	if c.syncTimeout <= 0 {
		c.syncTimeout = defaultSyncTimeout
	}
	if c.client != nil {
		c.factory = informers.NewSharedInformerFactory(c.client, 0)
		svc := c.factory.Core().V1().Services()
		c.svcInformer = svc.Informer()
		c.svcLister = svc.Lister()
	}
	return c
}

// Run starts the Services informer and blocks until ctx ends; it then
// stops the informer and every object watch (later lookups of registered
// objects are plain GETs) and returns nil. Call it once.
func (c *Cluster) Run(ctx context.Context) error {
	if c.factory != nil {
		c.factory.Start(ctx.Done())
	}
	<-ctx.Done()
	if c.factory != nil {
		c.factory.Shutdown()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	for _, w := range c.watches {
		stopWatched(w)
	}
	return nil
}

// stopWatched stops w's reflector, once. Callers hold Cluster.mu.
func stopWatched(w *watched) {
	if !w.stopped {
		w.stopped = true
		close(w.stop)
	}
}

// podKey identifies a registered pod: its UID, or namespace/name for a
// pod without one.
func podKey(pod *v1.Pod) string {
	if pod.UID != "" {
		return string(pod.UID)
	}
	return pod.Namespace + "/" + pod.Name
}

// RegisterPod records what pod references and starts a watch of each
// object no other registered pod references. Registering the same pod
// again replaces its set: objects it no longer references are released.
func (c *Cluster) RegisterPod(pod *v1.Pod) {
	if pod == nil {
		return
	}
	cms, secrets := ReferencedObjects(pod)
	refs := make(map[objectKey]struct{}, len(cms)+len(secrets))
	for _, n := range cms {
		refs[objectKey{resConfigMaps, pod.Namespace, n}] = struct{}{}
	}
	for _, n := range secrets {
		refs[objectKey{resSecrets, pod.Namespace, n}] = struct{}{}
	}
	key := podKey(pod)

	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.arrived[pod.UID]; !ok {
		c.arrived[pod.UID] = c.now()
	}
	old := c.pods[key]
	// Take the new references before releasing the old ones, so an object
	// in both sets keeps its watch.
	for k := range refs {
		if _, ok := old[k]; ok {
			continue
		}
		w := c.watches[k]
		if w == nil {
			w = c.newWatched(k, !c.stopped && c.client != nil)
			c.watches[k] = w
		}
		w.refs++
	}
	for k := range old {
		if _, ok := refs[k]; !ok {
			c.releaseLocked(k)
		}
	}
	if len(refs) == 0 {
		delete(c.pods, key)
		return
	}
	c.pods[key] = refs
}

// UnregisterPod releases everything pod referenced; watches no other
// registered pod needs are stopped.
func (c *Cluster) UnregisterPod(pod *v1.Pod) {
	if pod == nil {
		return
	}
	key := podKey(pod)
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.pods[key] {
		c.releaseLocked(k)
	}
	delete(c.pods, key)
	delete(c.arrived, pod.UID)
}

// releaseLocked drops one reference to k, stopping its watch at zero.
func (c *Cluster) releaseLocked(k objectKey) {
	w := c.watches[k]
	if w == nil {
		return
	}
	if w.refs--; w.refs <= 0 {
		stopWatched(w)
		delete(c.watches, k)
	}
}

// ConfigMap returns a copy of the named ConfigMap: from its watch's cache
// when a registered pod references it (waiting, within ctx and
// SyncTimeout, for the watch's first list), else from one GET.
func (c *Cluster) ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	k := objectKey{resConfigMaps, namespace, name}
	obj, err := c.object(ctx, k)
	return as[*v1.ConfigMap](k, obj, err)
}

// Secret returns a copy of the named Secret, as ConfigMap does.
func (c *Cluster) Secret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	k := objectKey{resSecrets, namespace, name}
	obj, err := c.object(ctx, k)
	return as[*v1.Secret](k, obj, err)
}

// object returns k from its watch's store, or from a GET when nothing
// watches it. A missing object is the API server's NotFound error.
func (c *Cluster) object(ctx context.Context, k objectKey) (runtime.Object, error) {
	if c.client == nil {
		return nil, fmt.Errorf("%s: %w", k, errNoClient)
	}
	c.mu.Lock()
	w := c.watches[k]
	c.mu.Unlock()
	if w == nil {
		return c.getOnce(ctx, k)
	}
	waitCtx, cancel := context.WithTimeout(ctx, c.syncTimeout)
	defer cancel()
	select {
	case <-w.synced:
	case <-w.stop:
	case <-waitCtx.Done():
		if err := w.err(); err != nil {
			return nil, fmt.Errorf("%s: watch has not synced: %w", k, err)
		}
		return nil, fmt.Errorf("%s: watch has not synced: %w", k, waitCtx.Err())
	}
	select {
	case <-w.stop:
		// Released, or Run ended: the store no longer follows the object.
		return c.getOnce(ctx, k)
	default:
	}
	obj, exists, err := w.store.GetByKey(k.storeKey())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k, err)
	}
	if !exists {
		return nil, apierrors.NewNotFound(v1.Resource(k.resource), k.name)
	}
	ro, ok := obj.(runtime.Object)
	if !ok {
		return nil, fmt.Errorf("%s: unexpected object type %T", k, obj)
	}
	return ro, nil
}

// getOnce fetches k with one GET; a NotFound error is returned as the API
// server worded it, other errors name k.
func (c *Cluster) getOnce(ctx context.Context, k objectKey) (runtime.Object, error) {
	obj, err := c.get(ctx, k)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %w", k, err)
	}
	return obj, nil
}

// watchCount is how many object watches are running (for tests).
func (c *Cluster) watchCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, w := range c.watches {
		if !w.stopped {
			n++
		}
	}
	return n
}
