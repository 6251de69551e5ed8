package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/wasmlet/wasmlet/hack/internal/procfs"
	pluginsv1 "github.com/wasmlet/wasmlet/host/apis/plugins/v1alpha1"
)

// bench is one benchmark run against one control plane.
type bench struct {
	cfg             *Config
	client          kubernetes.Interface
	rc              *rest.Config
	apiserver, etcd int
}

// Window is what one measured window cost, per node.
type Window struct {
	// Duration is the window's length.
	Duration time.Duration
	// Requests are the fleet's API requests per node per minute, by verb
	// and resource.
	Requests Counts
	// Refused are those of Requests the API server answered with a status
	// of 400 or more, by verb, resource and status.
	Refused Counts
	// Watches are the fleet's watches open at the window's end, per node,
	// by resource.
	Watches Counts
	// APIServerCPU and EtcdCPU are CPU-seconds per node per minute.
	APIServerCPU, EtcdCPU float64
	// APIServerRSS and EtcdRSS are their resident memory at the end, MiB.
	APIServerRSS, EtcdRSS float64
	// AgentCPU is an agent's CPU-seconds per minute, AgentRSS its
	// resident memory at the end in MiB and AgentAnon the anonymous part
	// of it (fleet sum / nodes).
	AgentCPU, AgentRSS, AgentAnon float64
	// Load is the 1-minute load average at the end.
	Load float64
}

// Result is one fleet's figures in one round.
type Result struct {
	Kind  string
	Round int
	Nodes int
	// Ready is how many nodes were Ready, ReadyAfter the time from the
	// first agent's start to the last Ready.
	Ready      int
	ReadyAfter time.Duration
	// BaseAPIServerRSS and BaseEtcdRSS are the resident memory before the
	// fleet started, MiB.
	BaseAPIServerRSS, BaseEtcdRSS float64
	Idle, Pods                    Window
	// PodsRunning of PodsCreated were seen Running; SLO and Client are
	// their start latencies from creationTimestamp and from the create
	// request.
	PodsCreated, PodsRunning int
	SLO, Client              []time.Duration
	// Reported are the start latencies from creationTimestamp to the
	// containers' startedAt, as the nodes reported them.
	Reported []time.Duration
	// Leases are the renewals from Ready to the fleet's stop; NotReady the
	// nodes seen not Ready after being Ready. LeasesIdle, LeasesRollout
	// and LeasesPods are those late and missed in each phase (start to
	// the idle window's end, the pods to their deletion, the rollout).
	Leases                                LeaseSummary
	LeasesIdle, LeasesRollout, LeasesPods PhaseLeases
	NotReady                              int
	// Rollout is the time from kubectl apply of the WasmletPlugin to the
	// last node enforcing it; RegistryRequests the registry's requests per
	// node meanwhile (0 with no rollout).
	Rollout          time.Duration
	RegistryRequests float64
	// RolloutRSS and RolloutAnon are an agent's resident memory, and the
	// anonymous part of it, once the plugin is enforced everywhere, MiB;
	// RolloutCPU an agent's CPU-seconds from the apply to then.
	RolloutRSS, RolloutAnon, RolloutCPU float64
	// Enforced is how many nodes enforced the plugin at the rollout's
	// end; RolloutErr why the rollout did not reach them all.
	Enforced   int
	RolloutErr string
	// Err is the first thing that failed, with the figures up to it.
	Err string
}

// sample is a moment's counters.
type sample struct {
	at                  time.Time
	apiserver, etcd     procfs.Usage
	agents              procfs.Usage
	agentsRead          int
	registryLogBytes    int64
	registryLogRequests int
}

func (b *bench) sample(f *Fleet) sample {
	s := sample{at: time.Now()}
	s.apiserver, _ = procfs.Read(b.apiserver)
	s.etcd, _ = procfs.Read(b.etcd)
	if f != nil {
		s.agents, s.agentsRead = f.usage()
	}
	return s
}

// window is the figures between two samples; audit must have been read
// after to.
func (b *bench) window(f *Fleet, audit *Audit, from, to sample) Window {
	d := to.at.Sub(from.at)
	nodes := float64(len(f.Agents))
	perNodeMin := 1 / nodes / d.Minutes()
	w := Window{
		Duration:     d,
		Requests:     audit.Requests(f.Users(), from.at, to.at).Scale(perNodeMin),
		Refused:      audit.Refused(f.Users(), from.at, to.at).Scale(perNodeMin),
		Watches:      audit.OpenWatches(f.Users()).Scale(1 / nodes),
		APIServerCPU: (to.apiserver.CPU - from.apiserver.CPU) * perNodeMin,
		EtcdCPU:      (to.etcd.CPU - from.etcd.CPU) * perNodeMin,
		APIServerRSS: mib(to.apiserver.RSS),
		EtcdRSS:      mib(to.etcd.RSS),
		Load:         procfs.LoadAverage(),
	}
	if to.agentsRead > 0 {
		w.AgentCPU = (to.agents.CPU - from.agents.CPU) / float64(to.agentsRead) / d.Minutes()
		w.AgentRSS = mib(to.agents.RSS) / float64(to.agentsRead)
		w.AgentAnon = mib(to.agents.Anon) / float64(to.agentsRead)
	}
	return w
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// fleet runs one fleet of kind through its phases: start, Ready, the idle
// window, the pods and their deletion, the plugin rollout (wasmlet), the
// stop.
func (b *bench) fleet(ctx context.Context, kind string, round int) *Result {
	cfg := b.cfg
	r := &Result{Kind: kind, Round: round, Nodes: cfg.Nodes}
	fail := func(format string, args ...any) *Result {
		if r.Err == "" {
			r.Err = fmt.Sprintf(format, args...)
		}
		return r
	}
	logf("%s round %d: preparing %d nodes", kind, round, cfg.Nodes)
	f, err := prepare(ctx, cfg, kind, round)
	if err != nil {
		return fail("prepare: %v", err)
	}
	base := b.sample(nil)
	r.BaseAPIServerRSS, r.BaseEtcdRSS = mib(base.apiserver.RSS), mib(base.etcd.RSS)
	audit, err := NewAudit(fmt.Sprintf("%s/audit.log", cfg.Cluster))
	if err != nil {
		return fail("%v", err)
	}
	run := fmt.Sprintf("%s-r%d", kind, round)
	leases := NewLeases(cfg.LeaseLate, cfg.LeaseMissed)
	obs := NewObserver(b.client, f.Names(), leases, labels.SelectorFromSet(labels.Set{runLabel: run}))
	defer obs.Close()
	defer b.teardown(f, obs, r)

	// The machine's memory running out ends the fleet, before the kernel's
	// OOM killer picks a process of its own choosing.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go guardMemory(ctx, cancel, cfg.MinAvailable)
	defer func() {
		if cause := context.Cause(ctx); cause != nil && cause != context.Canceled && r.Err == "" {
			r.Err = cause.Error()
		}
	}()
	logf("%s: starting %d agents at %g/s", kind, cfg.Nodes, cfg.StartRate)
	started := time.Now()
	if err := f.start(ctx, cfg); err != nil {
		return fail("start: %v", err)
	}
	if err := poll(ctx, 3*time.Minute+time.Duration(cfg.Nodes)*time.Second, func() (bool, string) {
		if ex := f.Exited(); len(ex) > 0 {
			return false, fmt.Sprintf("agents exited: %v (see %s/*/agent.log)", ex, cfg.Base)
		}
		n := obs.Ready()
		return n == cfg.Nodes, fmt.Sprintf("%d of %d nodes Ready", n, cfg.Nodes)
	}); err != nil {
		r.Ready = obs.Ready()
		return fail("Ready: %v", err)
	}
	r.Ready, r.ReadyAfter = cfg.Nodes, time.Since(started)
	logf("%s: %d nodes Ready after %s", kind, cfg.Nodes, r.ReadyAfter.Round(time.Second))
	// A node is Ready before its start is over: the agent creates its
	// Lease, its remaining informers list and its other objects after the
	// first status. The idle window opens once every node has a Lease, so
	// no start falls into it.
	if err := poll(ctx, 3*time.Minute, func() (bool, string) {
		n := obs.Leased()
		return n == cfg.Nodes, fmt.Sprintf("%d of %d nodes with a Lease", n, cfg.Nodes)
	}); err != nil {
		return fail("Lease: %v", err)
	}
	logf("%s: %d nodes with a Lease after %s; idle window of %s", kind, cfg.Nodes, time.Since(started).Round(time.Second), cfg.Idle)

	// Idle: every node Ready, no pods.
	audit.Read()
	from := b.sample(f)
	if err := sleep(ctx, cfg.Idle); err != nil {
		return fail("%v", err)
	}
	to := b.sample(f)
	if err := b.readAudit(audit); err != nil {
		return fail("%v", err)
	}
	r.Idle = b.window(f, audit, from, to)
	r.LeasesIdle = obs.LeaseCounts()

	// Pods, on a fleet that has done nothing but start: the same phase
	// for both fleets, so their pod start latencies compare.
	if err := b.pods(ctx, f, obs, audit, run, r); err != nil {
		return fail("%v", err)
	}
	r.LeasesPods = obs.LeaseCounts().Sub(r.LeasesIdle)

	if kind == KindWasmlet && cfg.Plugin != "" {
		// Last, as what the other fleet has no counterpart of: a rollout
		// that does not reach every node is a figure, not an error.
		before := obs.LeaseCounts()
		if err := b.rollout(ctx, f, r); err != nil {
			r.RolloutErr = err.Error()
			logf("%s: rollout: %v", kind, err)
		}
		r.LeasesRollout = obs.LeaseCounts().Sub(before)
	}
	return r
}

// pods creates the fleet's pods, waits for them Running and a settle
// time, records the window, then deletes them and waits them gone.
func (b *bench) pods(ctx context.Context, f *Fleet, obs *Observer, audit *Audit, run string, r *Result) error {
	cfg, kind := b.cfg, f.Kind
	total := cfg.Nodes * cfg.PodsPerNode
	logf("%s: creating %d pods at %g/s", kind, total, cfg.CreateRate)
	from := b.sample(f)
	sent, err := b.createPods(ctx, run, kind, total)
	r.PodsCreated = len(sent)
	if err != nil {
		return fmt.Errorf("create pods: %v", err)
	}
	err = poll(ctx, 3*time.Minute+time.Duration(total)*200*time.Millisecond, func() (bool, string) {
		n, _ := obs.Running()
		return n == total, fmt.Sprintf("%d of %d pods Running", n, total)
	})
	if err == nil {
		logf("%s: %d pods Running; %s with them", kind, total, cfg.Settle)
		err = sleep(ctx, cfg.Settle)
	}
	to := b.sample(f)
	r.PodsRunning, _ = obs.Running()
	r.SLO, r.Client, r.Reported = obs.Starts(sent)
	if rerr := b.readAudit(audit); rerr != nil {
		return rerr
	}
	r.Pods = b.window(f, audit, from, to)
	if err != nil {
		return fmt.Errorf("pods: %v", err)
	}
	logf("%s: deleting the pods", kind)
	if err := b.deletePods(ctx, sent); err != nil {
		return fmt.Errorf("delete pods: %v", err)
	}
	if err := poll(ctx, 5*time.Minute, func() (bool, string) {
		_, n := obs.Running()
		return n == 0, fmt.Sprintf("%d pods left", n)
	}); err != nil {
		return fmt.Errorf("pods gone: %v", err)
	}
	return nil
}

// teardown records the lease renewals and NotReady nodes, stops the fleet
// and deletes its Nodes, Leases, WasmletNodes and the WasmletPlugin.
func (b *bench) teardown(f *Fleet, obs *Observer, r *Result) {
	r.Leases = obs.LeaseSummary()
	r.NotReady = obs.NotReady()
	obs.StopObserving()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Pods a failed phase left behind go at once, whatever the nodes do.
	b.client.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))},
		metav1.ListOptions{LabelSelector: fmt.Sprintf("%s=%s-r%d", runLabel, r.Kind, r.Round)})
	logf("%s: stopping the fleet", f.Kind)
	f.stop(30 * time.Second)
	if r.Kind == KindWasmlet && b.cfg.Plugin != "" {
		if err := b.kubectl(ctx, "delete", "--ignore-not-found", "-f", b.cfg.Plugin); err != nil {
			logf("%v", err)
		}
	}
	dyn, err := dynamic.NewForConfig(b.rc)
	for name := range f.Names() {
		b.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
		b.client.CoordinationV1().Leases("kube-node-lease").Delete(ctx, name, metav1.DeleteOptions{})
		if err == nil && r.Kind == KindWasmlet {
			dyn.Resource(pluginsv1.WasmletNodes).Delete(ctx, name, metav1.DeleteOptions{})
		}
	}
}

// guardMemory cancels ctx once the machine's available memory is below
// least, checking every second.
func guardMemory(ctx context.Context, cancel context.CancelCauseFunc, least int64) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if avail, err := procfs.MemAvailable(); err == nil && avail < least {
			cancel(fmt.Errorf("the machine's available memory fell to %.0f MiB (below %.0f MiB): fleet stopped", mib(avail), mib(least)))
			return
		}
	}
}

// readAudit reads the audit log a moment after a window's end: events of
// requests received before it may be written after it.
func (b *bench) readAudit(a *Audit) error {
	time.Sleep(2 * time.Second)
	return a.Read()
}

// runLabel labels the pods of one fleet's round.
const runLabel = "bench.wasmlet.dev/run"

// createPods creates n pods at CreateRate (four at a time at most) and
// returns when each create was sent, by name.
func (b *bench) createPods(ctx context.Context, run, kind string, n int) (map[string]time.Time, error) {
	var mu sync.Mutex
	sent := map[string]time.Time{}
	err := b.paced(ctx, n, func(i int) error {
		p := benchPod(run, kind, i)
		t := time.Now()
		if _, err := b.client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("pod %s: %w", p.Name, err)
		}
		mu.Lock()
		sent[p.Name] = t
		mu.Unlock()
		return nil
	})
	return sent, err
}

// deletePods deletes the pods by name at CreateRate (four at a time at
// most), as they were created: one DeleteCollection of a fleet's pods is a
// single request that a loaded API server cuts at its 60 s limit.
func (b *bench) deletePods(ctx context.Context, pods map[string]time.Time) error {
	names := make([]string, 0, len(pods))
	for name := range pods {
		names = append(names, name)
	}
	return b.paced(ctx, len(names), func(i int) error {
		err := b.client.CoreV1().Pods("default").Delete(ctx, names[i], metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("pod %s: %w", names[i], err)
		}
		return nil
	})
}

// paced calls do for 0..n-1 at CreateRate, four at a time at most, and
// returns the first error once every call started has returned.
func (b *bench) paced(ctx context.Context, n int, do func(i int) error) error {
	lim := rate.NewLimiter(rate.Limit(b.cfg.CreateRate), 1)
	errs := make(chan error, n)
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i := range n {
		if err := lim.Wait(ctx); err != nil {
			wg.Wait()
			return err
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := do(i); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// benchPod is pod i of a run: the tiny image, on the fleet's nodes,
// spread over them by hostname. A node the control plane has tainted (one
// that went NotReady) is left out of the spread (NodeTaintsPolicy Honor):
// by default it would still count as a node with no pods, and once every
// other node had one more, no further pod could be placed until it came
// back: the rest of the run's pods would wait for one node's lease.
func benchPod(run, kind string, i int) *v1.Pod {
	sel := map[string]string{runLabel: run}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%04d", run, i), Labels: sel},
		Spec: v1.PodSpec{
			NodeSelector: map[string]string{FleetLabel: kind},
			TopologySpreadConstraints: []v1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.DoNotSchedule,
				NodeTaintsPolicy: ptr.To(v1.NodeInclusionPolicyHonor),
				LabelSelector:    &metav1.LabelSelector{MatchLabels: sel},
			}},
			TerminationGracePeriodSeconds: ptr.To(int64(5)),
			Containers:                    []v1.Container{{Name: "idle", Image: PodImage, ImagePullPolicy: v1.PullIfNotPresent}},
		},
	}
}

// rollout applies the WasmletPlugin and waits until every node's
// WasmletNode reports it enforced at the digest; it counts the registry's
// requests meanwhile.
func (b *bench) rollout(ctx context.Context, f *Fleet, r *Result) error {
	cfg := b.cfg
	dyn, err := dynamic.NewForConfig(b.rc)
	if err != nil {
		return err
	}
	before := registryRequests(cfg.RegistryLog)
	cpu0, _ := f.usage()
	logf("%s: kubectl apply -f %s", f.Kind, cfg.Plugin)
	applied := time.Now()
	if err := b.kubectl(ctx, "apply", "-f", cfg.Plugin); err != nil {
		return err
	}
	names := f.Names()
	err = poll(ctx, cfg.RolloutSpread+cfg.RolloutTimeout, func() (bool, string) {
		l, err := dyn.Resource(pluginsv1.WasmletNodes).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, u := range l.Items {
			var wn pluginsv1.WasmletNode
			if !names[u.GetName()] || runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &wn) != nil {
				continue
			}
			for _, ps := range wn.Status.Plugins {
				if ps.Name == cfg.PluginName && ps.Enforced && ps.Digest == cfg.PluginDigest {
					n++
				}
			}
		}
		r.Enforced = n
		return n == len(names), fmt.Sprintf("%d of %d nodes enforce %s at %s", n, len(names), cfg.PluginName, cfg.PluginDigest)
	})
	r.Rollout = time.Since(applied)
	if u, n := f.usage(); n > 0 {
		r.RolloutRSS, r.RolloutAnon = mib(u.RSS)/float64(n), mib(u.Anon)/float64(n)
		r.RolloutCPU = (u.CPU - cpu0.CPU) / float64(n)
	}
	if cfg.RegistryLog != "" {
		r.RegistryRequests = float64(registryRequests(cfg.RegistryLog)-before) / float64(len(names))
	}
	logf("%s: rollout to %d nodes in %s, %.1f registry requests per node", f.Kind, len(names), r.Rollout.Round(time.Millisecond), r.RegistryRequests)
	return err
}

// registryRequests counts the HTTP requests in a registry's access log
// (lines with `] "METHOD /v2/`), 0 when it cannot be read.
func registryRequests(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return CountRegistryRequests(b)
}

// CountRegistryRequests counts the access-log lines of API requests
// (`] "GET /v2/…`) in a docker-registry log.
func CountRegistryRequests(log []byte) int {
	n := 0
	for _, line := range bytes.Split(log, []byte("\n")) {
		i := bytes.Index(line, []byte(`] "`))
		if i < 0 {
			continue
		}
		rest := line[i+3:]
		if sp := bytes.IndexByte(rest, ' '); sp > 0 && bytes.HasPrefix(rest[sp+1:], []byte("/v2/")) {
			n++
		}
	}
	return n
}

// poll calls cond every second until it is true, ctx ends or limit passes;
// the error carries cond's last word.
func poll(ctx context.Context, limit time.Duration, cond func() (bool, string)) error {
	deadline := time.Now().Add(limit)
	last := ""
	for {
		ok, s := cond()
		if ok {
			return nil
		}
		if s != last {
			logf("  %s", s)
			last = s
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %s", limit, s)
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
