// Package prober runs the containers' liveness, readiness and startup
// probes as the kubelet's prober does: one worker per container and probe
// kind, ticking at the probe's period; exec (CRI ExecSync), httpGet,
// tcpSocket and grpc handlers; initialDelaySeconds, timeoutSeconds,
// successThreshold and failureThreshold; the startup probe gating the
// other two. Readiness and startup results feed the pod status (Ready,
// Started); a liveness or startup failure kills the container, which the
// restart policy then restarts.
package prober

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Kind is a probe's kind.
type Kind string

// The probe kinds, named as the kubelet's metrics name them.
const (
	Liveness  Kind = "Liveness"
	Readiness Kind = "Readiness"
	Startup   Kind = "Startup"
)

// Runtime is what probing needs of the container runtime.
type Runtime interface {
	// ExecSync runs cmd in the container and returns its output and exit
	// code.
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, int, error)
	// KillContainer stops one container gracefully.
	KillContainer(ctx context.Context, pod *v1.Pod, container, containerID, message string, gracePeriod *int64) error
}

// Statuses gives the pods' latest statuses (container IDs, states, pod IP).
type Statuses interface {
	// PodStatus is the pod's last generated status.
	PodStatus(uid types.UID) (v1.PodStatus, bool)
}

// Recorder records Kubernetes Events about pods.
type Recorder interface {
	// Event records an event of eventType about pod.
	Event(pod *v1.Pod, eventType, reason, message string)
}

// Config configures a Manager.
type Config struct {
	// Runtime runs exec probes and kills containers.
	Runtime Runtime
	// Statuses tells the workers their container's state.
	Statuses Statuses
	// Events, when set, receives Unhealthy, ProbeWarning and Killing.
	Events Recorder
	// Changed is told of a pod whose readiness or startup result changed,
	// so its status is generated again.
	Changed func(uid types.UID)
	// Registerer receives prober_probe_total; nil registers nothing.
	Registerer prometheus.Registerer
	// Logger receives probe failures at debug; nil discards.
	Logger hclog.Logger
}

// Manager runs the probe workers and keeps their results.
type Manager struct {
	cfg    Config
	log    hclog.Logger
	probes *prometheus.CounterVec

	mu      sync.Mutex
	workers map[workerKey]*worker
	results map[resultKey]bool // success of a container instance's probe
}

type workerKey struct {
	uid       types.UID
	container string
	kind      Kind
}

type resultKey struct {
	containerID string // as in the pod status: "<runtime>://<id>"
	kind        Kind
}

// New checks cfg and registers the probe counter.
func New(cfg Config) (*Manager, error) {
	if cfg.Runtime == nil || cfg.Statuses == nil {
		return nil, errors.New("prober: Runtime and Statuses are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	m := &Manager{cfg: cfg, log: cfg.Logger, workers: map[workerKey]*worker{}, results: map[resultKey]bool{},
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prober_probe_total",
			Help: "Cumulative number of liveness, readiness and startup probes of containers, by result.",
		}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"})}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(m.probes); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// UpdatePod starts a worker for every probe of the pod's containers that
// has none (probes are immutable, so existing workers stay) and hands the
// workers the newest pod.
func (m *Manager) UpdatePod(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range probed(pod) {
		for kind, p := range map[Kind]*v1.Probe{Liveness: c.LivenessProbe, Readiness: c.ReadinessProbe, Startup: c.StartupProbe} {
			if p == nil {
				continue
			}
			k := workerKey{pod.UID, c.Name, kind}
			if w, ok := m.workers[k]; ok {
				w.setPod(pod)
				continue
			}
			w := newWorker(m, pod, c.Name, kind)
			m.workers[k] = w
			go w.run()
		}
	}
}

// probed are the containers that may have probes: the app containers and
// the restartable init containers (sidecars).
func probed(pod *v1.Pod) []*v1.Container {
	var out []*v1.Container
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			out = append(out, c)
		}
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

// RemovePod stops the pod's workers and forgets their results.
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, w := range m.workers {
		if k.uid == uid {
			w.stop() // the worker forgets its result as it ends
			delete(m.workers, k)
		}
	}
}

// poke makes the container's liveness and readiness workers probe now.
func (m *Manager) poke(uid types.UID, container string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, kind := range []Kind{Liveness, Readiness} {
		if w, ok := m.workers[workerKey{uid, container, kind}]; ok {
			w.poke()
		}
	}
}

// Stop stops every worker.
func (m *Manager) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, w := range m.workers {
		w.stop()
		delete(m.workers, k)
	}
}

// Started reports whether the container instance has passed its startup
// probe (true without one).
func (m *Manager) Started(c *v1.Container, containerID string) bool {
	if c.StartupProbe == nil {
		return true
	}
	return m.result(containerID, Startup)
}

// Ready reports whether the container instance passes its readiness
// probe (true without one). A container not started is not ready.
func (m *Manager) Ready(c *v1.Container, containerID string) bool {
	if !m.Started(c, containerID) {
		return false
	}
	if c.ReadinessProbe == nil {
		return true
	}
	return m.result(containerID, Readiness)
}

func (m *Manager) result(containerID string, kind Kind) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.results[resultKey{containerID, kind}]
}

// set records a result and reports whether it changed.
func (m *Manager) set(containerID string, kind Kind, success bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := resultKey{containerID, kind}
	old, had := m.results[k]
	m.results[k] = success
	return !had || old != success
}

// forget drops a container instance's result.
func (m *Manager) forget(containerID string, kind Kind) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.results, resultKey{containerID, kind})
}
