// Package devicemanager is the node's device plugin manager, as the
// kubelet's pkg/kubelet/cm/devicemanager: device plugins (GPUs, NICs, FPGAs
// …) register on <root-dir>/device-plugins/kubelet.sock with the
// deviceplugin v1beta1 API, the manager follows each one's ListAndWatch
// stream, reports its resource in the node's capacity (every device) and
// allocatable (the healthy ones), allocates devices to the containers that
// request the resource when their pod is admitted, and gives the plugin's
// answer (environment, mounts, device nodes, annotations, CDI devices) to
// the container's CRI config. Allocations are checkpointed under the root
// directory, so a restarted agent keeps them.
package devicemanager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// SocketName is the registration socket's name in the plugin directory.
const SocketName = "kubelet.sock"

// DefaultGracePeriod is how long a resource whose plugin stopped keeps its
// capacity (the kubelet's endpointStopGracePeriod).
const DefaultGracePeriod = 5 * time.Minute

// Config configures New.
type Config struct {
	// RootDir is the agent's root directory; the plugin directory is
	// <RootDir>/device-plugins.
	RootDir string
	// ActivePods lists the pods that hold the node's resources; an
	// allocation of a pod no longer among them is freed before devices are
	// allocated to another. Nil frees only through RemovePod.
	ActivePods func() []*v1.Pod
	// GracePeriod is how long a resource whose plugin stopped keeps its
	// capacity; 0 means DefaultGracePeriod.
	GracePeriod time.Duration
	// Logger receives the manager's logs; nil discards.
	Logger hclog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Manager is the device plugin manager. Build it with New; Run serves the
// registration socket.
type Manager struct {
	cfg Config
	dir string
	log hclog.Logger

	// allocMu serialises allocations: devices are chosen and the plugin
	// asked without mu held.
	allocMu sync.Mutex

	mu        sync.Mutex
	endpoints map[string]*endpoint
	// healthy and unhealthy hold a resource's device IDs from its plugin's
	// last list; a resource is reported once it has an entry.
	healthy   map[string]map[string]bool
	unhealthy map[string]map[string]bool
	// removed are resources whose plugin stopped longer than the grace
	// period ago; they are reported with 0, as the kubelet keeps them in
	// the node status to tell them from cluster-level resources.
	removed     map[string]bool
	allocations allocations
}

// endpoint is a registered plugin: its connection, options and whether its
// ListAndWatch stream has ended.
type endpoint struct {
	resource string
	socket   string
	conn     *grpc.ClientConn
	client   pluginapi.DevicePluginClient
	options  *pluginapi.DevicePluginOptions
	stopped  time.Time // zero while the stream runs
}

// New returns a Manager with the allocations of the checkpoint in
// <RootDir>/device-plugins, if there is one.
func New(cfg Config) (*Manager, error) {
	if cfg.RootDir == "" {
		return nil, errors.New("devicemanager: RootDir is required")
	}
	if cfg.GracePeriod <= 0 {
		cfg.GracePeriod = DefaultGracePeriod
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m := &Manager{
		cfg: cfg, dir: filepath.Join(cfg.RootDir, "device-plugins"), log: cfg.Logger,
		endpoints: map[string]*endpoint{}, healthy: map[string]map[string]bool{}, unhealthy: map[string]map[string]bool{},
		removed: map[string]bool{}, allocations: allocations{},
	}
	if err := m.readCheckpoint(); err != nil {
		return nil, err
	}
	return m, nil
}

// Dir is the plugin directory, where plugins put their sockets.
func (m *Manager) Dir() string { return m.dir }

// SocketPath is the registration socket.
func (m *Manager) SocketPath() string { return filepath.Join(m.dir, SocketName) }

// Run serves the Registration service on SocketPath until ctx is done,
// then closes every plugin connection. Stale sockets in the directory
// (those of plugins registered with an earlier agent) are removed first, so
// the plugins, which watch for the registration socket, register again.
func (m *Manager) Run(ctx context.Context) error {
	if err := os.MkdirAll(m.dir, 0o750); err != nil {
		return fmt.Errorf("devicemanager: %w", err)
	}
	if err := m.removeSockets(); err != nil {
		return err
	}
	l, err := net.Listen("unix", m.SocketPath())
	if err != nil {
		return fmt.Errorf("devicemanager: listen on %s: %w", m.SocketPath(), err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, &registration{m: m, ctx: ctx})
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	m.log.Info("device plugin registration serving", "socket", m.SocketPath())
	select {
	case <-ctx.Done():
		srv.Stop()
		<-errc
	case err = <-errc:
		err = fmt.Errorf("devicemanager: serving %s: %w", m.SocketPath(), err)
	}
	m.mu.Lock()
	for _, e := range m.endpoints {
		e.conn.Close()
	}
	m.mu.Unlock()
	return err
}

// removeSockets removes the sockets in the plugin directory.
func (m *Manager) removeSockets() error {
	ents, err := os.ReadDir(m.dir)
	if err != nil {
		return fmt.Errorf("devicemanager: %w", err)
	}
	for _, e := range ents {
		if e.Type()&os.ModeSocket == 0 {
			continue
		}
		if err := os.Remove(filepath.Join(m.dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("devicemanager: remove stale socket: %w", err)
		}
	}
	return nil
}

// Resources are the device plugins' resources for the node status: in
// capacity every device a plugin listed, in allocatable the healthy ones.
// A resource whose plugin stopped has allocatable 0 and keeps its capacity
// for the grace period; after it, and for a resource removed so, both are 0.
func (m *Manager) Resources() (capacity, allocatable v1.ResourceList) {
	capacity, allocatable = v1.ResourceList{}, v1.ResourceList{}
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	count := func(n int) resource.Quantity { return *resource.NewQuantity(int64(n), resource.DecimalSI) }
	for name := range m.removed {
		capacity[v1.ResourceName(name)], allocatable[v1.ResourceName(name)] = count(0), count(0)
	}
	for name, healthy := range m.healthy {
		e := m.endpoints[name]
		if e == nil || (!e.stopped.IsZero() && now.Sub(e.stopped) > m.cfg.GracePeriod) {
			capacity[v1.ResourceName(name)], allocatable[v1.ResourceName(name)] = count(0), count(0)
			continue
		}
		capacity[v1.ResourceName(name)] = count(len(healthy) + len(m.unhealthy[name]))
		allocatable[v1.ResourceName(name)] = count(len(healthy))
	}
	return capacity, allocatable
}

// update records a plugin's list of devices.
func (m *Manager) update(e *endpoint, devices []*pluginapi.Device) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.endpoints[e.resource] != e {
		return // a newer registration of the resource replaced it
	}
	healthy, unhealthy := map[string]bool{}, map[string]bool{}
	for _, d := range devices {
		if d.Health == pluginapi.Healthy {
			healthy[d.ID] = true
		} else {
			unhealthy[d.ID] = true
		}
	}
	m.healthy[e.resource], m.unhealthy[e.resource] = healthy, unhealthy
	m.log.Debug("devices listed", "resource", e.resource, "healthy", len(healthy), "unhealthy", len(unhealthy))
}

// stopped marks a plugin's devices unhealthy and starts its grace period:
// its ListAndWatch stream ended.
func (m *Manager) stopped(e *endpoint, why error) {
	e.conn.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.endpoints[e.resource] != e {
		return
	}
	e.stopped = m.cfg.Now()
	unhealthy := m.unhealthy[e.resource]
	if unhealthy == nil {
		unhealthy = map[string]bool{}
	}
	for id := range m.healthy[e.resource] {
		unhealthy[id] = true
	}
	m.healthy[e.resource], m.unhealthy[e.resource] = map[string]bool{}, unhealthy
	m.log.Warn("device plugin stopped; its devices are unhealthy", "plugin", e.socket, "resource", e.resource, "error", why, "capacity_kept_for", m.cfg.GracePeriod)
}

// podName names a pod in errors and logs.
func podName(p *v1.Pod) string { return p.Namespace + "/" + p.Name + " (" + string(p.UID) + ")" }

// forgetPod drops a pod's allocations; the caller holds mu.
func (m *Manager) forgetPod(uid types.UID) bool {
	if _, ok := m.allocations[uid]; !ok {
		return false
	}
	delete(m.allocations, uid)
	return true
}
