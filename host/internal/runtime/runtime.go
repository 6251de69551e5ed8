// Package runtime drives a CRI v1 runtime (containerd, CRI-O or the
// embedded WASI runtime) through k8s.io/cri-client: it reads pods' state
// (GetPods, GetPodStatus), brings a pod to its spec in the kubelet's seven
// steps (SyncPod), kills pods gracefully (KillPod) and collects garbage.
package runtime

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wasmlet/wasmlet/host/internal/cgroups"
	"github.com/wasmlet/wasmlet/host/internal/container"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	criclient "k8s.io/cri-client/pkg"
	"k8s.io/utils/ptr"

	"github.com/wasmlet/wasmlet/host/internal/objects"
	"github.com/wasmlet/wasmlet/host/internal/podenv"
	"github.com/wasmlet/wasmlet/host/internal/volumes"
)

// Volumes gives the host path behind a pod's volume (volumes.Manager).
type Volumes interface {
	// Path is the host path of the pod's volume name and whether the
	// kubelet mounts that kind of volume read-only.
	Path(pod *v1.Pod, name string) (path string, readOnly bool, err error)
}

// Env resolves a container's environment (podenv.Resolver).
type Env interface {
	// Env is the container's environment, in order; podIPs are its
	// sandbox's IPs.
	Env(ctx context.Context, pod *v1.Pod, c *v1.Container, podIPs []string) ([]podenv.EnvVar, error)
}

// Config configures a Manager.
type Config struct {
	// Endpoint is the CRI runtime endpoint, e.g. unix:///run/containerd/containerd.sock.
	Endpoint string
	// ImageEndpoint is the CRI image endpoint; empty means Endpoint.
	ImageEndpoint string
	// Timeout bounds each CRI call (and the initial connection); 0 means 2 min.
	Timeout time.Duration
	// RootDir holds pod directories: <RootDir>/pods/<uid>/{etc-hosts,containers,volumes}.
	RootDir string
	// LogSymlinkDir is where each container's log gets a symbolic link
	// named as the kubelet names it (<pod>_<namespace>_<container>-<id>.log),
	// /var/log/containers on a node; empty makes none.
	LogSymlinkDir string
	// PodLogsDir is the root of container logs:
	// <PodLogsDir>/<namespace>_<pod>_<uid>/<container>/<restartCount>.log.
	PodLogsDir string
	// ClusterDomain is the cluster's DNS domain (e.g. cluster.local), for
	// pods' FQDNs; empty when the node has none.
	ClusterDomain string
	// RuntimeClasses resolves each pod's spec.runtimeClassName to the
	// handler passed to RunPodSandbox (host/internal/runtimeclass). Nil
	// gives pods naming no RuntimeClass the default handler ("") and fails
	// the sandbox of a pod naming one.
	RuntimeClasses RuntimeClasses
	// Volumes gives the host path behind each pod volume; the volume
	// manager has set them up before SyncPod. Nil means a volume manager
	// with no API server (emptyDir and hostPath work, the API-data
	// volumes fail with a clear error).
	Volumes Volumes
	// Env resolves a container's environment; nil means a resolver with
	// no API server.
	Env Env
	// Credentials, when not nil, gives the credentials an image pull
	// presents to the registry (host/internal/imagecreds); nil pulls
	// anonymously.
	Credentials Credentials
	// Hooks, when not nil, is called at lifecycle points.
	Hooks container.Hooks
	// Devices, when not nil, gives containers the devices the node's
	// device plugins allocated them (host/internal/devicemanager).
	Devices Devices
	// Cgroups, when not nil, is the pod cgroup hierarchy: each sandbox is
	// created under its pod's cgroup, made first, and the cgroups of pods
	// gone from the runtime are removed by GarbageCollect. Nil leaves the
	// cgroups to the runtime (the embedded WASI runtime has none).
	Cgroups Cgroups
	// Actuation, when not nil, records the resources applied to each
	// container (host/internal/allocation): SyncPod resizes the running
	// containers whose pod's allocation differs from them. Nil resizes
	// nothing.
	Actuation Actuation
	// DNS, when not nil, gives each sandbox its resolver configuration
	// (host/internal/dns); nil leaves it to the runtime (the host's).
	DNS DNS
	// Swap is how containers are kept from swapping (the kubelet's
	// NoSwap): by the cgroup v1 memory+swap limit or v2's memory.swap.max.
	Swap cgroups.Swap
	// HugePageSizes are the node's huge page sizes ("2MB"): each
	// container gets a limit for every one, 0 unless it asks for pages.
	HugePageSizes []string
	// MemoryCapacity is the node's memory in bytes, for the containers'
	// OOM score adjustment by QoS class; 0 gives Burstable containers 999.
	MemoryCapacity int64
	// Logger receives structured logs; nil means no logs.
	Logger hclog.Logger
	// Instrument, when set, wraps the CRI services once connected (e.g.
	// crimetrics timing every call).
	Instrument func(cri.RuntimeService, cri.ImageManagerService) (cri.RuntimeService, cri.ImageManagerService)
}

// Credentials finds the credentials of an image pull (imagecreds.Resolver).
type Credentials interface {
	// Credentials returns the credentials to try in order when pulling
	// image for pod; none means an anonymous pull. The error tells what
	// could not be read (a missing Secret, a failing provider): the pull
	// goes on with what was found and its failure message carries it.
	Credentials(ctx context.Context, pod *v1.Pod, image string) ([]*runtimeapi.AuthConfig, error)
}

// RuntimeClasses resolves a pod's RuntimeClass (runtimeclass.Manager).
type RuntimeClasses interface {
	// Handler is the CRI runtime handler of the pod's RuntimeClass, ""
	// for a pod naming none; an error fails the pod's sandbox creation
	// (retried with the pod's sync).
	Handler(pod *v1.Pod) (string, error)
}

// Devices applies device plugins' allocations (host/internal/devicemanager).
type Devices interface {
	// ApplyDevices adds to a container's CRI config what the device
	// plugins answered for its devices (environment, mounts, device nodes,
	// annotations, CDI devices); an error fails the container's creation
	// (CreateContainerConfigError), retried with the pod's sync.
	ApplyDevices(ctx context.Context, pod *v1.Pod, c *v1.Container, cfg *runtimeapi.ContainerConfig) error
}

// DNS makes a pod's resolver configuration (host/internal/dns).
type DNS interface {
	// ForPod is the pod's DNS config and a warning when it was cut to the
	// resolver's limits or fell back to the host's.
	ForPod(pod *v1.Pod) (*runtimeapi.DNSConfig, string, error)
}

// Cgroups is the pod cgroup hierarchy (host/internal/cgroups).
type Cgroups interface {
	// Parent is the pod's cgroup as the sandbox's CgroupParent.
	Parent(pod *v1.Pod) string
	// Ensure makes the pod's cgroup and writes its limits.
	Ensure(pod *v1.Pod) error
	// Resize writes one resource (cpu or memory) of the pod's cgroup from
	// the pod's resources, for an in-place resize.
	Resize(pod *v1.Pod, r v1.ResourceName) error
	// MemoryUsage is the memory the pod's cgroup uses, in bytes.
	MemoryUsage(pod *v1.Pod) (int64, error)
	// Remove removes a pod's cgroup; an error means it is still in use.
	Remove(uid types.UID) error
	// Pods lists the UIDs of the pod cgroups that exist.
	Pods() []types.UID
}

// Manager is a connection to a CRI runtime plus the kubelet's logic on top
// of it. It is safe for concurrent use by many pod workers.
type Manager struct {
	cfg     Config
	rs      cri.RuntimeService
	is      cri.ImageManagerService
	log     hclog.Logger
	name    string // runtime name, for "<name>://<id>"
	version string

	mu      sync.Mutex
	reasons map[reasonKey]reason // last start failure per container
	// probeKilled are the container instances stopped for a failed
	// liveness or startup probe, by ID, with when (pruned after a day).
	probeKilled instances
	// postStopped are the container instances the PostStop hooks were
	// called for.
	postStopped instances
	// probeKills counts, by pod, the kills for a failed probe still
	// running (PreStop hooks, then the stop): SyncPod leaves such a pod
	// alone until they end, as the kubelet's sync, which makes that kill
	// itself, does nothing else for the pod meanwhile.
	probeKills map[types.UID]int

	// fsSlots bounds the goroutines blocked in pod-directory syscalls
	// (each holds an OS thread); a mkdir can take milliseconds of wall
	// time on a busy node, so the bound is generous.
	fsSlots chan struct{}

	startedFn atomic.Pointer[func(c *v1.Container, containerID string) bool]

	// rroHandlers are the runtime handlers that support recursive
	// read-only mounts, from the runtime's last Status (Health).
	rroHandlers atomic.Pointer[map[string]bool]

	// lacks holds the stats calls the runtime answered Unimplemented:
	// they are not asked again (the CRI client logs every failed call
	// as an error) and the agent says so once.
	lacks sync.Map // call name → struct{}

	netMu      sync.Mutex
	netChecked time.Time // when netErr was last read from the runtime
	netErr     error     // nil when the runtime's network is ready
}

type reasonKey struct {
	uid  types.UID
	name string
}

type reason struct {
	err error
	msg string
}

// New connects to the runtime (checking it speaks CRI v1) and returns a
// Manager.
func New(ctx context.Context, cfg Config) (*Manager, error) {
	if cfg.Endpoint == "" {
		return nil, errors.New("runtime: no CRI endpoint")
	}
	if cfg.ImageEndpoint == "" {
		cfg.ImageEndpoint = cfg.Endpoint
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.RootDir == "" || cfg.PodLogsDir == "" {
		return nil, errors.New("runtime: RootDir and PodLogsDir are required")
	}
	if cfg.Env == nil {
		cfg.Env = podenv.New(podenv.Config{})
	}
	if cfg.Volumes == nil {
		standalone := objects.NewLocal("", cfg.Logger)
		vm, err := volumes.New(volumes.Config{RootDir: cfg.RootDir, Objects: standalone, Tokens: standalone, Logger: cfg.Logger})
		if err != nil {
			return nil, fmt.Errorf("runtime: %w", err)
		}
		cfg.Volumes = vm
	}
	rs, err := criclient.NewRemoteRuntimeServiceBuilder().WithEndpoint(cfg.Endpoint).
		WithConnectionTimeout(cfg.Timeout).WithTracerProvider(nil).WithUseStreaming(false).Build(ctx)
	if err != nil {
		return nil, fmt.Errorf("runtime: connect to CRI runtime %s: %w", cfg.Endpoint, err)
	}
	is, err := criclient.NewRemoteImageServiceBuilder().WithEndpoint(cfg.ImageEndpoint).
		WithConnectionTimeout(cfg.Timeout).WithTracerProvider(nil).WithUseStreaming(false).Build(ctx)
	if err != nil {
		rs.Close(ctx)
		return nil, fmt.Errorf("runtime: connect to CRI image service %s: %w", cfg.ImageEndpoint, err)
	}
	if cfg.Instrument != nil {
		rs, is = cfg.Instrument(rs, is)
	}
	m := &Manager{cfg: cfg, rs: rs, is: is, log: cfg.Logger, reasons: map[reasonKey]reason{}, probeKilled: instances{}, postStopped: instances{}, probeKills: map[types.UID]int{}, fsSlots: make(chan struct{}, 64)}
	v, err := rs.Version(ctx, "v1")
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("runtime: version of %s: %w", cfg.Endpoint, err)
	}
	m.name, m.version = v.RuntimeName, v.RuntimeVersion
	return m, nil
}

// Close closes the connections.
func (m *Manager) Close() error {
	ctx := context.Background()
	return errors.Join(m.rs.Close(ctx), m.is.Close(ctx))
}

// ImageService is the CRI image service, for image garbage collection.
func (m *Manager) ImageService() cri.ImageManagerService { return m.is }

// RuntimeService is the CRI runtime service, for image garbage
// collection's list of containers.
func (m *Manager) RuntimeService() cri.RuntimeService { return m.rs }

// Name is the runtime's name ("containerd"), the scheme of container IDs
// in pod status ("containerd://<id>").
func (m *Manager) Name() string { return m.name }

// Version is the runtime's version string.
func (m *Manager) Version() string { return m.version }

// Health is the runtime's condition.
type Health struct {
	// RuntimeReady is the runtime's RuntimeReady condition.
	RuntimeReady bool
	// NetworkReady is the NetworkReady condition; host-network pods run
	// without it (containerd reports false without CNI config).
	NetworkReady bool
	// Message explains a false condition.
	Message string
	// Handlers are the runtime handlers the runtime lists (CRI
	// RuntimeHandlers), in the node status' form; empty when it lists none
	// (containerd before 2.0).
	Handlers []v1.NodeRuntimeHandler
}

// Health calls the CRI Status and Version: an error or RuntimeReady=false
// means the runtime is down.
func (m *Manager) Health(ctx context.Context) (Health, error) {
	if _, err := m.rs.Version(ctx, "v1"); err != nil {
		return Health{}, fmt.Errorf("runtime %s: %w", m.cfg.Endpoint, err)
	}
	st, err := m.rs.Status(ctx, false)
	if err != nil {
		return Health{}, fmt.Errorf("runtime %s: status: %w", m.cfg.Endpoint, err)
	}
	var h Health
	rro := map[string]bool{}
	for _, rh := range st.GetRuntimeHandlers() {
		rro[rh.Name] = rh.GetFeatures().GetRecursiveReadOnlyMounts()
		h.Handlers = append(h.Handlers, v1.NodeRuntimeHandler{Name: rh.Name, Features: &v1.NodeRuntimeHandlerFeatures{
			RecursiveReadOnlyMounts: ptr.To(rh.GetFeatures().GetRecursiveReadOnlyMounts()),
			UserNamespaces:          ptr.To(rh.GetFeatures().GetUserNamespaces()),
		}})
	}
	for _, c := range st.GetStatus().GetConditions() {
		switch c.Type {
		case runtimeapi.RuntimeReady:
			h.RuntimeReady = c.Status
		case runtimeapi.NetworkReady:
			h.NetworkReady = c.Status
		}
		if !c.Status && c.Message != "" {
			h.Message += c.Type + ": " + c.Message + "; "
		}
	}
	m.rroHandlers.Store(&rro)
	return h, nil
}

// networkReady reports whether the runtime's NetworkReady condition is
// true, read at most every 5 s: pod-network sandboxes are not attempted
// without it (containerd would fail them and leak a NOTREADY sandbox),
// host-network pods never ask.
func (m *Manager) networkReady(ctx context.Context) error {
	m.netMu.Lock()
	defer m.netMu.Unlock()
	if time.Since(m.netChecked) < 5*time.Second {
		return m.netErr
	}
	h, err := m.Health(ctx)
	switch {
	case err != nil:
		m.netErr = err
	case !h.NetworkReady:
		m.netErr = fmt.Errorf("container runtime network not ready: %s", h.Message)
	default:
		m.netErr = nil
	}
	m.netChecked = time.Now()
	return m.netErr
}

// ContainerID formats a runtime container ID as the kubelet shows it in
// pod status: "<runtime>://<id>".
func (m *Manager) ContainerID(id string) string { return m.name + "://" + id }

// WaitingReason is the reason and message of the named container's last
// failed start (e.g. ErrCrashLoopBackOff), if its last start failed.
func (m *Manager) WaitingReason(uid types.UID, container string) (reason, message string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.reasons[reasonKey{uid, container}]
	if !ok {
		return "", "", false
	}
	return r.err.Error(), r.msg, true
}

func (m *Manager) setReason(uid types.UID, container string, err error, msg string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		delete(m.reasons, reasonKey{uid, container})
		return
	}
	m.reasons[reasonKey{uid, container}] = reason{err, msg}
}

// ForgetPod drops what the manager remembers about a pod (waiting reasons).
func (m *Manager) ForgetPod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.reasons {
		if k.uid == uid {
			delete(m.reasons, k)
		}
	}
}

// SetStartupResults hands the manager the prober's startup results (a
// container ID as the pod status shows it, "<runtime>://<id>"): a sidecar
// with a startup probe holds the next init container back until it has
// started. Without it every running container counts as started.
func (m *Manager) SetStartupResults(started func(c *v1.Container, containerID string) bool) {
	m.startedFn.Store(&started)
}

// started is the Started of SetStartupResults, nil without one.
func (m *Manager) started() container.Started {
	f := m.startedFn.Load()
	if f == nil {
		return nil
	}
	return func(c *v1.Container, s *container.ContainerStatus) bool { return (*f)(c, m.ContainerID(s.ID)) }
}

// fsLock takes a pod-directory slot; the returned func releases it.
func (m *Manager) fsLock() func() {
	m.fsSlots <- struct{}{}
	return func() { <-m.fsSlots }
}

// PodDir is <RootDir>/pods/<uid>, the pod's directory.
func (m *Manager) PodDir(uid types.UID) string {
	return filepath.Join(m.cfg.RootDir, "pods", string(uid))
}

// PodLogDir is <PodLogsDir>/<namespace>_<name>_<uid>.
func (m *Manager) PodLogDir(namespace, name string, uid types.UID) string {
	return filepath.Join(m.cfg.PodLogsDir, namespace+"_"+name+"_"+string(uid))
}
