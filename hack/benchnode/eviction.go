package main

// The eviction figures (hack/eviction-figures.sh, make bench-eviction): the
// agents joined to a control plane the script started, each in turn on the
// same private containerd, with pods from the API server. A static pod is
// critical to both agents and never evicted; a pod from the API server is
// evicted by both.
//
//   - -mode eviction: the time from memory.available crossing the hard
//     threshold to the pod evicted. The threshold is set, at each agent's
//     start, Margin under what memory.available is then; a BestEffort pod
//     allocates twice Margin. A sampler reads memory.available as both
//     agents compute it (harness.MemoryAvailable) every SampleEvery and
//     records the first reading under the threshold; a watch on the pod
//     records when it is seen terminal with the DisruptionTarget condition
//     of reason TerminationByKubelet (wasmlet: Failed/Evicted; the kubelet
//     leaves a pod whose container exits 0 on SIGTERM, as testbox does,
//     Succeeded with that condition), and CRI polling
//     (every 10 ms) when its container, once running, no longer runs. The figure is the later of the
//     two, from the crossing.
//   - -mode gc-load: the agent's CPU and RSS with LoadPods pods running
//     while the eviction manager (its normal 10 s period, the usual hard
//     thresholds) and image GC (high threshold 1 %, low 0 %, minimum age
//     1 min: every pass collects) run. An unused image (the victim) is
//     imported before the agent starts; the kubelet collects images at its
//     start and every 5 min (ImageGCPeriod, fixed), wasmlet at the same
//     default period, so the first pass finds the victim too young and
//     the second removes it. The window (LoadWindow) is centred on that
//     second pass, 5 min after the start; it records whether the victim
//     went during it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	watchtools "k8s.io/client-go/tools/watch"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/cri"
	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
	"github.com/wasmlet/wasmlet/hack/internal/procfs"
	"github.com/wasmlet/wasmlet/hack/kubeletconfig"
)

// imageGCPeriod is the kubelet's image GC period (pkg/kubelet ImageGCPeriod,
// not configurable) and wasmlet's default --image-gc-period.
const imageGCPeriod = 5 * time.Minute

// usualEvictionHard are the hard thresholds both agents get in the
// project's runs besides memory.available (hack/kubeletconfig/kubelet.yaml).
const usualEvictionHard = "nodefs.available<1%,imagefs.available<1%,nodefs.inodesFree<1%"

// EvictionConfig is what the eviction modes need beside Config.
type EvictionConfig struct {
	// Cluster is the directory of hack/apiserver/cluster.sh up (its
	// admin.kubeconfig, pki/ca.crt) where `cluster.sh node` made the
	// node's kubeconfig.
	Cluster string
	// Node is the node's name (its kubeconfig is node-<Node>.kubeconfig).
	Node string
	// AllocImage is the testbox image whose `oom MIB` step allocates.
	AllocImage string
	// Margin is how far under memory.available at the agent's start the
	// threshold is; the pod allocates twice as much.
	Margin int64
	// SampleEvery is the sampler's period.
	SampleEvery time.Duration
	// LoadPods, LoadWindow, LoadRounds: the gc-load mode's pods, window
	// and rounds.
	LoadPods   int
	LoadWindow time.Duration
	LoadRounds int
	// Imports are the image tarballs imported before each gc-load run:
	// the images the run needs (a collection of the run before may have
	// removed one the runtime does not pin, such as the sandbox image)
	// and the victim. VictimRef is the image no pod uses.
	Imports   []string
	VictimRef string
	// CtrSock is the containerd socket ctr imports through.
	CtrSock string
}

// EvictionResult is one eviction run.
type EvictionResult struct {
	Agent string
	Round int
	// Threshold and Alloc are the threshold and the allocation, bytes.
	Threshold, Alloc int64
	// Seconds from the crossing: the pod seen terminal with the node's
	// DisruptionTarget condition by the watch,
	// its container seen stopped through CRI, and the later of the two.
	Failed, Stopped, Evicted Figure
	// Message is the evicted pod's DisruptionTarget message, Phase its
	// phase and reason ("Failed/Evicted").
	Message, Phase string
}

// LoadResult is one gc-load run.
type LoadResult struct {
	Agent string
	Round int
	// Window is the window's length, seconds.
	Window float64
	// CPUWindow is the agent's CPU seconds over the window, CPUTotal from
	// its start to the window's end; RSSAvg and RSSPeak its RSS sampled
	// once a second over the window, MB, and AnonAvg the anonymous part of
	// it (RssAnon: not the pages of its binary and other files).
	CPUWindow, CPUTotal, RSSAvg, RSSPeak, AnonAvg Figure
	// VictimAtStart and VictimAtEnd: the unused image was in the runtime
	// at the window's start and at its end.
	VictimAtStart, VictimAtEnd bool
	// Evictions is the agent's evictions in the run (pods Failed with
	// reason Evicted): none are expected.
	Evictions int
}

// joined is one agent process joined to the cluster.
type joined struct {
	cmd   *exec.Cmd
	log   *os.File
	start time.Time
}

// settings are what a run sets on both agents alike.
type settings struct {
	// EvictionHard is the hard thresholds.
	EvictionHard string
	// TransitionPeriod is evictionPressureTransitionPeriod; "" the default.
	TransitionPeriod string
	// ImageGC sets the image GC's high and low thresholds (percent) and
	// minimum age; nil leaves the defaults.
	ImageGC *imageGC
}

// imageGC is an image GC policy.
type imageGC struct {
	High, Low int
	MinAge    string
}

// wasmletFlags are s as wasmlet run's flags.
func (s settings) wasmletFlags() []string {
	out := []string{"--eviction-hard", s.EvictionHard}
	if s.TransitionPeriod != "" {
		out = append(out, "--eviction-pressure-transition-period", s.TransitionPeriod)
	}
	if g := s.ImageGC; g != nil {
		out = append(out, "--image-gc-high-threshold", strconv.Itoa(g.High), "--image-gc-low-threshold", strconv.Itoa(g.Low), "--minimum-image-gc-age", g.MinAge)
	}
	return out
}

// kubeletConfig is s as lines of a KubeletConfiguration, but for
// evictionHard: the template sets it, so it comes as the kubelet's
// --eviction-hard flag, which overrides the file.
func (s settings) kubeletConfig() string {
	var b strings.Builder
	if s.TransitionPeriod != "" {
		fmt.Fprintf(&b, "evictionPressureTransitionPeriod: %s\n", s.TransitionPeriod)
	}
	if g := s.ImageGC; g != nil {
		fmt.Fprintf(&b, "imageGCHighThresholdPercent: %d\nimageGCLowThresholdPercent: %d\nimageMinimumGCAge: %s\n", g.High, g.Low, g.MinAge)
	}
	return b.String()
}

// startJoined starts the agent with the node's kubeconfig and s, and
// waits until its read-only /healthz answers.
func startJoined(ctx context.Context, cfg Config, ec EvictionConfig, agent, dir string, s settings) (*joined, error) {
	for _, d := range []string{filepath.Join(dir, "logs"), filepath.Join(dir, "root")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	kubeconfig := filepath.Join(ec.Cluster, "node-"+ec.Node+".kubeconfig")
	ca := filepath.Join(ec.Cluster, "pki", "ca.crt")
	var cmd *exec.Cmd
	if agent == "kubelet" {
		conf, err := kubeletconfig.Render(map[string]string{
			"containerRuntimeEndpoint": cfg.Endpoint, "podLogsDir": filepath.Join(dir, "logs"),
			"anonymousEnabled": "false", "webhookEnabled": "true", "clientCAFile": ca, "authorizationMode": "Webhook",
			"address": "127.0.0.1", "port": strconv.Itoa(kubeletPort), "readOnlyPort": strconv.Itoa(readOnlyPort), "healthzPort": strconv.Itoa(healthzPort),
		})
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, "kubelet.yaml")
		if err := os.WriteFile(path, []byte(conf+s.kubeletConfig()), 0o644); err != nil {
			return nil, err
		}
		cmd = exec.Command(cfg.Kubelet, "--config", path, "--kubeconfig", kubeconfig, "--hostname-override", ec.Node,
			"--node-ip", "127.0.0.1", "--root-dir", filepath.Join(dir, "root"), "--cert-dir", filepath.Join(dir, "root", "pki"),
			"--eviction-hard", s.EvictionHard)
	} else {
		cmd = exec.Command(cfg.Wasmlet, append(append([]string{"run", "--node-name", ec.Node, "--kubeconfig", kubeconfig,
			"--container-runtime-endpoint", cfg.Endpoint, "--root-dir", filepath.Join(dir, "root"), "--pod-logs-dir", filepath.Join(dir, "logs"),
			"--address", "127.0.0.1", "--read-only-port", strconv.Itoa(readOnlyPort), "--port", strconv.Itoa(kubeletPort),
			"--healthz-port", strconv.Itoa(healthzPort), "--client-ca-file", ca}, s.wasmletFlags()...), strings.Fields(cfg.WasmletArgs)...)...)
	}
	logf, err := os.Create(filepath.Join(dir, "agent.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// The agent dies with the benchmark, killed or failed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	j := &joined{cmd: cmd, log: logf, start: time.Now()}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	if err := waitHealthy(ctx, fmt.Sprintf("http://127.0.0.1:%d/healthz", readOnlyPort), cmd, time.Minute); err != nil {
		j.stop(ctx, nil)
		return nil, fmt.Errorf("%w (log %s)", err, logf.Name())
	}
	return j, nil
}

// stop ends the agent (SIGTERM, SIGKILL after 20 s) and, with c, removes
// every pod from the runtime.
func (j *joined) stop(ctx context.Context, c *cri.Client) {
	j.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { j.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		j.cmd.Process.Kill()
		<-done
	}
	j.log.Close()
	if c == nil {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := c.RemoveAll(rctx, 2); err != nil {
		fmt.Fprintf(os.Stderr, "benchnode: cleanup: %v\n", err)
	}
}

// forget deletes the benchmark's pods (at once, grace 0) and the Node, so
// the next agent registers afresh.
func forget(ctx context.Context, k kubernetes.Interface, node, selector string) {
	err := k.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))},
		metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchnode: delete pods: %v\n", err)
	}
	if err := k.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		fmt.Fprintf(os.Stderr, "benchnode: delete node: %v\n", err)
	}
}

// waitNodeReady polls the Node until its Ready condition is True.
func waitNodeReady(ctx context.Context, k kubernetes.Interface, node string, limit time.Duration) error {
	end := time.Now().Add(limit)
	last := "not registered"
	for time.Now().Before(end) {
		n, err := k.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err == nil {
			for _, c := range n.Status.Conditions {
				if c.Type == v1.NodeReady {
					if c.Status == v1.ConditionTrue {
						return nil
					}
					last = c.Reason + ": " + c.Message
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("node %s not Ready after %v (%s)", node, limit, last)
}

// benchPod is a pod of the benchmark bound to the node: no ServiceAccount
// token (the control plane runs no token controller), every taint
// tolerated, 3 s to stop.
func benchPod(name, node, image, role string, command []string, args []string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"bench": role}},
		Spec: v1.PodSpec{
			NodeName: node, AutomountServiceAccountToken: ptr.To(false), RestartPolicy: v1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To(int64(3)), Tolerations: []v1.Toleration{{Operator: v1.TolerationOpExists}},
			Containers: []v1.Container{{Name: "main", Image: image, ImagePullPolicy: v1.PullIfNotPresent, Command: command, Args: args}},
		},
	}
}

// admin is the cluster's admin client.
func admin(ec EvictionConfig) (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(ec.Cluster, "admin.kubeconfig"))
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = 100, 200
	return kubernetes.NewForConfig(rc)
}

// evictionRun is one eviction run of agent.
func evictionRun(ctx context.Context, c *cri.Client, k kubernetes.Interface, cfg Config, ec EvictionConfig, agent string, round int) (EvictionResult, error) {
	res := EvictionResult{Agent: agent, Round: round}
	avail, err := harness.MemoryAvailable()
	if err != nil {
		return res, err
	}
	res.Threshold, res.Alloc = avail-ec.Margin, 2*ec.Margin
	dir := filepath.Join(cfg.Base, fmt.Sprintf("evict-%s-%d", agent, round))
	j, err := startJoined(ctx, cfg, ec, agent, dir, settings{
		EvictionHard: fmt.Sprintf("memory.available<%d,%s", res.Threshold, usualEvictionHard), TransitionPeriod: "10s",
	})
	if err != nil {
		return res, err
	}
	defer func() {
		forget(ctx, k, ec.Node, "bench=evict")
		j.stop(ctx, c)
	}()
	if err := waitNodeReady(ctx, k, ec.Node, 2*time.Minute); err != nil {
		return res, err
	}

	sctx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	crossed := make(chan time.Time, 1)
	go sample(sctx, ec.SampleEvery, res.Threshold, crossed)

	pod := benchPod("evict-hog", ec.Node, ec.AllocImage, "evict", nil, []string{"oom", strconv.FormatInt(res.Alloc>>20, 10), ";", "sleep", "inf"})
	// The watch is an informer's (watchtools.UntilWithSync): a watch the
	// API server closes is resumed, not taken for the end.
	sel := fields.OneTermEqualSelector("metadata.name", pod.Name).String()
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return k.CoreV1().Pods("default").List(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return k.CoreV1().Pods("default").Watch(ctx, o)
		},
	}
	type seen struct {
		at         time.Time
		msg, phase string
		err        error
	}
	failed := make(chan seen, 1)
	wctx, stopWatching := context.WithTimeout(ctx, cfg.Timeout)
	defer stopWatching()
	synced := make(chan struct{})
	go func() {
		var s seen
		_, err := watchtools.UntilWithSync(wctx, lw, &v1.Pod{}, func(store cache.Store) (bool, error) {
			close(synced)
			return false, nil
		}, func(ev watch.Event) (bool, error) {
			p, ok := ev.Object.(*v1.Pod)
			if !ok || (p.Status.Phase != v1.PodFailed && p.Status.Phase != v1.PodSucceeded) {
				return false, nil
			}
			dt := disruptedByNode(p)
			if dt == nil {
				return false, fmt.Errorf("pod ended %s (%s) with no DisruptionTarget condition from the node", p.Status.Phase, p.Status.Reason)
			}
			s = seen{at: time.Now(), msg: dt.Message, phase: string(p.Status.Phase) + "/" + p.Status.Reason}
			return true, nil
		})
		if err != nil {
			s.err = fmt.Errorf("watching the pod: %w", err)
		}
		failed <- s
	}()
	select {
	case <-synced:
	case <-time.After(time.Minute):
		return res, errors.New("the pod watch's informer did not sync in 1 min")
	}
	created, err := k.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return res, err
	}
	type stop struct {
		at  time.Time
		err error
	}
	stopped := make(chan stop, 1)
	go func() {
		at, err := waitRanAndStopped(ctx, c, string(created.UID), cfg.Timeout)
		stopped <- stop{at, err}
	}()
	var cross time.Time
	select {
	case cross = <-crossed:
	case <-time.After(cfg.Timeout):
		return res, fmt.Errorf("memory.available never crossed %d MiB in %v (log %s)", res.Threshold>>20, cfg.Timeout, j.log.Name())
	}
	st := <-stopped
	if st.err != nil {
		return res, fmt.Errorf("%w (log %s)", st.err, j.log.Name())
	}
	f := <-failed
	if f.err != nil {
		return res, fmt.Errorf("%w (log %s)", f.err, j.log.Name())
	}
	res.Failed = Figure{f.at.Sub(cross).Seconds(), load()}
	res.Stopped = Figure{st.at.Sub(cross).Seconds(), load()}
	res.Evicted = Figure{max(res.Failed.V, res.Stopped.V), load()}
	res.Message, res.Phase = f.msg, f.phase
	return res, nil
}

// disruptedByNode is the pod's DisruptionTarget condition if the node
// set it (reason TerminationByKubelet, status True).
func disruptedByNode(p *v1.Pod) *v1.PodCondition {
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		if c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue && c.Reason == v1.PodReasonTerminationByKubelet {
			return c
		}
	}
	return nil
}

// sample reads memory.available every period and sends the time of the
// first reading under threshold.
func sample(ctx context.Context, every time.Duration, threshold int64, crossed chan<- time.Time) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if n, err := harness.MemoryAvailable(); err == nil && n < threshold {
			crossed <- time.Now()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// waitRanAndStopped polls CRI every 10 ms until a container of the pod
// runs, then until none does, and returns when it saw that first.
func waitRanAndStopped(ctx context.Context, c *cri.Client, uid string, limit time.Duration) (time.Time, error) {
	end := time.Now().Add(limit)
	ran := false
	for time.Now().Before(end) {
		cs, err := c.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
			State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
			LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid},
		})
		if err != nil {
			return time.Time{}, fmt.Errorf("ListContainers: %w", err)
		}
		if len(cs) > 0 {
			ran = true
		} else if ran {
			return time.Now(), nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !ran {
		return time.Time{}, fmt.Errorf("the pod's container never ran in %v", limit)
	}
	return time.Time{}, fmt.Errorf("the pod's container still runs after %v", limit)
}

// loadRun is one gc-load run of agent.
func loadRun(ctx context.Context, c *cri.Client, k kubernetes.Interface, cfg Config, ec EvictionConfig, agent string, round int) (LoadResult, error) {
	res := LoadResult{Agent: agent, Round: round, Window: ec.LoadWindow.Seconds()}
	for _, tar := range ec.Imports {
		if out, err := exec.CommandContext(ctx, "ctr", "--address", ec.CtrSock, "-n", "k8s.io", "images", "import", tar).CombinedOutput(); err != nil {
			return res, fmt.Errorf("import %s: %v: %s", tar, err, out)
		}
	}
	dir := filepath.Join(cfg.Base, fmt.Sprintf("load-%s-%d", agent, round))
	j, err := startJoined(ctx, cfg, ec, agent, dir, settings{
		EvictionHard: "memory.available<1Mi," + usualEvictionHard, ImageGC: &imageGC{High: 1, Low: 0, MinAge: "1m"},
	})
	if err != nil {
		return res, err
	}
	defer func() {
		forget(ctx, k, ec.Node, "bench=load")
		j.stop(ctx, c)
	}()
	pid := j.cmd.Process.Pid
	if err := waitNodeReady(ctx, k, ec.Node, 2*time.Minute); err != nil {
		return res, err
	}
	for i := range ec.LoadPods {
		p := benchPod(fmt.Sprintf("load-%03d", i), ec.Node, cfg.Image, "load", []string{"sleep", "3600"}, nil)
		if _, err := k.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return res, err
		}
	}
	for {
		cs, err := c.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
			State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
			LabelSelector: map[string]string{"io.kubernetes.container.name": "main"},
		})
		if err != nil {
			return res, err
		}
		if len(cs) >= ec.LoadPods {
			break
		}
		if time.Since(j.start) > cfg.Timeout {
			return res, fmt.Errorf("%d of %d pods running after %v (log %s)", len(cs), ec.LoadPods, cfg.Timeout, j.log.Name())
		}
		time.Sleep(100 * time.Millisecond)
	}
	from := j.start.Add(imageGCPeriod - ec.LoadWindow/2)
	if d := time.Until(from); d > 0 {
		time.Sleep(d)
	} else {
		fmt.Fprintf(os.Stderr, "benchnode: %s: the pods took until %v after the start; the window starts late\n", agent, time.Since(j.start).Round(time.Second))
	}
	res.VictimAtStart, err = hasImage(ctx, c, ec.VictimRef)
	if err != nil {
		return res, err
	}
	cpu0 := cpuSeconds(pid)
	var rss, anon []float64
	end := time.Now().Add(ec.LoadWindow)
	for time.Now().Before(end) {
		if u, err := procfs.Read(pid); err == nil {
			rss, anon = append(rss, float64(u.RSS)/(1<<20)), append(anon, float64(u.Anon)/(1<<20))
		}
		time.Sleep(time.Second)
	}
	if len(rss) == 0 {
		return res, fmt.Errorf("%s: its memory could not be read in the window (pid %d)", agent, pid)
	}
	res.CPUWindow = Figure{cpuSeconds(pid) - cpu0, load()}
	res.CPUTotal = Figure{cpuSeconds(pid), load()}
	var sum float64
	for _, r := range rss {
		sum += r
	}
	res.RSSAvg = Figure{sum / float64(len(rss)), load()}
	sum = 0
	for _, r := range anon {
		sum += r
	}
	res.AnonAvg = Figure{sum / float64(len(anon)), load()}
	res.RSSPeak = Figure{slices.Max(rss), load()}
	if res.VictimAtEnd, err = hasImage(ctx, c, ec.VictimRef); err != nil {
		return res, err
	}
	pods, err := k.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "bench=load"})
	if err != nil {
		return res, err
	}
	for _, p := range pods.Items {
		if p.Status.Reason == "Evicted" {
			res.Evictions++
		}
	}
	return res, nil
}

// hasImage reports whether the runtime holds an image tagged ref.
func hasImage(ctx context.Context, c *cri.Client, ref string) (bool, error) {
	imgs, err := c.Image.ListImages(ctx, &runtimeapi.ImageFilter{})
	if err != nil {
		return false, fmt.Errorf("ListImages: %w", err)
	}
	for _, i := range imgs {
		if slices.Contains(i.RepoTags, ref) {
			return true, nil
		}
	}
	return false, nil
}

// runEviction runs the modes asked for, each agent in turn (reversed in
// even rounds), and prints their tables.
func runEviction(ctx context.Context, c *cri.Client, cfg Config, ec EvictionConfig, modes []string) error {
	k, err := admin(ec)
	if err != nil {
		return err
	}
	order := func(round int) []string {
		a := slices.Clone(cfg.Agents)
		if round%2 == 0 {
			slices.Reverse(a)
		}
		return a
	}
	if slices.Contains(modes, "eviction") {
		var results []EvictionResult
		for round := 1; round <= cfg.Rounds; round++ {
			for _, agent := range order(round) {
				r, err := evictionRun(ctx, c, k, cfg, ec, agent, round)
				if err != nil {
					return fmt.Errorf("eviction, round %d, %s: %w", round, agent, err)
				}
				fmt.Fprintf(os.Stderr, "eviction round %d %-7s threshold %d MiB, allocating %d MiB: pod seen %s with DisruptionTarget %.2fs, container stopped %.2fs after the crossing (load %.2f); %s\n",
					round, agent, r.Threshold>>20, r.Alloc>>20, r.Phase, r.Failed.V, r.Stopped.V, r.Evicted.Load, r.Message)
				results = append(results, r)
			}
		}
		printEvictionTable(os.Stdout, cfg.Agents, results)
	}
	if slices.Contains(modes, "gc-load") {
		var results []LoadResult
		for round := 1; round <= ec.LoadRounds; round++ {
			for _, agent := range order(round) {
				r, err := loadRun(ctx, c, k, cfg, ec, agent, round)
				if err != nil {
					return fmt.Errorf("gc-load, round %d, %s: %w", round, agent, err)
				}
				fmt.Fprintf(os.Stderr, "gc-load round %d %-7s %d pods, %.0fs window at the second image GC pass: cpu %.2fs (since start %.2fs), rss avg %.1f MB peak %.1f MB anon avg %.1f MB (load %.2f); unused image at the window's start %v, at its end %v; evictions %d\n",
					round, agent, ec.LoadPods, r.Window, r.CPUWindow.V, r.CPUTotal.V, r.RSSAvg.V, r.RSSPeak.V, r.AnonAvg.V, r.CPUWindow.Load, r.VictimAtStart, r.VictimAtEnd, r.Evictions)
				results = append(results, r)
			}
		}
		printLoadTable(os.Stdout, cfg.Agents, ec, results)
	}
	return nil
}

// median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// printEvictionTable writes one row per agent and round (seconds from the
// crossing, with the 1-minute load average), then each agent's median.
func printEvictionTable(w io.Writer, agents []string, results []EvictionResult) {
	fmt.Fprintln(w, "\nmemory.available crossing the hard threshold → pod evicted (seconds; load average in brackets)")
	fmt.Fprintf(w, "%-8s %5s %18s %18s %18s  %s\n", "agent", "round", "status terminal", "container stopped", "evicted (later)", "phase/reason")
	for _, a := range agents {
		var ev []float64
		for _, r := range results {
			if r.Agent != a {
				continue
			}
			fmt.Fprintf(w, "%-8s %5d %18s %18s %18s  %s\n", a, r.Round, fig(r.Failed), fig(r.Stopped), fig(r.Evicted), r.Phase)
			ev = append(ev, r.Evicted.V)
		}
		fmt.Fprintf(w, "%-8s %5s %18s %18s %18.2f\n", a, "median", "", "", median(ev))
	}
}

// printLoadTable writes one row per agent and round, then the ratio of
// the second agent's figures to the first's, by medians over the rounds.
func printLoadTable(w io.Writer, agents []string, ec EvictionConfig, results []LoadResult) {
	fmt.Fprintf(w, "\n%d pods, eviction every 10 s and image GC (high 1 %%, low 0 %%, minimum age 1 min) on, %.0f s window at the second image GC pass\n", ec.LoadPods, ec.LoadWindow.Seconds())
	fmt.Fprintf(w, "%-8s %5s %16s %16s %16s %16s %16s %13s\n", "agent", "round", "CPU window s", "CPU since start", "RSS avg MB", "RSS peak MB", "anon avg MB", "image GC'd")
	med := map[string][4]float64{}
	for _, a := range agents {
		var cpu, avg, peak, anon []float64
		for _, r := range results {
			if r.Agent != a {
				continue
			}
			gcd := "no"
			if r.VictimAtStart && !r.VictimAtEnd {
				gcd = "in window"
			} else if !r.VictimAtStart {
				gcd = "before"
			}
			fmt.Fprintf(w, "%-8s %5d %16s %16s %16s %16s %16s %13s\n", a, r.Round, fig(r.CPUWindow), fig(r.CPUTotal), fig(r.RSSAvg), fig(r.RSSPeak), fig(r.AnonAvg), gcd)
			cpu, avg, peak, anon = append(cpu, r.CPUWindow.V), append(avg, r.RSSAvg.V), append(peak, r.RSSPeak.V), append(anon, r.AnonAvg.V)
		}
		med[a] = [4]float64{median(cpu), median(avg), median(peak), median(anon)}
	}
	if len(agents) >= 2 {
		a, b := med[agents[0]], med[agents[1]]
		ratio := func(x, y float64) string {
			if y == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f", x/y)
		}
		fmt.Fprintf(w, "%s/%s (medians): CPU window %s, RSS avg %s, RSS peak %s, anon avg %s\n", agents[1], agents[0], ratio(b[0], a[0]), ratio(b[1], a[1]), ratio(b[2], a[2]), ratio(b[3], a[3]))
	}
}

// evictionMemory parses a -margin such as 768Mi.
func evictionMemory(s string) (int64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("-margin: %w", err)
	}
	return q.Value(), nil
}
