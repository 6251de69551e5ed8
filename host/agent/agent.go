package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmlet/wasmlet/host/internal/admission"
	"github.com/wasmlet/wasmlet/host/internal/allocatable"
	"github.com/wasmlet/wasmlet/host/internal/allocation"
	"github.com/wasmlet/wasmlet/host/internal/certificate"
	"github.com/wasmlet/wasmlet/host/internal/cgroups"
	"github.com/wasmlet/wasmlet/host/internal/cluster"
	"github.com/wasmlet/wasmlet/host/internal/config"
	"github.com/wasmlet/wasmlet/host/internal/config/file"
	"github.com/wasmlet/wasmlet/host/internal/crimetrics"
	"github.com/wasmlet/wasmlet/host/internal/devicemanager"
	"github.com/wasmlet/wasmlet/host/internal/dns"
	"github.com/wasmlet/wasmlet/host/internal/eviction"
	"github.com/wasmlet/wasmlet/host/internal/housekeeping"
	"github.com/wasmlet/wasmlet/host/internal/imagegc"
	"github.com/wasmlet/wasmlet/host/internal/logrotate"
	"github.com/wasmlet/wasmlet/host/internal/node"
	"github.com/wasmlet/wasmlet/host/internal/pacer"
	"github.com/wasmlet/wasmlet/host/internal/pleg"
	"github.com/wasmlet/wasmlet/host/internal/pod"
	"github.com/wasmlet/wasmlet/host/internal/podresources"
	"github.com/wasmlet/wasmlet/host/internal/podstate"
	"github.com/wasmlet/wasmlet/host/internal/podsync"
	"github.com/wasmlet/wasmlet/host/internal/prober"
	"github.com/wasmlet/wasmlet/host/internal/residency"
	"github.com/wasmlet/wasmlet/host/internal/runtime"
	"github.com/wasmlet/wasmlet/host/internal/runtimeclass"
	"github.com/wasmlet/wasmlet/host/internal/server"
	"github.com/wasmlet/wasmlet/host/internal/stats"
	"github.com/wasmlet/wasmlet/host/internal/status"
	"github.com/wasmlet/wasmlet/host/internal/syncloop"
	"github.com/wasmlet/wasmlet/host/internal/worker"
	"github.com/wasmlet/wasmlet/host/wasiruntime"
)

// Version is reported as the node's kubelet version.
const Version = "v0.1.0-wasmlet"

// Agent is a running node agent: the sync loop and the parts it drives.
// Build it with New and start it with Run.
type Agent struct {
	cfg      Config
	log      hclog.Logger
	reg      prometheus.Registerer
	gatherer prometheus.Gatherer

	podConfig   *config.PodConfig
	reservation *allocatable.Reservation // what allocatable keeps from capacity
	cluster     *cluster.Cluster         // nil when standalone
	certs       *certificate.Client      // nil without bootstrap or rotation
	classes     *runtimeclass.Manager    // pods' RuntimeClass → CRI handler
	plugins     *plugins                 // nil without a plugin directory
	devices     *devicemanager.Manager
	data        *podData
	pods        *pod.Manager
	statuses    *status.Manager
	node        atomic.Pointer[v1.Node]                 // set by Run once the runtime answers
	handlers    atomic.Pointer[[]v1.NodeRuntimeHandler] // the runtime's, as its last Status listed them

	// built is set once the parts below are; /healthz reads them only
	// then. Until then connectErr holds why the runtime does not answer.
	built      atomic.Bool
	connectErr atomic.Pointer[string]
	// Built by Run once the runtime answers.
	rt        *runtime.Manager
	pleg      *pleg.PLEG
	probes    *prober.Manager
	loop      *syncloop.Loop
	stats     *stats.Provider // the stats summary: kubelet API and eviction
	images    *imagegc.Manager
	evictions *eviction.Manager // node-pressure and local-storage eviction; an admitter too
	// alloc wraps the admission chain; built by connect, before the
	// runtime it gives the containers' actuated resources.
	alloc *allocation.Manager
	// syncRequests names pods to sync now: probe results changed, or a
	// deferred resize may fit.
	syncRequests chan types.UID
}

// New checks cfg, fills in defaults and builds the agent's parts that need
// no runtime. It starts nothing; Run does.
func New(cfg Config) (*Agent, error) { return NewContext(context.Background(), cfg) }

// NewContext is New, stopping with ctx: with BootstrapKubeConfig it waits
// for a usable bootstrap kubeconfig (see host/internal/certificate).
func NewContext(ctx context.Context, cfg Config) (*Agent, error) {
	cfg, err := cfg.complete()
	if err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, log: cfg.Logger, reg: cfg.Registerer, pods: pod.New(), statuses: status.NewManager(), syncRequests: make(chan types.UID, 1024)}
	a.reservation, err = allocatable.New(allocatable.Config{KubeReserved: cfg.KubeReserved, SystemReserved: cfg.SystemReserved, EvictionHard: cfg.EvictionHard})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	switch r := cfg.Registerer.(type) {
	case nil:
		reg := prometheus.NewRegistry()
		a.reg, a.gatherer = reg, reg
	case prometheus.Gatherer:
		a.gatherer = r
	default:
		a.gatherer = prometheus.DefaultGatherer
	}
	var sources []config.Source
	if cfg.StaticPodPath != "" {
		sources = append(sources, file.New(file.Config{Path: cfg.StaticPodPath, NodeName: cfg.NodeName, CheckFrequency: cfg.FileCheckFrequency.Duration, Logger: a.log.Named("file")}))
	}
	if cfg.KubeConfig != "" {
		ccfg := cluster.Config{
			KubeConfig: cfg.KubeConfig, QPS: float32(cfg.KubeAPIQPS), Burst: cfg.KubeAPIBurst,
			UserAgent: "wasmlet/" + Version, NodeName: cfg.NodeName, Registerer: a.reg, Logger: a.log,
		}
		if cfg.BootstrapKubeConfig != "" || *cfg.RotateCertificates {
			a.certs, err = certificate.NewClient(ctx, certificate.ClientConfig{
				KubeConfig: cfg.KubeConfig, BootstrapKubeConfig: cfg.BootstrapKubeConfig, CertDir: cfg.CertDir,
				NodeName: cfg.NodeName, Rotate: *cfg.RotateCertificates, Logger: a.log.Named("certificate"),
			})
			if err != nil {
				return nil, fmt.Errorf("agent: %w", err)
			}
			ccfg.RESTConfig = a.certs.RESTConfig()
		}
		a.cluster, err = cluster.New(ccfg)
		if err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		sources = append(sources, a.cluster.Source())
	}
	if a.plugins, err = a.newPlugins(); err != nil {
		return nil, err
	}
	sources = append(sources, a.plugins.sources()...)
	a.classes = runtimeclass.New(runtimeclass.Config{Client: a.cluster.Client()})
	a.podConfig = config.New(config.Config{Sources: sources, Logger: a.log.Named("config")})
	if a.data, err = a.newPodData(a.node.Load); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a.devices, err = devicemanager.New(devicemanager.Config{RootDir: cfg.RootDir, ActivePods: a.activePods, Logger: a.log.Named("devicemanager")})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return a, nil
}

// Run starts the agent — the embedded runtime when no endpoint is given,
// the runtime connection, PLEG, pod workers, sources, the read-only server,
// the pod-resources API and the sync loop — and blocks until ctx is cancelled or a part fails.
// Running containers are left running on return, as the kubelet does
// (except the embedded runtime's, which live in this process).
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	// The parts are stopped before they are waited for: a start that
	// fails after some were spawned returns its error at once.
	defer func() { cancel(); wg.Wait() }()
	errc := make(chan error, 4)
	spawn := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}

	endpoint := a.cfg.ContainerRuntimeEndpoint
	if endpoint == "" {
		rt, err := wasiruntime.New(wasiruntime.Config{RootDir: filepath.Join(a.cfg.RootDir, "runtime"), RegistryCA: a.cfg.ImageRegistryCA, Logger: a.log.Named("wasi")})
		if err != nil {
			return fmt.Errorf("agent: embedded WASI runtime: %w", err)
		}
		defer rt.Close()
		l, err := wasiruntime.Listen(rt.Endpoint())
		if err != nil {
			return fmt.Errorf("agent: embedded WASI runtime: %w", err)
		}
		endpoint = rt.Endpoint()
		spawn("embedded runtime", func(ctx context.Context) error { return rt.Serve(ctx, l) })
		a.log.Info("embedded WASI runtime started", "endpoint", endpoint)
	}
	// The read-only server first: while the runtime does not answer, a
	// monitoring system sees a red /healthz naming it, not a closed port.
	if *a.cfg.ReadOnlyPort != 0 {
		srv, err := server.New(server.Config{
			Address: a.cfg.Address, Port: *a.cfg.ReadOnlyPort, Pods: a.Pods,
			Checks:   a.healthChecks(endpoint),
			Gatherer: a.gatherer, Logger: a.log.Named("server"),
			Handlers: a.readOnlyHandlers(),
		})
		if err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		spawn("read-only server", srv.Run)
	}
	// The healthz port, as the kubelet's: a port already taken is logged,
	// and the node runs on without it.
	if *a.cfg.HealthzPort != 0 {
		srv, err := server.New(server.Config{
			Address: a.cfg.HealthzBindAddress, Port: *a.cfg.HealthzPort, HealthzOnly: true,
			Checks: a.healthChecks(endpoint), Logger: a.log.Named("healthz"),
		})
		if err != nil {
			a.log.Error("healthz server not started; the node runs without it", "error", err)
		} else {
			spawn("healthz server", srv.Run)
		}
	}
	// RuntimeClasses before the runtime: the cache syncs while it connects.
	spawn("runtime classes", a.classes.Run)
	spawn("device manager", a.devices.Run)
	if err := a.connect(ctx, endpoint); err != nil {
		return err
	}
	defer a.rt.Close()
	workers, cleaner, err := a.build()
	if err != nil {
		return err
	}
	a.built.Store(true)
	defer cleaner.Wait()
	// As the kubelet, a pod-resources socket that cannot be made stops the
	// agent.
	resources, err := podresources.New(podresources.Config{
		RootDir: a.cfg.RootDir, ActivePods: a.loop.ActivePods, Pods: a.pods.Pods,
		Logger: a.log.Named("podresources"), Registerer: a.reg,
	})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	spawn("pod-resources API", resources.Run)
	maxSize, err := resource.ParseQuantity(a.cfg.ContainerLogMaxSize) // checked by New
	if err != nil {
		return fmt.Errorf("agent: containerLogMaxSize: %w", err)
	}
	rot, err := logrotate.New(logrotate.Config{Runtime: a.rt, MaxSize: maxSize.Value(), MaxFiles: a.cfg.ContainerLogMaxFiles, Logger: a.log.Named("logrotate")})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}

	if a.certs != nil {
		// The node's API connections present this certificate: the
		// cluster's parts and the kubelet API's webhook wait for it.
		spawn("client certificate", a.certs.Run)
		if err := a.certs.WaitForCertificate(ctx); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
	}
	if a.servesKubeletAPI() {
		api, err := a.newKubeletAPI(a.node.Load(), spawn)
		if err != nil {
			return err
		}
		spawn("kubelet API", api.Run)
	} else if *a.cfg.Port > 0 {
		a.log.Info("kubelet API not served: standalone with no --client-ca-file, so no client could be authenticated", "port", *a.cfg.Port)
	}
	if a.cluster != nil {
		a.cluster.Start(cluster.StartConfig{
			Node: a.node.Load(), Ready: a.nodeReady, Pressure: a.evictions.Conditions, RuntimeHandlers: a.runtimeHandlers, Pods: a.pods, Statuses: a.statuses,
			ExtendedResources:     a.devices.Resources,
			SourcesSeen:           a.podConfig.SeenAllSources,
			StartedStatic:         workers.StartedStaticPods,
			StatusUpdateFrequency: a.cfg.NodeStatusUpdateFrequency.Duration,
			StatusReportFrequency: a.cfg.NodeStatusReportFrequency.Duration,
			NoCreate:              !*a.cfg.RegisterNode,
		}, spawn)
		defer a.cluster.Stop()
	}
	spawn("image garbage collection", a.images.Run)
	a.plugins.start(spawn)
	for _, run := range a.data.run {
		spawn("pod data", run)
	}
	spawn("pleg", a.pleg.Run)
	spawn("container log rotation", rot.Run)
	spawn("eviction", a.evictions.Run)
	spawn("pod config", func(ctx context.Context) error { a.podConfig.Run(ctx); return nil })
	defer workers.Stop()
	defer a.probes.Stop()

	a.log.Info("agent started", "node", a.cfg.NodeName, "runtime", a.rt.Name()+" "+a.rt.Version(), "endpoint", endpoint, "static_pod_path", a.cfg.StaticPodPath)
	spawn("residency", func(ctx context.Context) error {
		residency.Keep(ctx, residency.DefaultPeriod, a.reportResidency)
		return nil
	})
	loopErr := make(chan error, 1)
	go func() { loopErr <- a.loop.Run(ctx) }()
	select {
	case err = <-loopErr:
	case err = <-errc:
		cancel()
		<-loopErr
	}
	cancel()
	a.log.Info("agent stopping")
	return err
}

// connect dials the runtime, retrying every second until it answers or
// ctx ends (containerd may start after the agent).
func (a *Agent) connect(ctx context.Context, endpoint string) error {
	calls, err := crimetrics.New(a.reg)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	rcfg := runtime.Config{
		Endpoint: endpoint, ImageEndpoint: a.cfg.ImageServiceEndpoint, Timeout: a.cfg.RuntimeRequestTimeout.Duration,
		RootDir: a.cfg.RootDir, PodLogsDir: a.cfg.PodLogsDir, LogSymlinkDir: a.logSymlinkDir(), Logger: a.log.Named("runtime"),
		Hooks: a.plugins.hooks(), Volumes: a.data.volumes, Env: a.data.env, ClusterDomain: a.cfg.ClusterDomain,
		Credentials:    a.data.creds,
		DNS:            dns.New(dns.Config{ClusterDNS: a.cfg.ClusterDNS, ClusterDomain: a.cfg.ClusterDomain, ResolvConf: *a.cfg.ResolvConf}),
		RuntimeClasses: a.classes,
		Devices:        a.devices,
		Instrument:     calls.Wrap,
	}
	if err := a.nodeResources(&rcfg); err != nil {
		return err
	}
	if err := a.newAllocation(); err != nil {
		return err
	}
	rcfg.Actuation = a.alloc
	for attempt := 0; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		rt, err := runtime.New(cctx, rcfg)
		cancel()
		if err == nil {
			a.rt = rt
			return nil
		}
		msg := err.Error()
		a.connectErr.Store(&msg)
		if attempt%10 == 0 {
			a.log.Error("container runtime not answering; retrying", "endpoint", endpoint, "error", err)
		}
		select {
		case <-ctx.Done():
			// Stopped while waiting: a clean stop, not a failure.
			return fmt.Errorf("agent: stopped while the runtime at %s did not answer (%v): %w", endpoint, err, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// nodeResources gives the runtime the node's memory for OOM scores and,
// for a CRI runtime, its swap controller, huge page sizes and the pod
// cgroup hierarchy (with CgroupsPerQOS); the embedded WASI runtime has no
// cgroups.
func (a *Agent) nodeResources(rcfg *runtime.Config) error {
	if mem, err := node.MemoryCapacity(""); err == nil {
		rcfg.MemoryCapacity = mem
	}
	if a.cfg.ContainerRuntimeEndpoint == "" {
		return nil
	}
	rcfg.Swap, rcfg.HugePageSizes = cgroups.DetectSwap(""), cgroups.HugePageSizes("")
	if !*a.cfg.CgroupsPerQOS {
		return nil
	}
	cg, err := cgroups.New(cgroups.Config{CgroupRoot: a.cfg.CgroupRoot, Driver: a.cfg.CgroupDriver, Logger: a.log.Named("cgroups")})
	if err != nil {
		return fmt.Errorf("agent: pod cgroups: %w (--cgroups-per-qos=false leaves the cgroups to the runtime)", err)
	}
	rcfg.Cgroups = cg
	return nil
}

// newAllocation makes the admission chain and the allocation manager that
// wraps it: pods are admitted at their allocation, and resizes decided
// against the node's allocatable. The embedded WASI runtime cannot change
// a running container's resources, so a resize it would have to apply in
// place is Infeasible there.
func (a *Agent) newAllocation() error {
	admitters := append(append(admission.Builtins(a.cfg.MaxPods), a.plugins.admitters()...), a.devices, pressureAdmitter{a})
	admit, err := admission.New(admission.Config{Admitters: admitters, Logger: a.log.Named("admission"), Registerer: a.reg})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	alloc, err := allocation.New(allocation.Config{
		RootDir: a.cfg.RootDir, Admit: admit, Node: a.nodeWithDevices, ActivePods: a.activePods,
		Events: a.cluster, Resync: a.requestSync, InPlaceUnsupported: a.inPlaceUnsupported, Logger: a.log.Named("allocation"),
	})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.alloc = alloc
	return nil
}

// inPlaceUnsupported is why the runtime cannot change a running
// container's resources, "" when it can: the embedded WASI runtime, in
// this process or behind an endpoint (`wasmlet runtime`), cannot.
func (a *Agent) inPlaceUnsupported() string {
	if !a.built.Load() || a.rt.Name() != wasiruntime.RuntimeName {
		return ""
	}
	return "the embedded WASI runtime cannot change a running container's resources"
}

// requestSync asks the sync loop to sync a pod now, never blocking (the
// periodic sync catches up when the queue is full).
func (a *Agent) requestSync(uid types.UID) {
	select {
	case a.syncRequests <- uid:
	default:
	}
}

// build makes the parts that need the runtime and wires them: the node,
// the PLEG, the per-pod records, the pod workers and what they run
// (podsync), housekeeping, admission and the sync loop.
func (a *Agent) build() (*worker.Workers, *housekeeping.Cleaner, error) {
	var port int32
	if a.servesKubeletAPI() {
		port = int32(*a.cfg.Port)
	}
	var nodeIPs []string
	if a.cfg.NodeIP != "" {
		nodeIPs = strings.Split(a.cfg.NodeIP, ",")
	}
	n, err := node.New(node.Config{
		Name: a.cfg.NodeName, MaxPods: a.cfg.MaxPods, RootDir: a.cfg.RootDir, AgentVersion: Version, RuntimeVersion: a.rt.Name() + "://" + a.rt.Version(), KubeletPort: port,
		Allocatable: a.reservation.Allocatable, Labels: a.cfg.NodeLabels, Taints: a.cfg.RegisterWithTaints, ProviderID: a.cfg.ProviderID, NodeIPs: nodeIPs,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("agent: node: %w", err)
	}
	a.node.Store(n)
	a.stats = stats.New(stats.Config{
		NodeName: a.cfg.NodeName, Runtime: a.rt, RootDir: a.cfg.RootDir, PodLogsDir: a.cfg.PodLogsDir,
		Pod: a.pods.PodByUID, Volumes: a.data.volumes, VolumeStatsPeriod: a.cfg.VolumeStatsAggPeriod.Duration,
	})
	var hostIPs []string
	for _, ad := range n.Status.Addresses {
		if ad.Type == v1.NodeInternalIP {
			hostIPs = append(hostIPs, ad.Address)
		}
	}
	if a.pleg, err = pleg.New(pleg.Config{Runtime: a.rt, RelistPeriod: a.cfg.PLEGRelistPeriod.Duration, Logger: a.log.Named("pleg"), Registerer: a.reg}); err != nil {
		return nil, nil, fmt.Errorf("agent: %w", err)
	}
	probeResults := a.syncRequests
	probes, err := prober.New(prober.Config{
		Runtime: a.rt, Statuses: a.statuses, Events: a.cluster, Registerer: a.reg, Logger: a.log.Named("prober"),
		Changed: a.requestSync,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("agent: %w", err)
	}
	a.probes = probes
	a.rt.SetStartupResults(probes.Started)
	records := podstate.New(podstate.Config{OnForget: []func(uid types.UID){a.statuses.RemovePod, a.rt.ForgetPod, a.pleg.Cache().Delete, a.data.volumes.Forget, probes.RemovePod, a.devices.RemovePod, a.alloc.RemovePod}})
	backOff := runtime.NewBackOff()
	starts, err := pacer.New(pacer.Config{Registerer: a.reg})
	if err != nil {
		return nil, nil, fmt.Errorf("agent: %w", err)
	}
	syncer, err := podsync.New(podsync.Config{
		Runtime: a.rt, Cache: a.pleg.Cache(), Statuses: a.statuses, Pods: a.pods, Records: records,
		BackOff: backOff, HostIPs: hostIPs, Volumes: a.data.volumes, Probes: probes, Events: a.cluster, Terminated: a.cluster.Terminated, Registerer: a.reg,
		Pacer: starts, Allocation: a.alloc,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("agent: %w", err)
	}
	workers, err := worker.New(worker.Config{SyncFunc: syncer.Sync, Terminated: syncer.Terminated, Logger: a.log.Named("worker"), Registerer: a.reg})
	if err != nil {
		return nil, nil, fmt.Errorf("agent: %w", err)
	}
	cleaner := housekeeping.New(housekeeping.Config{
		Pods: a.pods, Workers: workers, Runtime: a.rt, Statuses: a.statuses,
		Forget: records.Forget, BackOff: backOff, Logger: a.log, GCPeriod: a.cfg.ContainerGCPeriod.Duration,
	})
	if a.images, err = imagegc.New(imagegc.Config{
		Images: a.rt.ImageService(), Containers: a.rt.RuntimeService(), Period: a.cfg.ImageGCPeriod.Duration,
		Policy: imagegc.Policy{
			HighThresholdPercent: int(*a.cfg.ImageGCHighThresholdPercent), LowThresholdPercent: int(*a.cfg.ImageGCLowThresholdPercent),
			MinAge: a.cfg.ImageMinimumGCAge.Duration, MaxAge: a.cfg.ImageMaximumGCAge.Duration,
		},
		Event: a.cluster.NodeEvent, Logger: a.log.Named("imagegc"), Registerer: a.reg,
	}); err != nil {
		return nil, nil, fmt.Errorf("agent: %w", err)
	}
	if a.evictions, err = a.newEviction(workers, cleaner); err != nil {
		return nil, nil, err
	}
	a.loop, err = syncloop.New(syncloop.Config{
		Updates: a.podConfig.Updates(), Events: a.pleg.Events(), ProbeResults: probeResults, SeenAllSources: a.podConfig.SeenAllSources,
		Pods: a.pods, Records: records, Statuses: a.statuses, Admit: a.alloc, Node: a.nodeWithDevices,
		InitialStatus: syncer.InitialStatus, Workers: workers, Housekeeping: cleaner.Start,
		Recorder: a.cluster, Cluster: a.cluster,
		SyncFrequency: a.cfg.SyncFrequency.Duration, HousekeepingInterval: a.cfg.HousekeepingInterval.Duration,
		Logger: a.log, Registerer: a.reg,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("agent: %w", err)
	}
	return workers, cleaner, nil
}

// healthChecks are /healthz's checks: the runtime answers and is ready,
// the PLEG relists (red at the first failed relist: a blind agent must be
// seen at once), the sync loop is not stuck.
//
// Until the runtime answers and the parts are built, the runtime check says
// so, naming the endpoint and the last error, and the others wait.
func (a *Agent) healthChecks(endpoint string) []server.Check {
	built := func(check func() error) func() error {
		return func() error {
			if !a.built.Load() {
				return errors.New("not started: waiting for the container runtime")
			}
			return check()
		}
	}
	return []server.Check{
		{Name: "runtime", Check: func() error {
			if !a.built.Load() {
				why := "connecting"
				if e := a.connectErr.Load(); e != nil {
					why = *e
				}
				return fmt.Errorf("container runtime at %s not answering: %s", endpoint, why)
			}
			return a.runtimeReady()
		}},
		{Name: "pleg", Check: built(func() error { return a.pleg.Healthy() })},
		{Name: "relist", Check: built(func() error { return a.pleg.RelistError() })},
		{Name: "syncloop", Check: built(func() error { return a.loop.Healthy() })},
	}
}

// nodeReady is the node's Ready condition: the runtime is ready and the
// PLEG relists.
func (a *Agent) nodeReady() error {
	if err := a.runtimeReady(); err != nil {
		return err
	}
	if err := a.pleg.Healthy(); err != nil {
		return fmt.Errorf("PLEG is not healthy: %w", err)
	}
	return nil
}

// runtimeReady checks that the runtime answers and says it is ready (for
// /healthz and the node's Ready condition).
func (a *Agent) runtimeReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h, err := a.rt.Health(ctx)
	if err == nil {
		a.handlers.Store(&h.Handlers)
	}
	switch {
	case err != nil:
		return fmt.Errorf("container runtime is down: %w", err)
	case !h.RuntimeReady:
		return fmt.Errorf("container runtime not ready: %s", h.Message)
	}
	return nil
}

// logSymlinkDir is the runtime's directory of log symlinks; "" for none.
func (a *Agent) logSymlinkDir() string {
	if a.cfg.ContainerLogSymlinkDir == "none" {
		return ""
	}
	return a.cfg.ContainerLogSymlinkDir
}

// readOnlyHandlers are the read-only server's handlers beside /pods,
// /healthz and /metrics: /plugins, and /stats/summary and /metrics/cadvisor
// as the kubelet serves them there too (503 until the stats provider is
// built).
func (a *Agent) readOnlyHandlers() map[string]http.Handler {
	h := map[string]http.Handler{}
	maps.Copy(h, a.plugins.handlers())
	whenBuilt := func(h func() http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !a.built.Load() {
				http.Error(w, "the node's parts are starting", http.StatusServiceUnavailable)
				return
			}
			h().ServeHTTP(w, r)
		})
	}
	h["/stats/summary"] = whenBuilt(func() http.Handler { return a.stats.SummaryHandler() })
	h["/metrics/cadvisor"] = whenBuilt(func() http.Handler { return a.stats.CadvisorMetricsHandler() })
	return h
}

// nodeWithDevices is the node as admission sees it: with the device
// plugins' resources (the devices are allocated last, once every other
// admitter admitted the pod).
func (a *Agent) nodeWithDevices() *v1.Node {
	return node.WithExtendedResources(a.node.Load(), a.devices.Resources)
}

// activePods are the pods holding the node's resources, once the sync loop
// is built (the device manager frees the devices of the others).
func (a *Agent) activePods() []*v1.Pod {
	if !a.built.Load() {
		return nil
	}
	return a.loop.ActivePods()
}

// runtimeHandlers are the runtime's handlers as its last CRI Status
// listed them (the node status reads them after nodeReady asked).
func (a *Agent) runtimeHandlers() []v1.NodeRuntimeHandler {
	if h := a.handlers.Load(); h != nil {
		return *h
	}
	return nil
}

// Pods returns the pods with their latest status, as /pods serves them:
// the pods a source still has, as the kubelet lists its pod manager's (a
// deleted static pod leaves at once while it terminates).
func (a *Agent) Pods() []v1.Pod {
	all := a.statuses.Pods()
	out := all[:0]
	for _, p := range all {
		if _, ok := a.pods.PodByUID(p.UID); ok {
			out = append(out, p)
		}
	}
	return out
}

// reportResidency logs a pass of residency.Keep, which keeps the agent's
// resident set to the pages of its binary it touched lately: the first
// pass and a failure (which ends the passes) at info, the later ones at
// debug; a failure leaves the mappings as they were and the agent runs on.
func (a *Agent) reportResidency(pass int, res residency.Result, err error) {
	switch {
	case err != nil:
		a.log.Info("binary mappings left as they are from now on", "pass", pass, "error", err)
	case pass == 1:
		a.log.Info("binary mapped lazily from now on, trimmed again every "+residency.DefaultPeriod.String(),
			"mappings", res.Mappings, "resident_before_bytes", res.Before, "resident_after_bytes", res.After)
	default:
		a.log.Debug("binary pages trimmed", "pass", pass, "resident_before_bytes", res.Before, "resident_after_bytes", res.After)
	}
}
