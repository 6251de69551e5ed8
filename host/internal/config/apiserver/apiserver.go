// Package apiserver is the agent's third pod source (after the file source
// and plugins): the pods a Kubernetes API server has bound to this node,
// listed and watched with the field selector spec.nodeName=<node> through a
// client-go informer, as the kubelet's pkg/kubelet/config/apiserver.go does.
//
// Every change the informer sees is sent to the config merge as a SET of the
// complete set of pods, so the merge's diff turns it into ADD, UPDATE,
// DELETE, REMOVE or RECONCILE. That keeps the source stateless: after an API
// server restart or an expired watch the informer relists and the next SET
// says what is true now, with nothing lost and nothing delivered twice.
// SETs are coalesced: while one is being delivered, later changes collapse
// into the next, which always carries the latest state.
package apiserver

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/wasmlet/wasmlet/host/internal/config"
)

// Config configures New.
type Config struct {
	// Client is the API client (with the node's credentials).
	Client kubernetes.Interface
	// NodeName selects the pods: spec.nodeName=NodeName.
	NodeName string
	// ResyncPeriod, when positive, re-sends the full set that often even
	// without changes (the merge makes an unchanged SET a no-op).
	ResyncPeriod time.Duration
	// Logger receives the source's logs; nil discards.
	Logger hclog.Logger
}

// New returns the API server pod source, named config.APIServerSource.
func New(cfg Config) config.Source {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &source{cfg: cfg}
}

type source struct {
	cfg Config
}

func (s *source) Name() string { return config.APIServerSource }

// Run runs the informer and sends SETs until ctx is done.
func (s *source) Run(ctx context.Context, updates chan<- config.PodUpdate) error {
	if s.cfg.Client == nil || s.cfg.NodeName == "" {
		return fmt.Errorf("api source: a client and a node name are required")
	}
	selector := fields.OneTermEqualSelector("spec.nodeName", s.cfg.NodeName).String()
	pods := s.cfg.Client.CoreV1().Pods(v1.NamespaceAll)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return pods.Watch(ctx, o)
		},
	}
	// The wrapper keeps watch-list semantics where the client has them (a
	// real API server) and turns them off where it has not (a fake).
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, s.cfg.Client), &v1.Pod{}, s.cfg.ResyncPeriod, cache.Indexers{})
	dirty := make(chan struct{}, 1)
	mark := func() {
		select {
		case dirty <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { mark() },
		UpdateFunc: func(any, any) { mark() },
		DeleteFunc: func(any) { mark() },
	}); err != nil {
		return fmt.Errorf("api source: %w", err)
	}
	if err := inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		s.cfg.Logger.Warn("watch of pods failed; the informer relists", "node", s.cfg.NodeName, "error", err)
	}); err != nil {
		return fmt.Errorf("api source: %w", err)
	}
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return ctx.Err()
	}
	s.cfg.Logger.Info("pods listed from the API server", "node", s.cfg.NodeName, "pods", len(inf.GetStore().ListKeys()))
	// The first SET (even empty) tells the agent the source is ready.
	mark()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-dirty:
		}
		items := inf.GetStore().List()
		pods := make([]*v1.Pod, 0, len(items))
		for _, it := range items {
			if p, ok := it.(*v1.Pod); ok {
				pods = append(pods, p)
			}
		}
		select {
		case updates <- config.PodUpdate{Op: config.OpSet, Source: config.APIServerSource, Pods: pods}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
