package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/wasmlet/wasmlet/host/internal/admission"
	"github.com/wasmlet/wasmlet/host/internal/config"
	"github.com/wasmlet/wasmlet/host/internal/config/file"
	"github.com/wasmlet/wasmlet/host/internal/node"
	"github.com/wasmlet/wasmlet/host/internal/pleg"
	"github.com/wasmlet/wasmlet/host/internal/pod"
	"github.com/wasmlet/wasmlet/host/internal/runtime"
	"github.com/wasmlet/wasmlet/host/internal/server"
	"github.com/wasmlet/wasmlet/host/internal/status"
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
	metrics  *metrics

	podConfig *config.PodConfig
	cluster   *cluster // nil when standalone
	pods      *pod.Manager
	statuses  *status.Manager
	backOff   *flowcontrol.Backoff

	// Built by Run once the runtime answers.
	rt      *runtime.Manager
	pleg    *pleg.PLEG
	admit   *admission.Chain
	workers *worker.Workers
	node    *v1.Node
	hostIPs []string

	mu        sync.Mutex
	firstSeen map[types.UID]time.Time
	lastSync  map[types.UID]time.Time
	started   map[types.UID]bool // pod start latency observed
	rejected  map[types.UID]bool

	iterationStart atomic.Int64 // unix nanos of the running iteration, 0 when idle
	plugins        *plugins     // nil without a plugin directory
	nodeObj        atomic.Pointer[v1.Node]
	cleaning       atomic.Bool
	background     sync.WaitGroup // housekeeping runs
}

// New checks cfg, fills in defaults and builds the agent's parts that need
// no runtime. It starts nothing; Run does.
func New(cfg Config) (*Agent, error) {
	d := Defaults()
	if cfg.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("agent: node name: %w", err)
		}
		cfg.NodeName = h
	}
	setDefault(&cfg.FileCheckFrequency, d.FileCheckFrequency)
	setDefault(&cfg.RuntimeRequestTimeout, d.RuntimeRequestTimeout)
	setDefault(&cfg.SyncFrequency, d.SyncFrequency)
	setDefault(&cfg.HousekeepingInterval, d.HousekeepingInterval)
	setDefault(&cfg.PLEGRelistPeriod, d.PLEGRelistPeriod)
	if cfg.RootDir == "" {
		cfg.RootDir = d.RootDir
	}
	if cfg.PodLogsDir == "" {
		cfg.PodLogsDir = d.PodLogsDir
	}
	if cfg.MaxPods <= 0 {
		cfg.MaxPods = d.MaxPods
	}
	if cfg.KubeConfig != "" && cfg.KubeAPIQPS <= 0 {
		cfg.KubeAPIQPS = d.KubeAPIQPS
	}
	if cfg.KubeConfig != "" && cfg.KubeAPIBurst <= 0 {
		cfg.KubeAPIBurst = d.KubeAPIBurst
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	a := &Agent{
		cfg:       cfg,
		log:       cfg.Logger,
		reg:       cfg.Registerer,
		pods:      pod.New(),
		statuses:  status.NewManager(),
		backOff:   runtime.NewBackOff(),
		firstSeen: map[types.UID]time.Time{},
		lastSync:  map[types.UID]time.Time{},
		started:   map[types.UID]bool{},
		rejected:  map[types.UID]bool{},
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
	m, err := newMetrics(a.reg)
	if err != nil {
		return nil, fmt.Errorf("agent: metrics: %w", err)
	}
	a.metrics = m
	var sources []config.Source
	if cfg.StaticPodPath != "" {
		sources = append(sources, file.New(file.Config{Path: cfg.StaticPodPath, NodeName: cfg.NodeName, CheckFrequency: cfg.FileCheckFrequency, Logger: a.log.Named("file")}))
	}
	if cfg.KubeConfig != "" {
		if a.cluster, err = newCluster(cfg, a.reg); err != nil {
			return nil, err
		}
		sources = append(sources, a.cluster.source(cfg, a.log))
	}
	if a.plugins, err = a.newPlugins(); err != nil {
		return nil, err
	}
	sources = append(sources, a.plugins.sources()...)
	a.podConfig = config.New(config.Config{Sources: sources, Logger: a.log.Named("config")})
	return a, nil
}

func setDefault(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// Run starts the agent — the embedded runtime when no endpoint is given,
// the runtime connection, PLEG, pod workers, sources, the read-only server
// and the sync loop — and blocks until ctx is cancelled or a part fails.
// Running containers are left running on return, as the kubelet does
// (except the embedded runtime's, which live in this process).
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
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

	endpoint := a.cfg.RuntimeEndpoint
	if endpoint == "" {
		rt, err := wasiruntime.New(wasiruntime.Config{RootDir: filepath.Join(a.cfg.RootDir, "runtime"), Logger: a.log.Named("wasi")})
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
	if err := a.connect(ctx, endpoint); err != nil {
		return err
	}
	defer a.rt.Close()
	defer a.background.Wait()
	if err := a.build(); err != nil {
		return err
	}

	if a.cfg.ReadOnlyPort != 0 {
		srv, err := server.New(server.Config{
			Address: a.cfg.Address, Port: a.cfg.ReadOnlyPort, Pods: a.statuses.Pods,
			Checks:   a.HealthChecks(),
			Gatherer: a.gatherer, Logger: a.log.Named("server"),
			Handlers: a.plugins.handlers(),
		})
		if err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		spawn("read-only server", srv.Run)
	}
	if a.cluster != nil {
		a.startCluster(spawn)
		defer a.stopCluster()
	}
	a.plugins.start(spawn)
	spawn("pleg", a.pleg.Run)
	spawn("pod config", func(ctx context.Context) error { a.podConfig.Run(ctx); return nil })
	defer a.workers.Stop()

	a.log.Info("agent started", "node", a.cfg.NodeName, "runtime", a.rt.Name()+" "+a.rt.Version(), "endpoint", endpoint, "static_pod_path", a.cfg.StaticPodPath)
	err := a.syncLoop(ctx, errc)
	cancel()
	a.log.Info("agent stopping")
	return err
}

// connect dials the runtime, retrying every second until it answers or
// ctx ends (containerd may start after the agent).
func (a *Agent) connect(ctx context.Context, endpoint string) error {
	for attempt := 0; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		rt, err := runtime.New(cctx, runtime.Config{
			Endpoint: endpoint, ImageEndpoint: a.cfg.ImageEndpoint, Timeout: a.cfg.RuntimeRequestTimeout,
			RootDir: a.cfg.RootDir, PodLogsDir: a.cfg.PodLogsDir, Logger: a.log.Named("runtime"),
			Hooks: a.plugins.hooks(),
		})
		cancel()
		if err == nil {
			a.rt = rt
			return nil
		}
		if attempt%10 == 0 {
			a.log.Error("container runtime not answering; retrying", "endpoint", endpoint, "error", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("agent: %w", err)
		case <-time.After(time.Second):
		}
	}
}

// build makes the parts that need the runtime.
func (a *Agent) build() error {
	n, err := node.New(node.Config{Name: a.cfg.NodeName, MaxPods: a.cfg.MaxPods, RootDir: a.cfg.RootDir, AgentVersion: Version, RuntimeVersion: a.rt.Name() + "://" + a.rt.Version()})
	if err != nil {
		return fmt.Errorf("agent: node: %w", err)
	}
	a.node = n
	a.nodeSet(n)
	for _, ad := range n.Status.Addresses {
		if ad.Type == v1.NodeInternalIP {
			a.hostIPs = append(a.hostIPs, ad.Address)
		}
	}
	if a.pleg, err = pleg.New(pleg.Config{Runtime: a.rt, RelistPeriod: a.cfg.PLEGRelistPeriod, Logger: a.log.Named("pleg"), Registerer: a.reg}); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if a.admit, err = admission.New(admission.Config{Admitters: append(admission.Builtins(a.cfg.MaxPods), a.plugins.admitters()...), Logger: a.log.Named("admission"), Registerer: a.reg}); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if a.workers, err = worker.New(worker.Config{SyncFunc: a.syncPod, Terminated: a.podTerminated, Logger: a.log.Named("worker"), Registerer: a.reg}); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	return nil
}

// HealthChecks are /healthz's checks: the runtime answers and is ready,
// the PLEG relists, the sync loop is not stuck.
func (a *Agent) HealthChecks() []server.Check {
	return []server.Check{
		{Name: "runtime", Check: a.runtimeReady},
		{Name: "pleg", Check: func() error { return a.pleg.Healthy() }},
		{Name: "syncloop", Check: func() error {
			if s := a.iterationStart.Load(); s != 0 && time.Since(time.Unix(0, s)) > 2*time.Minute {
				return fmt.Errorf("sync loop stuck for %v", time.Since(time.Unix(0, s)).Round(time.Second))
			}
			return nil
		}},
	}
}

// runtimeReady checks that the runtime answers and says it is ready (for
// /healthz and the node's Ready condition).
func (a *Agent) runtimeReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h, err := a.rt.Health(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("container runtime is down: %w", err)
	case !h.RuntimeReady:
		return fmt.Errorf("container runtime not ready: %s", h.Message)
	}
	return nil
}

// Pods returns the pods with their latest status, as /pods serves them.
func (a *Agent) Pods() []v1.Pod { return a.statuses.Pods() }

// syncLoop is the kubelet's syncLoop: one select over config updates,
// PLEG events, the sync ticker and housekeeping.
func (a *Agent) syncLoop(ctx context.Context, errc <-chan error) error {
	syncTicker := time.NewTicker(time.Second)
	defer syncTicker.Stop()
	hk := time.NewTicker(a.cfg.HousekeepingInterval)
	defer hk.Stop()
	updates := a.podConfig.Updates()
	events := a.pleg.Events()
	for {
		var src string
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			return err
		case u, ok := <-updates:
			if !ok {
				return nil
			}
			a.iterationStart.Store(time.Now().UnixNano())
			src = "config"
			a.dispatch(ctx, u)
		case e := <-events:
			a.iterationStart.Store(time.Now().UnixNano())
			src = "pleg"
			if p, ok := a.pods.PodByUID(e.ID); ok {
				a.log.Trace("SyncLoop (PLEG)", "pod", podName(p), "event", e.Type, "id", e.Data)
				a.HandlePodSyncs([]*v1.Pod{p})
			}
		case <-syncTicker.C:
			a.iterationStart.Store(time.Now().UnixNano())
			src = "sync"
			if due := a.podsToSync(); len(due) > 0 {
				a.HandlePodSyncs(due)
			}
		case <-hk.C:
			a.iterationStart.Store(time.Now().UnixNano())
			src = "housekeeping"
			if a.podConfig.SeenAllSources() {
				a.HandlePodCleanups(ctx)
			}
		}
		a.metrics.iterations.WithLabelValues(src).Inc()
		a.iterationStart.Store(0)
	}
}

func (a *Agent) dispatch(ctx context.Context, u config.PodUpdate) {
	switch u.Op {
	case config.OpAdd:
		a.log.Debug("SyncLoop (ADD)", "source", u.Source, "pods", podNames(u.Pods))
		a.HandlePodAdditions(ctx, u.Pods)
	case config.OpUpdate, config.OpDelete:
		// DELETE is an UPDATE because of graceful deletion.
		a.log.Debug("SyncLoop ("+string(u.Op)+")", "source", u.Source, "pods", podNames(u.Pods))
		a.HandlePodUpdates(u.Pods)
	case config.OpRemove:
		a.log.Debug("SyncLoop (REMOVE)", "source", u.Source, "pods", podNames(u.Pods))
		a.HandlePodRemoves(u.Pods)
	case config.OpReconcile:
		a.HandlePodReconcile(u.Pods)
	case config.OpSet:
		a.log.Error("SyncLoop (SET): the merged stream never carries SET; ignored", "source", u.Source)
	}
	a.clusterChanged()
}

func podName(p *v1.Pod) string { return p.Namespace + "/" + p.Name }

func podNames(pods []*v1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = podName(p)
	}
	return out
}

// activePods are the admitted pods not in a terminal phase, for admission.
func (a *Agent) activePods() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range a.pods.Pods() {
		if a.isRejected(p.UID) {
			continue
		}
		if s, ok := a.statuses.PodStatus(p.UID); ok && (s.Phase == v1.PodSucceeded || s.Phase == v1.PodFailed) {
			continue
		}
		out = append(out, p)
	}
	return out
}

func (a *Agent) isRejected(uid types.UID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rejected[uid]
}

// HandlePodAdditions admits new pods (oldest first) and hands the admitted
// ones to their workers; a rejected pod gets phase Failed with the
// admitter's reason and message.
func (a *Agent) HandlePodAdditions(ctx context.Context, pods []*v1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool { return pods[i].CreationTimestamp.Before(&pods[j].CreationTimestamp) })
	now := time.Now()
	// The admitted pods, computed once per batch and grown as pods are
	// admitted: recomputing it per pod is quadratic in locks.
	adding := make(map[types.UID]bool, len(pods))
	for _, p := range pods {
		adding[p.UID] = true
	}
	var active []*v1.Pod
	for _, p := range a.activePods() {
		if !adding[p.UID] {
			active = append(active, p)
		}
	}
	for _, p := range pods {
		a.pods.AddPod(p)
		if config.IsMirror(p) {
			a.syncStaticOf(p)
			continue
		}
		a.mu.Lock()
		if _, ok := a.firstSeen[p.UID]; !ok {
			a.firstSeen[p.UID] = now
		}
		a.mu.Unlock()
		r := a.admit.Admit(ctx, admission.Attributes{Pod: p, Node: a.node, Pods: active})
		if !r.Admit {
			a.mu.Lock()
			a.rejected[p.UID] = true
			a.mu.Unlock()
			a.statuses.SetPodStatus(p, status.Rejected(p, r.Reason, r.Message))
			a.metrics.rejected.Inc()
			a.log.Warn("event: pod rejected", "event", "PodRejected", "pod", podName(p), "uid", p.UID, "admitter", r.Admitter, "reason", r.Reason, "message", r.Message)
			a.event(p, v1.EventTypeWarning, r.Reason, r.Message)
			continue
		}
		active = append(active, p)
		if _, ok := a.statuses.PodStatus(p.UID); !ok {
			s := a.generate(p, nil, nil)
			if p.Status.Phase != "" && !config.IsStatic(p) {
				// The API server's status (after an agent restart): kept
				// until the first sync, so no stale Pending is pushed.
				s = *p.Status.DeepCopy()
			}
			a.statuses.SetPodStatus(p, s)
		}
		a.workers.Update(worker.Update{Pod: p, Kind: syncKind(p)})
	}
}

// syncStaticOf syncs the static pod a mirror pod mirrors.
func (a *Agent) syncStaticOf(mirror *v1.Pod) {
	if p, ok := a.pods.PodByMirrorPod(mirror); ok {
		a.HandlePodSyncs([]*v1.Pod{p})
	}
}

// HandlePodUpdates hands changed pods to their workers; a pod with a
// deletion timestamp is terminated.
func (a *Agent) HandlePodUpdates(pods []*v1.Pod) {
	for _, p := range pods {
		a.pods.UpdatePod(p)
		if config.IsMirror(p) {
			a.syncStaticOf(p)
			continue
		}
		if a.isRejected(p.UID) {
			if p.DeletionTimestamp != nil {
				// Nothing runs: the pod may be deleted from the API server.
				if st, ok := a.statuses.PodStatus(p.UID); ok {
					a.statuses.SetPodStatus(p, st)
				}
				a.podTerminatedInCluster(p)
			}
			continue
		}
		kind := worker.Sync
		if p.DeletionTimestamp != nil {
			kind = worker.Terminate
		}
		a.workers.Update(worker.Update{Pod: p, Kind: kind})
	}
}

// HandlePodRemoves forgets pods and has their workers kill them.
func (a *Agent) HandlePodRemoves(pods []*v1.Pod) {
	for _, p := range pods {
		a.pods.RemovePod(p)
		if config.IsMirror(p) {
			a.syncStaticOf(p)
			continue
		}
		if a.isRejected(p.UID) {
			a.forget(p.UID)
			continue
		}
		a.workers.Update(worker.Update{Pod: p, Kind: worker.Terminate})
	}
}

// HandlePodReconcile records pods of which only the status changed.
func (a *Agent) HandlePodReconcile(pods []*v1.Pod) {
	for _, p := range pods {
		a.pods.UpdatePod(p)
	}
}

// HandlePodSyncs asks the pods' workers for a sync (a termination for a
// pod being deleted: a sync would start it again).
func (a *Agent) HandlePodSyncs(pods []*v1.Pod) {
	for _, p := range pods {
		if a.isRejected(p.UID) {
			continue
		}
		a.workers.Update(worker.Update{Pod: p, Kind: syncKind(p)})
	}
}

// syncKind is Terminate for a pod being deleted, else Sync.
func syncKind(p *v1.Pod) worker.Kind {
	if p.DeletionTimestamp != nil {
		return worker.Terminate
	}
	return worker.Sync
}

// podsToSync are the pods whose last sync is older than SyncFrequency.
func (a *Agent) podsToSync() []*v1.Pod {
	now := time.Now()
	var due []*v1.Pod
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.pods.Pods() {
		if a.rejected[p.UID] {
			continue
		}
		if last, ok := a.lastSync[p.UID]; ok && now.Sub(last) >= a.cfg.SyncFrequency {
			due = append(due, p)
		}
	}
	return due
}

// HandlePodCleanups is housekeeping, run once every source has been seen:
// pods in the runtime that no source has are killed, statuses of
// forgotten pods dropped, and dead containers, sandboxes and pod
// directories collected. It runs in the background, one at a time.
func (a *Agent) HandlePodCleanups(ctx context.Context) {
	if !a.cleaning.CompareAndSwap(false, true) {
		return
	}
	a.background.Add(1)
	go func() {
		defer a.background.Done()
		defer a.cleaning.Store(false)
		desired := map[types.UID]bool{}
		for _, p := range a.pods.Pods() {
			desired[p.UID] = true
		}
		working := map[types.UID]bool{}
		for _, uid := range a.workers.Known() {
			working[uid] = true
		}
		// A pod counts as wanted if it was in the snapshots above or is in
		// the pod manager now: a pod added since the snapshot already has
		// a worker making its sandbox and directories.
		keep := func(uid types.UID) bool {
			if desired[uid] || working[uid] {
				return true
			}
			_, ok := a.pods.PodByUID(uid)
			return ok
		}
		running, err := a.rt.GetPods(ctx)
		if err != nil {
			a.log.Error("housekeeping: list runtime pods", "error", err)
			return
		}
		for _, rp := range running {
			if keep(rp.UID) || !live(rp) {
				continue
			}
			a.log.Info("killing orphaned pod", "pod", rp.Namespace+"/"+rp.Name, "uid", rp.UID)
			orphan := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: rp.Name, Namespace: rp.Namespace, UID: rp.UID}}
			a.workers.Update(worker.Update{Pod: orphan, Kind: worker.Terminate})
			working[rp.UID] = true
		}
		for _, p := range a.statuses.Pods() {
			if !keep(p.UID) {
				a.forget(p.UID)
			}
		}
		if err := a.rt.GarbageCollect(ctx, running, keep); err != nil && ctx.Err() == nil {
			a.log.Warn("housekeeping: garbage collection", "error", err)
		}
		a.backOff.GC()
	}()
}

func live(p *runtime.Pod) bool {
	for _, o := range p.Objects {
		if o.State == runtime.StateRunning || o.State == runtime.StateCreated {
			return true
		}
	}
	return false
}

// forget drops everything the agent keeps about a pod.
func (a *Agent) forget(uid types.UID) {
	a.statuses.RemovePod(uid)
	a.rt.ForgetPod(uid)
	a.pleg.Cache().Delete(uid)
	a.mu.Lock()
	delete(a.firstSeen, uid)
	delete(a.lastSync, uid)
	delete(a.started, uid)
	delete(a.rejected, uid)
	a.mu.Unlock()
}

// podTerminated is called by a worker once its pod is dead; a pod no
// source has any more is forgotten.
func (a *Agent) podTerminated(p *v1.Pod) {
	a.podTerminatedInCluster(p)
	if _, ok := a.pods.PodByUID(p.UID); !ok {
		a.forget(p.UID)
	}
}

func (a *Agent) generate(p *v1.Pod, rs *runtime.PodStatus, prev *v1.PodStatus) v1.PodStatus {
	return status.Generate(status.Input{Pod: p, Runtime: rs, Previous: prev, RuntimeName: a.rt.Name(), HostIPs: a.hostIPs, Waiting: a.rt.WaitingReason})
}

// syncPod is the workers' sync function: status → runtime.SyncPod (hooks
// and directories are the runtime's) → status again if anything changed.
func (a *Agent) syncPod(ctx context.Context, w worker.Work) error {
	p := w.Pod
	if w.Kind == worker.Terminate {
		return a.terminatePod(ctx, p, w.GracePeriod)
	}
	a.mu.Lock()
	since := a.lastSync[p.UID]
	a.mu.Unlock()
	// A status newer than the last sync: after a restart this waits for
	// the first relist, so running containers are seen, not recreated.
	rs, err := a.pleg.Cache().GetNewerThan(ctx, p.UID, since)
	if err != nil {
		return err
	}
	api := a.generate(p, rs, a.previous(p.UID))
	a.statuses.SetPodStatus(p, api)
	defer func() {
		a.mu.Lock()
		a.lastSync[p.UID] = time.Now()
		a.mu.Unlock()
	}()
	if api.Phase == v1.PodSucceeded || api.Phase == v1.PodFailed {
		// A pod in a terminal phase only gets its remains stopped.
		if rs.Running() {
			return a.rt.KillPod(ctx, p, rs, nil)
		}
		return nil
	}
	res := a.rt.SyncPod(ctx, p, rs, a.backOff)
	if len(res.Steps) > 0 {
		// Read the pod back at once, so its status shows what was just done
		// without waiting for the next relist.
		if fresh, ok := a.readBack(ctx, p); ok {
			api = a.generate(p, fresh, &api)
			a.statuses.SetPodStatus(p, api)
		}
	}
	a.observeStart(p, &api)
	return res.Error()
}

// observeStart records the pod start latency once all containers run.
func (a *Agent) observeStart(p *v1.Pod, s *v1.PodStatus) {
	if len(s.ContainerStatuses) == 0 {
		return
	}
	for _, c := range s.ContainerStatuses {
		if c.State.Running == nil {
			return
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started[p.UID] {
		return
	}
	a.started[p.UID] = true
	if t, ok := a.firstSeen[p.UID]; ok {
		a.metrics.podStart.Observe(time.Since(t).Seconds())
	}
	a.event(p, v1.EventTypeNormal, "Started", "all containers running")
}

// terminatePod kills the pod with the worker's grace period (the pod's own
// unless an override shortened it) and records its final status.
func (a *Agent) terminatePod(ctx context.Context, p *v1.Pod, grace time.Duration) error {
	rs, err := a.rt.GetPodStatus(ctx, p.UID, p.Name, p.Namespace)
	if err != nil {
		return err
	}
	if rs.Running() {
		a.event(p, v1.EventTypeNormal, "Killing", fmt.Sprintf("stopping the pod's containers with a %v grace period", grace))
	}
	var override *int64
	if grace != worker.GracePeriod(p, nil) {
		s := int64(grace / time.Second)
		override = &s
	}
	if err := a.rt.KillPod(ctx, p, rs, override); err != nil {
		return fmt.Errorf("kill pod %s: %w", podName(p), err)
	}
	if _, ok := a.pods.PodByUID(p.UID); ok {
		if fresh, ok := a.readBack(ctx, p); ok {
			a.statuses.SetPodStatus(p, a.generate(p, fresh, a.previous(p.UID)))
		}
	}
	return nil
}

// readBack reads the pod's runtime status right after the agent changed
// it and puts it in the PLEG cache as of when it was read; false when the
// read failed (the next relist reads it).
func (a *Agent) readBack(ctx context.Context, p *v1.Pod) (*runtime.PodStatus, bool) {
	fresh, err := a.rt.GetPodStatus(ctx, p.UID, p.Name, p.Namespace)
	if err != nil {
		return nil, false
	}
	a.pleg.Cache().Set(p.UID, fresh, nil, fresh.Timestamp)
	return fresh, true
}

// previous is the pod's last generated status, nil when it has none.
func (a *Agent) previous(uid types.UID) *v1.PodStatus {
	if s, ok := a.statuses.PodStatus(uid); ok {
		return &s
	}
	return nil
}
