package agent

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	"github.com/wasmlet/wasmlet/host/internal/config"
	"github.com/wasmlet/wasmlet/host/internal/config/apiserver"
	"github.com/wasmlet/wasmlet/host/internal/mirror"
	"github.com/wasmlet/wasmlet/host/internal/node"
	"github.com/wasmlet/wasmlet/host/internal/status"
)

// cluster is what the agent runs when it joins a cluster (Config.KubeConfig):
// the API client, node registration and lease, the status sync, mirror pods
// and events. Standalone agents have none (Agent.cluster is nil).
type cluster struct {
	client    kubernetes.Interface
	registrar *node.Registrar
	syncer    *status.Syncer
	mirrors   *mirror.Manager
	events    record.EventBroadcaster
	recorder  record.EventRecorder
}

// newCluster builds the API client from the kubeconfig, counting every
// request in wasmlet_apiserver_requests_total.
func newCluster(cfg Config, reg prometheus.Registerer) (*cluster, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.KubeConfig)
	if err != nil {
		return nil, fmt.Errorf("agent: kubeconfig %s: %w", cfg.KubeConfig, err)
	}
	rc.QPS, rc.Burst = cfg.KubeAPIQPS, cfg.KubeAPIBurst
	rc.UserAgent = "wasmlet/" + Version
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wasmlet_apiserver_requests_total",
		Help: "Requests to the API server by method, resource and subresource, and status code.",
	}, []string{"method", "resource", "code"})
	if reg != nil {
		if err := reg.Register(requests); err != nil {
			return nil, fmt.Errorf("agent: register metrics: %w", err)
		}
	}
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &countingTransport{next: rt, requests: requests} })
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("agent: kubeconfig %s: %w", cfg.KubeConfig, err)
	}
	return &cluster{client: client}, nil
}

// source is the API server pod source.
func (c *cluster) source(cfg Config, log hclog.Logger) config.Source {
	return apiserver.New(apiserver.Config{Client: c.client, NodeName: cfg.NodeName, Logger: log.Named("api")})
}

// start builds the parts that need the local node and the runtime, and runs
// them with spawn.
func (a *Agent) startCluster(spawn func(string, func(context.Context) error)) {
	c := a.cluster
	c.registrar = node.NewRegistrar(node.RegistrarConfig{
		Client: c.client, Node: a.node,
		Ready: func() error {
			if err := a.runtimeReady(); err != nil {
				return err
			}
			if err := a.pleg.Healthy(); err != nil {
				return fmt.Errorf("PLEG is not healthy: %w", err)
			}
			return nil
		},
		StatusUpdateFrequency: a.cfg.NodeStatusUpdateFrequency,
		StatusReportFrequency: a.cfg.NodeStatusReportFrequency,
		Logger:                a.log.Named("node"),
	})
	c.syncer = status.NewSyncer(status.SyncerConfig{
		Client: c.client, Statuses: a.statuses, APIPod: a.apiPod, Logger: a.log.Named("status"),
	})
	c.mirrors = mirror.New(mirror.Config{
		Client: c.client, Pods: a.pods, Node: c.registrar.Node,
		SourcesSeen: a.podConfig.SeenAllSources, Logger: a.log.Named("mirror"),
	})
	c.events = record.NewBroadcaster()
	c.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	c.recorder = c.events.NewRecorder(scheme.Scheme, v1.EventSource{Component: "wasmlet", Host: a.cfg.NodeName})
	spawn("node registration", c.registrar.Run)
	spawn("status sync", c.syncer.Run)
	spawn("mirror pods", c.mirrors.Run)
}

// stopCluster flushes and stops the event broadcaster.
func (a *Agent) stopCluster() {
	if a.cluster != nil && a.cluster.events != nil {
		a.cluster.events.Shutdown()
	}
}

// apiPod is the API server's object for a pod the agent runs: the pod as the
// API source last delivered it, or a static pod's mirror pod.
func (a *Agent) apiPod(p *v1.Pod) (*v1.Pod, bool) {
	if config.IsStatic(p) {
		m, ok := a.pods.MirrorPodByPod(p)
		if !ok || m.DeletionTimestamp != nil {
			return nil, false
		}
		return m, true
	}
	return a.pods.PodByUID(p.UID)
}

// clusterChanged is called after each config update: mirrors and statuses
// may need work (a mirror pod appeared or went).
func (a *Agent) clusterChanged() {
	if a.cluster == nil || a.cluster.syncer == nil {
		return
	}
	a.cluster.mirrors.Kick()
	a.cluster.syncer.Kick()
}

// podTerminatedInCluster lets the status sync delete a pod being deleted.
func (a *Agent) podTerminatedInCluster(p *v1.Pod) {
	if a.cluster != nil && a.cluster.syncer != nil {
		a.cluster.syncer.PodTerminated(p.UID)
	}
}

// event records a Kubernetes Event about a pod when in a cluster (a static
// pod's event goes to its mirror pod).
func (a *Agent) event(p *v1.Pod, eventType, reason, message string) {
	if a.cluster == nil || a.cluster.recorder == nil {
		return
	}
	var obj runtime.Object = p
	if m, ok := a.apiPod(p); ok {
		obj = m
	}
	a.cluster.recorder.Event(obj, eventType, reason, message)
}

// countingTransport counts requests by method, resource and code.
type countingTransport struct {
	next     http.RoundTripper
	requests *prometheus.CounterVec
}

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
