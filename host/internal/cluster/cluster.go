// Package cluster is what a node joined to a Kubernetes cluster runs
// besides the sync loop: the API client (requests counted by resource),
// the API server pod source, node registration and lease, the pod status
// sync, mirror pods and events.
package cluster

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	"github.com/wasmlet/wasmlet/host/internal/config"
	"github.com/wasmlet/wasmlet/host/internal/config/apiserver"
	"github.com/wasmlet/wasmlet/host/internal/mirror"
	"github.com/wasmlet/wasmlet/host/internal/node"
	"github.com/wasmlet/wasmlet/host/internal/pod"
	"github.com/wasmlet/wasmlet/host/internal/status"
)

// Config configures a Cluster.
type Config struct {
	// KubeConfig is a kubeconfig file with the node's credentials.
	KubeConfig string
	// RESTConfig, when set, is used instead of loading KubeConfig (the
	// rotating client certificate's: host/internal/certificate).
	RESTConfig *rest.Config
	// QPS and Burst bound the request rate to the API server.
	QPS   float32
	Burst int
	// UserAgent is sent with every request.
	UserAgent string
	// NodeName is this node's name.
	NodeName string
	// Registerer receives wasmlet_apiserver_requests_total; nil registers
	// nowhere.
	Registerer prometheus.Registerer
	// Logger receives the parts' logs; nil discards.
	Logger hclog.Logger
}

// Cluster is what a node joined to a cluster runs besides the sync loop:
// the API client and pod source, node registration and lease, the status
// sync, mirror pods and events. A nil *Cluster is a standalone node: its
// methods do nothing.
type Cluster struct {
	cfg       Config
	rest      *rest.Config
	client    kubernetes.Interface
	registrar *node.Registrar
	syncer    *status.Syncer
	mirrors   *mirror.Manager
	events    record.EventBroadcaster
	recorder  record.EventRecorder
	pods      *pod.Manager
}

// New builds the API client from the kubeconfig, counting every request in
// wasmlet_apiserver_requests_total. It starts nothing.
func New(cfg Config) (*Cluster, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	var rc *rest.Config
	if cfg.RESTConfig != nil {
		rc = rest.CopyConfig(cfg.RESTConfig)
	} else {
		var err error
		if rc, err = clientcmd.BuildConfigFromFlags("", cfg.KubeConfig); err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", cfg.KubeConfig, err)
		}
	}
	rc.QPS, rc.Burst = cfg.QPS, cfg.Burst
	rc.UserAgent = cfg.UserAgent
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wasmlet_apiserver_requests_total",
		Help: "Requests to the API server by method, resource and subresource, and status code.",
	}, []string{"method", "resource", "code"})
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(requests); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &countingTransport{next: rt, requests: requests} })
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", cfg.KubeConfig, err)
	}
	return &Cluster{cfg: cfg, rest: rc, client: client}, nil
}

// Dynamic is a dynamic API client with the node's credentials (JSON, the
// same rate limits and request counting as Client); nil when standalone.
func (c *Cluster) Dynamic() (dynamic.Interface, error) {
	if c == nil {
		return nil, nil
	}
	return dynamic.NewForConfig(c.rest)
}

// Node is the node as the API server last returned it (its labels as set
// in the cluster); false before registration and when standalone.
func (c *Cluster) Node() (*v1.Node, bool) {
	if c == nil || c.registrar == nil {
		return nil, false
	}
	return c.registrar.Node()
}

// Client is the API client with the node's credentials; nil when
// standalone.
func (c *Cluster) Client() kubernetes.Interface {
	if c == nil {
		return nil
	}
	return c.client
}

// Source is the API server pod source: the pods bound to this node.
func (c *Cluster) Source() config.Source {
	return apiserver.New(apiserver.Config{Client: c.client, NodeName: c.cfg.NodeName, Logger: c.cfg.Logger.Named("api")})
}

// StartConfig is what the cluster's parts need of the running node.
type StartConfig struct {
	// Node is the node object to register.
	Node *v1.Node
	// Ready is the node's Ready condition: nil when ready.
	Ready func() error
	// Pressure gives the node's pressure conditions that are True now.
	Pressure func() []v1.NodeConditionType
	// RuntimeHandlers lists the runtime's handlers for the node status.
	RuntimeHandlers func() []v1.NodeRuntimeHandler
	// ExtendedResources gives the device plugins' resources for the node
	// status's capacity and allocatable; nil gives none.
	ExtendedResources func() (capacity, allocatable v1.ResourceList)
	// Pods is the pod manager (static pods, their mirror pods).
	Pods *pod.Manager
	// Statuses are the statuses pushed to the API server.
	Statuses *status.Manager
	// SourcesSeen reports whether every pod source has delivered its pods.
	SourcesSeen func() bool
	// StartedStatic returns the static pods started and not yet terminated
	// (the pod workers'), whose mirror pods are kept until they are done.
	StartedStatic func() []*v1.Pod
	// StatusUpdateFrequency and StatusReportFrequency are the node status
	// periods (see node.RegistrarConfig).
	StatusUpdateFrequency, StatusReportFrequency time.Duration
	// NoCreate leaves the Node's creation to someone else (registerNode
	// false; see node.RegistrarConfig).
	NoCreate bool
}

// Start builds the parts that need the local node and the runtime, and
// runs them with spawn until its context ends. Stop flushes the events.
func (c *Cluster) Start(sc StartConfig, spawn func(string, func(context.Context) error)) {
	log := c.cfg.Logger
	c.pods = sc.Pods
	heartbeat, err := kubernetes.NewForConfig(heartbeatConfig(c.rest, sc.StatusUpdateFrequency))
	if err != nil {
		// The same config built the main client; this cannot fail where
		// that did not, but a node with one client still works.
		log.Warn("heartbeat client: falling back to the main client", "error", err)
		heartbeat = nil
	}
	c.registrar = node.NewRegistrar(node.RegistrarConfig{
		Client: c.client, HeartbeatClient: heartbeat, Node: sc.Node, Ready: sc.Ready, Pressure: sc.Pressure, RuntimeHandlers: sc.RuntimeHandlers, ExtendedResources: sc.ExtendedResources,
		StatusUpdateFrequency: sc.StatusUpdateFrequency,
		StatusReportFrequency: sc.StatusReportFrequency,
		NoCreate:              sc.NoCreate,
		Logger:                log.Named("node"),
	})
	c.syncer = status.NewSyncer(status.SyncerConfig{
		Client: c.client, Statuses: sc.Statuses, APIPod: c.apiPod, Logger: log.Named("status"),
	})
	c.mirrors = mirror.New(mirror.Config{
		Client: c.client, Pods: sc.Pods, Node: c.registrar.Node,
		SourcesSeen: sc.SourcesSeen, Started: sc.StartedStatic, Logger: log.Named("mirror"),
	})
	c.events = record.NewBroadcaster()
	c.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	c.recorder = c.events.NewRecorder(scheme.Scheme, v1.EventSource{Component: "wasmlet", Host: c.cfg.NodeName})
	spawn("node registration", c.registrar.Run)
	spawn("status sync", c.syncer.Run)
	spawn("mirror pods", c.mirrors.Run)
}

// heartbeatConfig is the node's heartbeat client config (Lease renewals and
// node status posts), from the main one as the kubelet makes its own: no
// client-side rate limit, so no burst of pod status writes delays a
// renewal, and a timeout of a status period (statusEvery, 10 s by default),
// at most the Lease's 40 s, so a request the API server does not answer
// gives way to the next renewal instead of holding it.
func heartbeatConfig(rc *rest.Config, statusEvery time.Duration) *rest.Config {
	if statusEvery <= 0 {
		statusEvery = 10 * time.Second
	}
	hb := rest.CopyConfig(rc)
	hb.QPS, hb.Burst, hb.RateLimiter = -1, 0, nil
	hb.Timeout = min(statusEvery, 40*time.Second)
	return hb
}

// Stop flushes and stops the event broadcaster.
func (c *Cluster) Stop() {
	if c != nil && c.events != nil {
		c.events.Shutdown()
	}
}

// apiPod is the API server's object for a pod the agent runs: the pod as the
// API source last delivered it, or a static pod's mirror pod. A mirror of
// another static pod of the same full name (the one a changed manifest
// replaces, until its mirror is replaced too) is not this pod's: its
// status and events are not written there, as the kubelet's status manager
// skips a pod whose mirror translates to another UID.
func (c *Cluster) apiPod(p *v1.Pod) (*v1.Pod, bool) {
	if config.IsStatic(p) {
		m, ok := c.pods.MirrorPodByPod(p)
		if !ok || m.DeletionTimestamp != nil || !pod.IsMirrorPodOf(m, p) {
			return nil, false
		}
		return m, true
	}
	return c.pods.PodByUID(p.UID)
}

// Changed is called after each config update: mirrors and statuses may
// need work (a mirror pod appeared or went).
func (c *Cluster) Changed() {
	if c == nil || c.syncer == nil {
		return
	}
	c.mirrors.Kick()
	c.syncer.Kick()
}

// Terminated lets the status sync delete a pod being deleted.
func (c *Cluster) Terminated(p *v1.Pod) {
	if c != nil && c.syncer != nil {
		c.syncer.PodTerminated(p.UID)
	}
}

// Event records a Kubernetes Event about a pod (a static pod's event goes
// to its mirror pod).
func (c *Cluster) Event(p *v1.Pod, eventType, reason, message string) {
	if c == nil || c.recorder == nil {
		return
	}
	var obj runtime.Object = p
	if m, ok := c.apiPod(p); ok {
		obj = m
	}
	c.recorder.Event(obj, eventType, reason, message)
}

// NodeEvent records a Kubernetes Event about the node, referring to it as
// the kubelet does (kind Node, the node's name as name and UID).
func (c *Cluster) NodeEvent(eventType, reason, message string) {
	if c == nil || c.recorder == nil {
		return
	}
	ref := &v1.ObjectReference{Kind: "Node", Name: c.cfg.NodeName, UID: types.UID(c.cfg.NodeName)}
	c.recorder.Event(ref, eventType, reason, message)
}

// ClusterCA is the certificate authority of the kubeconfig's current
// cluster: a file it names, or else the PEM it holds; both empty when it
// has none.
func ClusterCA(kubeconfig string) (file string, pem []byte, err error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return "", nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	return rc.TLSClientConfig.CAFile, rc.TLSClientConfig.CAData, nil
}

// countingTransport counts requests by method, resource and code.
type countingTransport struct {
	next     http.RoundTripper
	requests *prometheus.CounterVec
}

// RoundTrip sends r and counts it.
func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	code := "error"
	if err == nil {
		code = fmt.Sprint(resp.StatusCode)
	}
	method := r.Method
	if w := r.URL.Query().Get("watch"); w == "true" || w == "1" {
		method = "WATCH"
	}
	t.requests.WithLabelValues(method, resourceOf(r.URL.Path), code).Inc()
	return resp, err
}

// resourceOf turns /api/v1/namespaces/ns/pods/name/status into "pods/status".
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// Drop the group/version prefix: api/v1 or apis/<group>/<version>.
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return path
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return "namespaces"
	case 1, 2:
		return parts[0]
	default:
		return parts[0] + "/" + parts[2]
	}
}
