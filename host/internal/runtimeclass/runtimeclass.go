// Package runtimeclass resolves a pod's spec.runtimeClassName to the CRI
// runtime handler its sandbox is created with, as the kubelet's
// pkg/kubelet/runtimeclass does: a RuntimeClass (node.k8s.io/v1) informer
// started with the node's API client keeps a local cache, and each lookup
// reads it.
//
// A pod naming no RuntimeClass gets the default handler (""). A RuntimeClass
// the cache does not hold fails the lookup with the API server's NotFound
// error (`runtimeclass.node.k8s.io "x" not found`), which the runtime reports
// as the kubelet does (CreatePodSandboxError; event FailedCreatePodSandBox)
// and the pod worker retries, so a RuntimeClass created later lets the pod
// start.
//
// A standalone node (no API client) has no RuntimeClasses to read: a pod
// naming one fails with an error naming the pod and the field, rather than
// running on the default handler as the kubelet without a client does.
package runtimeclass

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	nodelisters "k8s.io/client-go/listers/node/v1"
	"k8s.io/client-go/tools/cache"
)

// ErrStandalone is wrapped by the lookup error of a pod naming a
// RuntimeClass on a node without an API server.
var ErrStandalone = errors.New("a standalone node has no API server to read RuntimeClasses from")

// ErrNotSynced is wrapped by the lookup error while the RuntimeClass
// informer has not delivered its first list (the pod's sync is retried).
var ErrNotSynced = errors.New("the RuntimeClass cache has not synced with the API server yet")

// Config configures a Manager.
type Config struct {
	// Client talks to the API server with the node's credentials; nil
	// is a standalone node.
	Client kubernetes.Interface
}

// Manager caches the cluster's RuntimeClasses and resolves pods' runtime
// handlers. Build it with New, start its informer with Run. It is safe for
// concurrent use.
type Manager struct {
	factory  informers.SharedInformerFactory // nil when standalone
	informer cache.SharedIndexInformer
	lister   nodelisters.RuntimeClassLister
}

// New returns a Manager using cfg. It starts nothing; Run does.
func New(cfg Config) *Manager {
	m := &Manager{}
	if cfg.Client == nil {
		return m
	}
	// Resync 0, as the kubelet's: a RuntimeClass changes rarely and each
	// lookup reads the cache as the watch left it.
	m.factory = informers.NewSharedInformerFactory(cfg.Client, 0)
	rc := m.factory.Node().V1().RuntimeClasses()
	m.informer = rc.Informer()
	m.lister = rc.Lister()
	return m
}

// Run starts the RuntimeClass informer and blocks until ctx ends, then
// stops it and returns nil. On a standalone node it only waits for ctx.
// Call it once.
func (m *Manager) Run(ctx context.Context) error {
	if m.factory != nil {
		m.factory.Start(ctx.Done())
	}
	<-ctx.Done()
	if m.factory != nil {
		m.factory.Shutdown()
	}
	return nil
}

// Handler is the runtime handler of pod's RuntimeClass: "" for a pod
// naming none. A RuntimeClass not in the cache is the API server's
// NotFound error, as the kubelet reports it; before the cache's first list
// the error wraps ErrNotSynced, on a standalone node ErrStandalone.
func (m *Manager) Handler(pod *v1.Pod) (string, error) {
	if pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName == "" {
		return "", nil
	}
	name := *pod.Spec.RuntimeClassName
	if m.factory == nil {
		return "", fmt.Errorf("pod %s/%s: spec.runtimeClassName %q: %w", pod.Namespace, pod.Name, name, ErrStandalone)
	}
	if !m.informer.HasSynced() {
		return "", fmt.Errorf("RuntimeClass %q: %w", name, ErrNotSynced)
	}
	rc, err := m.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return "", err // as the API server words it, as the kubelet reports it
	}
	if err != nil {
		return "", fmt.Errorf("RuntimeClass %q: %w", name, err)
	}
	return rc.Handler, nil
}
