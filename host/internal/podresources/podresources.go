// Package podresources serves the kubelet's pod-resources gRPC API
// (k8s.io/kubelet/pkg/apis/podresources v1, and v1alpha1's List) on the
// unix socket <RootDir>/pod-resources/kubelet.sock, where monitoring agents
// and device plugins look for it.
//
// The node has no device, CPU or memory manager: nothing is assigned
// exclusively to a container. So the server answers as the kubelet does
// with those managers at their none policies: every active pod with its
// containers (restartable init containers first, then the app containers),
// each with no devices, no CPU IDs, no memory blocks and no dynamic
// resources, and nothing allocatable.
package podresources

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	criutil "k8s.io/cri-client/pkg/util"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/kubelet/pkg/apis/podresources/v1alpha1"

	"github.com/wasmlet/wasmlet/host/internal/container"
)

// The kubelet's rate limit of the API (its DefaultQPS and
// DefaultBurstTokens): a client calling faster gets ResourceExhausted.
const (
	DefaultQPS   = 100
	DefaultBurst = 10
)

// SocketPath is the API's socket under a root directory, as the kubelet's
// <root-dir>/pod-resources/kubelet.sock.
func SocketPath(rootDir string) string {
	return filepath.Join(rootDir, "pod-resources", "kubelet.sock")
}

// Config configures a Server.
type Config struct {
	// RootDir is the agent's root directory; the socket is SocketPath(RootDir).
	RootDir string
	// ActivePods returns the pods List and Get answer about: admitted and
	// not terminal (the kubelet's active pods). Required.
	ActivePods func() []*v1.Pod
	// Pods returns every pod of the pod manager, terminal ones included,
	// which the deprecated v1alpha1 List answers about as the kubelet's
	// does; nil means ActivePods.
	Pods func() []*v1.Pod
	// QPS and Burst bound the calls of all clients together; zero means
	// DefaultQPS and DefaultBurst.
	QPS   float64
	Burst int
	// Logger receives start and stop; nil discards.
	Logger hclog.Logger
	// Registerer receives the kubelet's pod_resources_endpoint metrics;
	// nil registers none.
	Registerer prometheus.Registerer
}

// Server is the pod-resources gRPC server. Create it with New, which
// listens; Run serves.
type Server struct {
	cfg     Config
	log     hclog.Logger
	path    string
	ln      net.Listener
	sock    os.FileInfo // the socket New made, so that Run removes only it
	grpc    *grpc.Server
	metrics metrics
}

// metrics are the kubelet's pod_resources_endpoint counters, by
// server_api_version.
type metrics struct {
	total, list, get, getErrors, allocatable *prometheus.CounterVec
}

func newMetrics() metrics {
	c := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubelet_pod_resources_endpoint_" + name, Help: help,
		}, []string{"server_api_version"})
	}
	return metrics{
		total:       c("requests_total", "Cumulative number of requests to the PodResource endpoint, by server API version."),
		list:        c("requests_list", "Number of requests to the PodResource List endpoint, by server API version."),
		get:         c("requests_get", "Number of requests to the PodResource Get endpoint, by server API version."),
		getErrors:   c("errors_get", "Number of requests to the PodResource Get endpoint which returned an error, by server API version."),
		allocatable: c("requests_get_allocatable", "Number of requests to the PodResource GetAllocatableResources endpoint, by server API version."),
	}
}

// New registers the metrics and listens on the socket: its directory is
// made (0750), a socket left by an earlier run is replaced, as the
// kubelet's listener does.
func New(cfg Config) (*Server, error) {
	if cfg.RootDir == "" || cfg.ActivePods == nil {
		return nil, errors.New("podresources: RootDir and ActivePods are required")
	}
	if cfg.Pods == nil {
		cfg.Pods = cfg.ActivePods
	}
	if cfg.QPS <= 0 {
		cfg.QPS = DefaultQPS
	}
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultBurst
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	s := &Server{cfg: cfg, log: cfg.Logger, path: SocketPath(cfg.RootDir), metrics: newMetrics()}
	if cfg.Registerer != nil {
		m := s.metrics
		for _, c := range []prometheus.Collector{m.total, m.list, m.get, m.getErrors, m.allocatable} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("podresources: register metrics: %w", err)
			}
		}
	}
	ln, err := criutil.CreateListener("unix://" + s.path)
	if err != nil {
		return nil, fmt.Errorf("podresources: listen on %s: %w", s.path, err)
	}
	if s.sock, err = os.Stat(s.path); err != nil {
		ln.Close()
		return nil, fmt.Errorf("podresources: listen on %s: %w", s.path, err)
	}
	s.ln = ln
	limiter := rate.NewLimiter(rate.Limit(cfg.QPS), cfg.Burst)
	s.grpc = grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if !limiter.Allow() {
			return nil, status.Error(codes.ResourceExhausted, "rejected by rate limit")
		}
		return handler(ctx, req)
	}))
	podresourcesv1.RegisterPodResourcesListerServer(s.grpc, &v1Server{s: s})
	v1alpha1.RegisterPodResourcesListerServer(s.grpc, &v1alpha1Server{s: s})
	return s, nil
}

// Path is the socket's path.
func (s *Server) Path() string { return s.path }

// Run serves until ctx is done, then stops the server and removes the
// socket (unless another server has replaced it since).
func (s *Server) Run(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- s.grpc.Serve(s.ln) }()
	s.log.Info("pod-resources API listening", "socket", s.path)
	var err error
	select {
	case err = <-done:
		err = fmt.Errorf("podresources: serve on %s: %w", s.path, err)
	case <-ctx.Done():
		s.grpc.Stop()
		<-done
	}
	if fi, e := os.Stat(s.path); e == nil && os.SameFile(fi, s.sock) {
		os.Remove(s.path)
	}
	return err
}

// v1Server is the v1 PodResourcesLister.
type v1Server struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	s *Server
}

// List answers with every active pod and its containers.
func (v *v1Server) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	v.s.count("v1", v.s.metrics.list)
	pods := v.s.cfg.ActivePods()
	out := &podresourcesv1.ListPodResourcesResponse{PodResources: make([]*podresourcesv1.PodResources, 0, len(pods))}
	for _, p := range pods {
		out.PodResources = append(out.PodResources, podResources(p))
	}
	return out, nil
}

// Get answers with one active pod and its containers; a pod that is not
// active is an error, in the kubelet's words.
func (v *v1Server) Get(_ context.Context, req *podresourcesv1.GetPodResourcesRequest) (*podresourcesv1.GetPodResourcesResponse, error) {
	v.s.count("v1", v.s.metrics.get)
	for _, p := range v.s.cfg.ActivePods() {
		if p.Name == req.PodName && p.Namespace == req.PodNamespace {
			return &podresourcesv1.GetPodResourcesResponse{PodResources: podResources(p)}, nil
		}
	}
	v.s.metrics.getErrors.WithLabelValues("v1").Inc()
	return nil, fmt.Errorf("pod %s in namespace %s not found", req.PodName, req.PodNamespace)
}

// GetAllocatableResources answers that nothing is allocatable: no device
// plugin registers devices, and CPUs and memory are not handed out
// exclusively (the kubelet's none policies answer the same).
func (v *v1Server) GetAllocatableResources(context.Context, *podresourcesv1.AllocatableResourcesRequest) (*podresourcesv1.AllocatableResourcesResponse, error) {
	v.s.count("v1", v.s.metrics.allocatable)
	return &podresourcesv1.AllocatableResourcesResponse{}, nil
}

// podResources is p's entry: its restartable init containers, then its
// containers, each with nothing assigned.
func podResources(p *v1.Pod) *podresourcesv1.PodResources {
	r := &podresourcesv1.PodResources{Name: p.Name, Namespace: p.Namespace}
	for i := range p.Spec.InitContainers {
		if c := &p.Spec.InitContainers[i]; container.IsSidecar(c) {
			r.Containers = append(r.Containers, &podresourcesv1.ContainerResources{Name: c.Name})
		}
	}
	for _, c := range p.Spec.Containers {
		r.Containers = append(r.Containers, &podresourcesv1.ContainerResources{Name: c.Name})
	}
	return r
}

// v1alpha1Server is the deprecated v1alpha1 PodResourcesLister.
type v1alpha1Server struct {
	v1alpha1.UnimplementedPodResourcesListerServer
	s *Server
}

// List answers with every pod of the pod manager and its app containers,
// as the kubelet's v1alpha1 List.
func (v *v1alpha1Server) List(context.Context, *v1alpha1.ListPodResourcesRequest) (*v1alpha1.ListPodResourcesResponse, error) {
	v.s.count("v1alpha1", nil)
	pods := v.s.cfg.Pods()
	out := &v1alpha1.ListPodResourcesResponse{PodResources: make([]*v1alpha1.PodResources, 0, len(pods))}
	for _, p := range pods {
		r := &v1alpha1.PodResources{Name: p.Name, Namespace: p.Namespace}
		for _, c := range p.Spec.Containers {
			r.Containers = append(r.Containers, &v1alpha1.ContainerResources{Name: c.Name})
		}
		out.PodResources = append(out.PodResources, r)
	}
	return out, nil
}

// count counts a request of version in the total and, if given, in the
// method's counter.
func (s *Server) count(version string, method *prometheus.CounterVec) {
	s.metrics.total.WithLabelValues(version).Inc()
	if method != nil {
		method.WithLabelValues(version).Inc()
	}
}
