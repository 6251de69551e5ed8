// Package crimetrics times the agent's CRI calls: wrappers of the CRI
// runtime and image services that observe every pod-lifecycle call in
// wasmlet_cri_call_duration_seconds{method}, so /metrics shows where a pod
// start or stop spends its time (the kubelet's
// kubelet_runtime_operations_duration_seconds).
package crimetrics

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Metrics is the CRI call histogram.
type Metrics struct {
	calls *prometheus.HistogramVec
}

// New registers wasmlet_cri_call_duration_seconds with reg (nil registers
// nowhere).
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "wasmlet_cri_call_duration_seconds",
		Help:    "Duration of CRI calls by method (errors included).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
	}, []string{"method"})}
	if reg != nil {
		if err := reg.Register(m.calls); err != nil {
			return nil, fmt.Errorf("crimetrics: register: %w", err)
		}
	}
	return m, nil
}

// Wrap returns rs and is with their calls timed; it fits runtime.Config's
// Instrument.
func (m *Metrics) Wrap(rs cri.RuntimeService, is cri.ImageManagerService) (cri.RuntimeService, cri.ImageManagerService) {
	return &runtimeService{rs, m}, &imageService{is, m}
}

// observe records a call of method that began at start.
func (m *Metrics) observe(method string, start time.Time) {
	m.calls.WithLabelValues(method).Observe(time.Since(start).Seconds())
}

// runtimeService times the calls a pod's lifecycle makes; the others
// (streaming, stats, updates) pass through the embedded service untimed.
type runtimeService struct {
	cri.RuntimeService
	m *Metrics
}

func (r *runtimeService) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	defer r.m.observe("RunPodSandbox", time.Now())
	return r.RuntimeService.RunPodSandbox(ctx, config, handler)
}

func (r *runtimeService) StopPodSandbox(ctx context.Context, id string) error {
	defer r.m.observe("StopPodSandbox", time.Now())
	return r.RuntimeService.StopPodSandbox(ctx, id)
}

func (r *runtimeService) RemovePodSandbox(ctx context.Context, id string) error {
	defer r.m.observe("RemovePodSandbox", time.Now())
	return r.RuntimeService.RemovePodSandbox(ctx, id)
}

func (r *runtimeService) PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	defer r.m.observe("PodSandboxStatus", time.Now())
	return r.RuntimeService.PodSandboxStatus(ctx, id, verbose)
}

func (r *runtimeService) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	defer r.m.observe("ListPodSandbox", time.Now())
	return r.RuntimeService.ListPodSandbox(ctx, filter)
}

func (r *runtimeService) CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	defer r.m.observe("CreateContainer", time.Now())
	return r.RuntimeService.CreateContainer(ctx, sandboxID, config, sandboxConfig)
}

func (r *runtimeService) StartContainer(ctx context.Context, id string) error {
	defer r.m.observe("StartContainer", time.Now())
	return r.RuntimeService.StartContainer(ctx, id)
}

func (r *runtimeService) StopContainer(ctx context.Context, id string, timeout int64) error {
	defer r.m.observe("StopContainer", time.Now())
	return r.RuntimeService.StopContainer(ctx, id, timeout)
}

func (r *runtimeService) RemoveContainer(ctx context.Context, id string) error {
	defer r.m.observe("RemoveContainer", time.Now())
	return r.RuntimeService.RemoveContainer(ctx, id)
}

func (r *runtimeService) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	defer r.m.observe("ListContainers", time.Now())
	return r.RuntimeService.ListContainers(ctx, filter)
}

func (r *runtimeService) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	defer r.m.observe("ContainerStatus", time.Now())
	return r.RuntimeService.ContainerStatus(ctx, id, verbose)
}

func (r *runtimeService) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	defer r.m.observe("ExecSync", time.Now())
	return r.RuntimeService.ExecSync(ctx, id, cmd, timeout)
}

func (r *runtimeService) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	defer r.m.observe("Status", time.Now())
	return r.RuntimeService.Status(ctx, verbose)
}

// imageService times the image calls a container start makes.
type imageService struct {
	cri.ImageManagerService
	m *Metrics
}

func (i *imageService) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	defer i.m.observe("ImageStatus", time.Now())
	return i.ImageManagerService.ImageStatus(ctx, image, verbose)
}

func (i *imageService) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	defer i.m.observe("PullImage", time.Now())
	return i.ImageManagerService.PullImage(ctx, image, auth, sandboxConfig)
}

func (i *imageService) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	defer i.m.observe("ListImages", time.Now())
	return i.ImageManagerService.ListImages(ctx, filter)
}
