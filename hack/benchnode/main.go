// Command benchnode times a burst of static pods on one containerd under
// wasmlet and under the real kubelet, alternately, and prints the table of
// `make bench-node` (hack/bench-node.sh sets up containerd and the images):
//
//	benchnode -endpoint unix:///tmp/wlb.x/ctrd/c.sock -base /tmp/wlb.x \
//	  -wasmlet bin/wasmlet -kubelet ~/.cache/wasmlet/kubelet/v1.36.3/kubelet \
//	  -pods 1,10,30,100 -rounds 2 -image wasmlet.local/busybox:1.0
//
// Each run starts the agent fresh (empty root and manifest directories),
// waits until it is idle, moves N manifests (host-network busybox `sleep`,
// termination grace 1 s, so 2 s, the floor of both agents) into its static
// pod directory at once, and watches containerd (CRI ListContainers every
// 100 ms) until every pod's container runs; then deletes the manifests and
// watches until no container of them runs any more and none of them is
// listed by the agent's /pods. Agent CPU (utime+stime) and RSS come from
// /proc, the load average from /proc/loadavg at the moment of each figure.
// Between runs the agent is stopped and every pod removed through CRI.
//
// With -probes each container runs busybox httpd on its own loopback port
// with an httpGet readiness and an exec liveness probe (period 10 s); after
// all pods run, the run waits until the agent's /pods shows them all Ready
// and measures a steady window (-window, 60 s): the agent's CPU, the CPU of
// containerd and its shims (an exec probe is a runc exec the shim reaps),
// the agent's RSS and the containers' restarts.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/cri"
	"github.com/wasmlet/wasmlet/hack/internal/procfs"
	"github.com/wasmlet/wasmlet/hack/kubeletconfig"
)

// namespace holds every benchmark pod, so only they are counted.
const namespace = "bench"

// Config is what one benchmark invocation runs.
type Config struct {
	Endpoint string // CRI endpoint of the private containerd
	Base     string // state directory (agents' roots, manifests, logs)
	Wasmlet  string // wasmlet binary
	Kubelet  string // kubelet binary
	Image    string // the busybox image the pods run
	Pods     []int  // pod counts, one run per count, agent and round
	Rounds   int
	Agents   []string // "kubelet", "wasmlet", "wasmlet-hooks", in this order each round
	Timeout  time.Duration
	// Probes gives every pod's container an httpGet readiness probe
	// (busybox httpd on its own loopback port) and an exec liveness probe,
	// both every 10 s, and adds a steady-state window of Window after all
	// pods are Ready, over which the agent's and the runtime's CPU are
	// measured.
	Probes bool
	Window time.Duration
	// Logs, when set, receives a copy of each run's agent log.
	Logs string
	// WasmletArgs are extra arguments of wasmlet run, space-separated.
	WasmletArgs string
	// HookPlugins is the plugin directory of the agent "wasmlet-hooks":
	// wasmlet with those plugins loaded, beside "wasmlet" without any.
	HookPlugins string
}

func main() {
	var cfg Config
	var ec EvictionConfig
	var pods, agents, mode, margin string
	flag.StringVar(&mode, "mode", "burst", "burst (static pods started and stopped), or eviction and/or gc-load (comma-separated; pods from the API server of -cluster)")
	flag.StringVar(&ec.Cluster, "cluster", "", "eviction modes: the directory of hack/apiserver/cluster.sh up")
	flag.StringVar(&ec.Node, "node", "bench-node", "eviction modes: the node's name (cluster.sh node made its kubeconfig)")
	flag.StringVar(&ec.AllocImage, "alloc-image", "wasmlet.local/testbox:1.0", "eviction mode: the testbox image whose oom step allocates")
	flag.StringVar(&margin, "margin", "768Mi", "eviction mode: the threshold's distance under memory.available at the agent's start (the pod allocates twice as much)")
	flag.DurationVar(&ec.SampleEvery, "sample-every", 5*time.Millisecond, "eviction mode: how often memory.available is read")
	flag.IntVar(&ec.LoadPods, "load-pods", 30, "gc-load mode: pods running")
	flag.DurationVar(&ec.LoadWindow, "load-window", time.Minute, "gc-load mode: the window, centred on the second image GC pass")
	flag.IntVar(&ec.LoadRounds, "load-rounds", 1, "gc-load mode: rounds")
	var imports string
	flag.StringVar(&imports, "import", "", "gc-load mode: image tarballs imported before each run (comma-separated), the one of -victim among them")
	flag.StringVar(&ec.VictimRef, "victim", "wasmlet.local/testbox:1.0", "gc-load mode: the imported image no pod uses")
	flag.StringVar(&ec.CtrSock, "ctr-sock", "", "gc-load mode: the containerd socket ctr imports through")
	flag.StringVar(&cfg.Endpoint, "endpoint", "", "CRI endpoint of the containerd")
	flag.StringVar(&cfg.Base, "base", "", "state directory")
	flag.StringVar(&cfg.Wasmlet, "wasmlet", "bin/wasmlet", "wasmlet binary")
	flag.StringVar(&cfg.Kubelet, "kubelet", "", "kubelet binary")
	flag.StringVar(&cfg.Image, "image", "wasmlet.local/busybox:1.0", "image with a sleep command")
	flag.StringVar(&pods, "pods", "1,10,30,100", "pod counts")
	flag.IntVar(&cfg.Rounds, "rounds", 2, "rounds (each runs every count under each agent)")
	flag.StringVar(&agents, "agents", "kubelet,wasmlet", "agents, in run order (reversed in even rounds)")
	flag.DurationVar(&cfg.Timeout, "timeout", 5*time.Minute, "limit for each start and each stop")
	flag.BoolVar(&cfg.Probes, "probes", false, "give each pod an httpGet readiness and an exec liveness probe and measure a steady-state window")
	flag.DurationVar(&cfg.Window, "window", time.Minute, "with -probes: the steady-state window after all pods are Ready")
	flag.StringVar(&cfg.Logs, "logs", "", "directory each run's agent log is copied to (<agent>-<pods>-<round>.log)")
	flag.StringVar(&cfg.WasmletArgs, "wasmlet-args", "", "extra wasmlet run arguments, space-separated (e.g. --log-level debug)")
	flag.StringVar(&cfg.HookPlugins, "hook-plugins", "", "plugin directory of the agent wasmlet-hooks")
	flag.Parse()
	for _, s := range strings.Split(pods, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fatalf("-pods: %q is not a pod count", s)
		}
		cfg.Pods = append(cfg.Pods, n)
	}
	cfg.Agents = strings.Split(agents, ",")
	for _, a := range cfg.Agents {
		if a != "kubelet" && a != "wasmlet" && a != "wasmlet-hooks" {
			fatalf("-agents: %q is none of kubelet, wasmlet, wasmlet-hooks", a)
		}
		if a == "wasmlet-hooks" && cfg.HookPlugins == "" {
			fatalf("-agents: wasmlet-hooks needs -hook-plugins")
		}
	}
	if cfg.Endpoint == "" || cfg.Base == "" || (cfg.Kubelet == "" && strings.Contains(agents, "kubelet")) {
		fatalf("-endpoint, -base and -kubelet are required")
	}
	if mode != "burst" {
		modes := strings.Split(mode, ",")
		for _, m := range modes {
			if m != "eviction" && m != "gc-load" {
				fatalf("-mode: %q is none of burst, eviction, gc-load", m)
			}
		}
		if slices.Contains(cfg.Agents, "wasmlet-hooks") || ec.Cluster == "" {
			fatalf("-mode %s: needs -cluster, and the agents kubelet and wasmlet only", mode)
		}
		if imports != "" {
			ec.Imports = strings.Split(imports, ",")
		}
		if slices.Contains(modes, "gc-load") && (len(ec.Imports) == 0 || ec.CtrSock == "") {
			fatalf("-mode gc-load: needs -import and -ctr-sock")
		}
		var err error
		if ec.Margin, err = evictionMemory(margin); err != nil {
			fatalf("%v", err)
		}
		ctx := context.Background()
		c, err := cri.Connect(ctx, cfg.Endpoint)
		if err != nil {
			fatalf("%v", err)
		}
		defer c.Close()
		if err := runEviction(ctx, c, cfg, ec, modes); err != nil {
			fatalf("%v", err)
		}
		return
	}
	if dir, err := accountRuntime(cfg.Base); err != nil {
		fmt.Fprintf(os.Stderr, "benchnode: runtime CPU from live processes only (shims that exit are missed): %v\n", err)
	} else {
		fmt.Fprintf(os.Stderr, "benchnode: runtime CPU from cgroup %s\n", dir)
	}
	ctx := context.Background()
	c, err := cri.Connect(ctx, cfg.Endpoint)
	if err != nil {
		fatalf("%v", err)
	}
	defer c.Close()
	var results []Result
	for round := 1; round <= cfg.Rounds; round++ {
		for _, n := range cfg.Pods {
			// Even rounds run the agents in reverse order, so neither
			// always runs on what the other left behind (the runtime still
			// reaping its shims and snapshots, the load average).
			agents := slices.Clone(cfg.Agents)
			if round%2 == 0 {
				slices.Reverse(agents)
			}
			for _, agent := range agents {
				r, err := run(ctx, c, cfg, agent, n, round)
				if err != nil {
					fatalf("round %d, %d pods, %s: %v", round, n, agent, err)
				}
				fmt.Fprintln(os.Stderr, r.line())
				results = append(results, r)
			}
		}
	}
	printTable(os.Stdout, cfg, results)
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "benchnode: "+format+"\n", args...)
	os.Exit(1)
}

// Figure is a duration or amount with the 1-minute load average when it was
// taken.
type Figure struct {
	V    float64
	Load float64
}

// Result is one run: one agent, N pods.
type Result struct {
	Agent string
	Pods  int
	Round int
	// Seconds from the manifests' arrival.
	First, Median, All Figure
	// Seconds from the manifests' removal: every container stopped, and
	// every pod gone from the agent's /pods.
	Stopped, Gone Figure
	// Agent CPU seconds while starting and while stopping, and RSS in MB
	// idle and with all pods running.
	CPUStart, CPUStop, RSSIdle, RSSRun Figure
	// While starting: the runtime's CPU seconds (containerd, its shims and
	// their reaped children: runc) and the share of the machine's CPU time
	// that was busy, every process counted (1 = every core busy the whole
	// time): what bounds the start once the runtime saturates the machine.
	RuntimeCPUStart, BusyStart Figure
	// ContainerdCPUStart is the part of RuntimeCPUStart that the containerd
	// process itself spent (answering the agent's CRI calls, handling
	// events); the rest is its shims and runc.
	ContainerdCPUStart Figure
	// While stopping, until every container stopped: the runtime's CPU
	// seconds and the share of the machine's CPU that was busy.
	RuntimeCPUStop, BusyStop Figure
	// StillRunning is the number of pods with a running container, once
	// a second from the manifests' removal until none has.
	StillRunning []int
	// CRI call counts and mean seconds by method while starting, from the
	// agent's own metrics (none when it has no such metric).
	CRI []CRICall
	// CRIStop is the same from the manifests' removal until every pod
	// stopped and left /pods.
	CRIStop []CRICall
	// Limits are wasmlet's pod start limit (wasmlet_pod_start_limit), read
	// once a second while starting; none for an agent without it.
	Limits []float64
	// With probes: seconds from the manifests' arrival until the agent's
	// /pods shows every pod Ready; then, over the steady-state window, the
	// agent's CPU seconds, the runtime's (containerd and its shims, the
	// exec probes' cost), the agent's RSS at its end, and the containers'
	// restarts during it (a failing liveness probe would show here).
	Ready, CPUSteady, RuntimeCPUSteady, RSSSteady, Restarts Figure
}

// CRICall is one CRI method's calls in a phase.
type CRICall struct {
	Method string
	Count  float64
	Sum    float64
}

func (r Result) line() string {
	l := fmt.Sprintf("round %d %-7s %3d pods: first %.2fs median %.2fs all %.2fs (load %.2f); stopped %.2fs, gone from /pods %.2fs (load %.2f); cpu start %.2fs stop %.2fs; runtime cpu start %.2fs, machine busy %.0f%%; rss idle %.1f MB running %.1f MB",
		r.Round, r.Agent, r.Pods, r.First.V, r.Median.V, r.All.V, r.All.Load, r.Stopped.V, r.Gone.V, r.Gone.Load, r.CPUStart.V, r.CPUStop.V, r.RuntimeCPUStart.V, 100*r.BusyStart.V, r.RSSIdle.V, r.RSSRun.V)
	if r.Ready.V > 0 {
		l += fmt.Sprintf("; all Ready %.2fs; steady window: agent cpu %.2fs (load %.2f), runtime cpu %.2fs, rss %.1f MB, restarts %.0f",
			r.Ready.V, r.CPUSteady.V, r.CPUSteady.Load, r.RuntimeCPUSteady.V, r.RSSSteady.V, r.Restarts.V)
	}
	return l
}

// Ports of the agents (not the defaults, so a node agent on the machine
// does not clash).
const (
	readOnlyPort = 10356
	kubeletPort  = 10350
	healthzPort  = 10358
)

func run(ctx context.Context, c *cri.Client, cfg Config, agent string, n, round int) (Result, error) {
	res := Result{Agent: agent, Pods: n, Round: round}
	dir := filepath.Join(cfg.Base, fmt.Sprintf("%s-%d-%d", agent, n, round))
	manifests, staging := filepath.Join(dir, "manifests"), filepath.Join(dir, "staging")
	for _, d := range []string{manifests, staging, filepath.Join(dir, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return res, err
		}
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(staging, fmt.Sprintf("bench-%03d.yaml", i)), []byte(manifest(i, cfg.Image, cfg.Probes)), 0o644); err != nil {
			return res, err
		}
	}
	cmd, err := agentCmd(cfg, agent, dir, manifests)
	if err != nil {
		return res, err
	}
	logf, err := os.Create(filepath.Join(dir, "agent.log"))
	if err != nil {
		return res, err
	}
	defer logf.Close()
	if cfg.Logs != "" {
		defer keepLog(logf.Name(), filepath.Join(cfg.Logs, fmt.Sprintf("%s-%d-%d.log", agent, n, round)))
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return res, err
	}
	pid := cmd.Process.Pid
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		if err := c.RemoveAll(rctx, 2); err != nil {
			fmt.Fprintf(os.Stderr, "benchnode: cleanup: %v\n", err)
		}
	}()
	base := fmt.Sprintf("http://127.0.0.1:%d", readOnlyPort)
	if err := waitHealthy(ctx, base+"/healthz", cmd, time.Minute); err != nil {
		return res, fmt.Errorf("%w (log %s)", err, logf.Name())
	}
	// Idle: let the agent finish starting up (the kubelet's cadvisor, the
	// first relists) before the figures start.
	time.Sleep(5 * time.Second)
	res.RSSIdle = Figure{rssMB(pid), load()}

	cpu0, rcpu0, busy0 := cpuSeconds(pid), runtimeCPU(cfg.Base), machineCPU()
	ccpu0 := cpuSeconds(containerdPID)
	t0 := time.Now()
	for i := range n {
		name := fmt.Sprintf("bench-%03d.yaml", i)
		if err := os.Rename(filepath.Join(staging, name), filepath.Join(manifests, name)); err != nil {
			return res, err
		}
	}
	var times []float64
	seen := map[string]bool{}
	lastLimit := time.Time{}
	for len(seen) < n {
		if time.Since(lastLimit) >= time.Second {
			lastLimit = time.Now()
			if v, ok := gauge(base+"/metrics", "wasmlet_pod_start_limit"); ok {
				res.Limits = append(res.Limits, v)
			}
		}
		if time.Since(t0) > cfg.Timeout {
			return res, fmt.Errorf("only %d of %d pods running after %v (log %s)", len(seen), n, cfg.Timeout, logf.Name())
		}
		time.Sleep(100 * time.Millisecond)
		running, err := runningPods(ctx, c)
		if err != nil {
			return res, err
		}
		now := time.Since(t0).Seconds()
		for p := range running {
			if !seen[p] {
				seen[p] = true
				times = append(times, now)
				if len(times) == 1 {
					res.First = Figure{now, load()}
				}
				if len(times) == (n+1)/2 {
					res.Median = Figure{now, load()}
				}
			}
		}
	}
	res.All = Figure{times[len(times)-1], load()}
	res.CPUStart = Figure{cpuSeconds(pid) - cpu0, load()}
	res.RuntimeCPUStart = Figure{runtimeCPU(cfg.Base) - rcpu0, load()}
	res.ContainerdCPUStart = Figure{cpuSeconds(containerdPID) - ccpu0, load()}
	res.BusyStart = Figure{busy0.busyShare(), load()}
	res.RSSRun = Figure{rssMB(pid), load()}
	res.CRI = criCalls(base + "/metrics")
	if cfg.Probes {
		if err := steady(ctx, cfg, &res, base, pid, t0, n); err != nil {
			return res, fmt.Errorf("%w (log %s)", err, logf.Name())
		}
	}

	cpu1 := cpuSeconds(pid)
	cri1 := criCalls(base + "/metrics")
	rcpu1, busy1 := runtimeCPU(cfg.Base), machineCPU()
	t1 := time.Now()
	nextCount := t1
	for i := range n {
		if err := os.Remove(filepath.Join(manifests, fmt.Sprintf("bench-%03d.yaml", i))); err != nil {
			return res, err
		}
	}
	stopped, gone := false, false
	for !stopped || !gone {
		if time.Since(t1) > cfg.Timeout {
			return res, fmt.Errorf("pods not stopped (%v) or not gone from /pods (%v) after %v (log %s)", stopped, gone, cfg.Timeout, logf.Name())
		}
		time.Sleep(100 * time.Millisecond)
		now := time.Since(t1).Seconds()
		if !stopped {
			running, err := runningPods(ctx, c)
			if err != nil {
				return res, err
			}
			if time.Now().After(nextCount) {
				res.StillRunning = append(res.StillRunning, len(running))
				nextCount = nextCount.Add(time.Second)
			}
			if len(running) == 0 {
				stopped = true
				res.Stopped = Figure{now, load()}
				res.RuntimeCPUStop = Figure{runtimeCPU(cfg.Base) - rcpu1, load()}
				res.BusyStop = Figure{busy1.busyShare(), load()}
			}
		}
		if !gone {
			if st, err := listedPods(base + "/pods"); err == nil && st.Listed == 0 {
				gone = true
				res.Gone = Figure{now, load()}
			}
		}
	}
	res.CPUStop = Figure{cpuSeconds(pid) - cpu1, load()}
	res.CRIStop = since(criCalls(base+"/metrics"), cri1)
	return res, nil
}

// steady waits until the agent's /pods shows all n pods Ready, then
// measures the agent's and the runtime's CPU over cfg.Window.
func steady(ctx context.Context, cfg Config, res *Result, base string, pid int, t0 time.Time, n int) error {
	for {
		st, err := listedPods(base + "/pods")
		if err == nil && st.Ready == n {
			break
		}
		if time.Since(t0) > cfg.Timeout {
			return fmt.Errorf("pods not all Ready after %v: %+v, %v", cfg.Timeout, st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	res.Ready = Figure{time.Since(t0).Seconds(), load()}
	before, err := listedPods(base + "/pods")
	if err != nil {
		return err
	}
	cpu, rcpu := cpuSeconds(pid), runtimeCPU(cfg.Base)
	time.Sleep(cfg.Window)
	res.CPUSteady = Figure{cpuSeconds(pid) - cpu, load()}
	res.RuntimeCPUSteady = Figure{runtimeCPU(cfg.Base) - rcpu, load()}
	res.RSSSteady = Figure{rssMB(pid), load()}
	after, err := listedPods(base + "/pods")
	if err != nil {
		return err
	}
	res.Restarts = Figure{float64(after.Restarts - before.Restarts), load()}
	return nil
}

// probePort is pod i's HTTP port on the host's loopback (host network).
func probePort(i int) int { return 20000 + i }

func manifest(i int, image string, probes bool) string {
	head := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: bench-%03d
  namespace: %s
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
  - name: sleep
    image: %s
    imagePullPolicy: IfNotPresent
`, i, namespace, image)
	if !probes {
		return head + `    command: ["sleep", "3600"]
`
	}
	// busybox httpd in the foreground serving one file; readiness over
	// HTTP costs the agent (its own GET), liveness by exec costs the
	// runtime (an ExecSync: runc exec in the container) more than the
	// agent, so the window shows both kinds.
	return head + fmt.Sprintf(`    command: ["sh", "-c", "mkdir -p /tmp/www && echo ok >/tmp/www/index.html && exec httpd -f -p 127.0.0.1:%[1]d -h /tmp/www"]
    readinessProbe:
      httpGet: {host: 127.0.0.1, port: %[1]d, path: /index.html}
      periodSeconds: 10
      timeoutSeconds: 5
    livenessProbe:
      exec: {command: ["/bin/true"]}
      periodSeconds: 10
      timeoutSeconds: 5
`, probePort(i))
}

// agentCmd is the command of one agent, standalone, on the static pod
// directory manifests.
func agentCmd(cfg Config, agent, dir, manifests string) (*exec.Cmd, error) {
	if agent == "wasmlet" || agent == "wasmlet-hooks" {
		args := []string{"run", "--node-name", "bench-node", "--container-runtime-endpoint", cfg.Endpoint,
			"--root-dir", filepath.Join(dir, "root"), "--pod-logs-dir", filepath.Join(dir, "logs"),
			"--pod-manifest-path", manifests, "--address", "127.0.0.1", "--read-only-port", strconv.Itoa(readOnlyPort),
			"--port", "0"}
		if agent == "wasmlet-hooks" {
			args = append(args, "--plugin-dir", cfg.HookPlugins)
		}
		args = append(args, strings.Fields(cfg.WasmletArgs)...)
		return exec.Command(cfg.Wasmlet, args...), nil
	}
	conf, err := kubeletconfig.Render(map[string]string{
		"containerRuntimeEndpoint": cfg.Endpoint, "staticPodPath": manifests, "podLogsDir": filepath.Join(dir, "logs"),
		"anonymousEnabled": "true", "webhookEnabled": "false", "authorizationMode": "AlwaysAllow",
		"address": "127.0.0.1", "port": strconv.Itoa(kubeletPort), "readOnlyPort": strconv.Itoa(readOnlyPort), "healthzPort": strconv.Itoa(healthzPort),
	})
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "kubelet.yaml")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	return exec.Command(cfg.Kubelet, "--config", path, "--hostname-override", "bench-node",
		"--root-dir", filepath.Join(dir, "root"), "--cert-dir", filepath.Join(dir, "root", "pki")), nil
}

func waitHealthy(ctx context.Context, url string, cmd *exec.Cmd, limit time.Duration) error {
	end := time.Now().Add(limit)
	for time.Now().Before(end) {
		if r, err := http.Get(url); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return nil
			}
		}
		if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
			return fmt.Errorf("agent exited")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not healthy after %v", url, limit)
}

// runningPods are the benchmark pods with a running container.
func runningPods(ctx context.Context, c *cri.Client) (map[string]bool, error) {
	ctrs, err := c.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{"io.kubernetes.pod.namespace": namespace},
	})
	if err != nil {
		return nil, fmt.Errorf("ListContainers: %w", err)
	}
	out := map[string]bool{}
	for _, ct := range ctrs {
		out[ct.Labels["io.kubernetes.pod.name"]] = true
	}
	return out, nil
}

// podsStatus is what the agent's /pods says of the benchmark pods.
type podsStatus struct {
	Listed, Ready int // pods listed, pods with the Ready condition True
	Restarts      int // restart counts of their containers, summed
}

// listedPods reads the agent's /pods (both agents serve the benchmark's
// static pods there with their status).
func listedPods(url string) (podsStatus, error) {
	var st podsStatus
	r, err := http.Get(url)
	if err != nil {
		return st, err
	}
	defer r.Body.Close()
	var list struct {
		Items []struct {
			Metadata struct {
				Namespace string `json:"namespace"`
			} `json:"metadata"`
			Status struct {
				Conditions []struct {
					Type   string `json:"type"`
					Status string `json:"status"`
				} `json:"conditions"`
				ContainerStatuses []struct {
					RestartCount int `json:"restartCount"`
				} `json:"containerStatuses"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.NewDecoder(r.Body).Decode(&list); err != nil {
		return st, err
	}
	for _, p := range list.Items {
		if p.Metadata.Namespace != namespace {
			continue
		}
		st.Listed++
		for _, c := range p.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				st.Ready++
			}
		}
		for _, c := range p.Status.ContainerStatuses {
			st.Restarts += c.RestartCount
		}
	}
	return st, nil
}

// gauge reads an unlabelled metric from the agent's /metrics.
func gauge(url, name string) (float64, bool) {
	r, err := http.Get(url)
	if err != nil {
		return 0, false
	}
	defer r.Body.Close()
	body, _ := io.ReadAll(r.Body)
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// criMetric matches the sum and count series of the agents' CRI call
// histograms: wasmlet's wasmlet_cri_call_duration_seconds{method=…} and
// the kubelet's kubelet_runtime_operations_duration_seconds{operation_type=…}.
var criMetric = regexp.MustCompile(`^(?:wasmlet_cri_call_duration_seconds|kubelet_runtime_operations_duration_seconds)_(sum|count)\{(?:method|operation_type)="([^"]+)"\} ([0-9.e+-]+)$`)

// criCalls reads the agent's CRI call histogram from its /metrics.
// since is the calls of now that were not yet in before (both cumulative,
// as criCalls reads them), the costliest first.
func since(now, before []CRICall) []CRICall {
	prev := map[string]CRICall{}
	for _, c := range before {
		prev[c.Method] = c
	}
	var out []CRICall
	for _, c := range now {
		p := prev[c.Method]
		if d := (CRICall{Method: c.Method, Count: c.Count - p.Count, Sum: c.Sum - p.Sum}); d.Count > 0 {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Sum > out[j].Sum })
	return out
}

func criCalls(url string) []CRICall {
	r, err := http.Get(url)
	if err != nil {
		return nil
	}
	defer r.Body.Close()
	body, _ := io.ReadAll(r.Body)
	by := map[string]*CRICall{}
	for _, l := range strings.Split(string(body), "\n") {
		m := criMetric.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		v, _ := strconv.ParseFloat(m[3], 64)
		c := by[m[2]]
		if c == nil {
			c = &CRICall{Method: m[2]}
			by[m[2]] = c
		}
		if m[1] == "sum" {
			c.Sum = v
		} else {
			c.Count = v
		}
	}
	var out []CRICall
	for _, c := range by {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Sum > out[j].Sum })
	return out
}

// load is the 1-minute load average.
func load() float64 { return procfs.LoadAverage() }

// cpuSeconds is the process's user plus system time (clock ticks of 100 Hz).
func cpuSeconds(pid int) float64 { return cpuTicks(pid, false) }

// cpuTicks is the process's user plus system seconds, with its reaped
// children's when children is set; 0 when it cannot be read.
func cpuTicks(pid int, children bool) float64 {
	u, err := procfs.Read(pid)
	if err != nil {
		return 0
	}
	if children {
		return u.CPU + u.ChildrenCPU
	}
	return u.CPU
}

// cpuTimes are the machine's CPU ticks since boot, all cores: busy (not
// idle, not waiting for I/O) and total.
type cpuTimes struct{ busy, total float64 }

// busyShare is the share of the machine's CPU time busy from t until now
// (0 when no tick passed).
func (t cpuTimes) busyShare() float64 {
	now := machineCPU()
	if now.total <= t.total {
		return 0
	}
	return (now.busy - t.busy) / (now.total - t.total)
}

// machineCPU reads the machine's CPU ticks from /proc/stat's cpu line.
func machineCPU() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var t cpuTimes
	for i, s := range f[1:] {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || i >= 8 { // guest times are already in user and nice
			continue
		}
		t.total += v
		if i != 3 && i != 4 { // idle, iowait
			t.busy += v
		}
	}
	return t
}

// runtimeAcct, once accountRuntime succeeded, is the file of the cgroup
// holding the private containerd that gives the CPU time of everything it
// and its descendants ran (shims, runc, exec probes until runc moves them
// into the pod's cgroup), exited processes included: "usage" (v1 cpuacct,
// ns) or "cpu.stat" (v2, usage_usec).
var runtimeAcct string

// containerdPID is the private containerd's process ID (from base/ctrd/env).
var containerdPID int

// accountRuntime moves the private containerd (its PID in base/ctrd/env)
// into a cgroup of its own before any pod runs, so its shims and their runc
// children are accounted there too, those that exit while stopping
// included. It returns the cgroup's directory.
func accountRuntime(base string) (string, error) {
	env, err := os.ReadFile(filepath.Join(base, "ctrd", "env"))
	if err != nil {
		return "", err
	}
	var pid string
	for _, l := range strings.Split(string(env), "\n") {
		if v, ok := strings.CutPrefix(l, "PID="); ok {
			pid = v
		}
	}
	if pid == "" {
		return "", fmt.Errorf("no PID in %s", filepath.Join(base, "ctrd", "env"))
	}
	containerdPID, _ = strconv.Atoi(pid)
	name := "wasmlet-bench-" + filepath.Base(base)
	dir, file := filepath.Join("/sys/fs/cgroup", name), "cpu.stat"
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
		dir, file = filepath.Join("/sys/fs/cgroup/cpuacct", name), "cpuacct.usage"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(pid), 0o644); err != nil {
		return "", err
	}
	runtimeAcct = filepath.Join(dir, file)
	return dir, nil
}

// runtimeCPU is the CPU seconds of the private containerd and everything
// it started (see runtimeAcct). Without that cgroup it falls back to the
// processes whose command line names the state directory base (containerd
// and its live shims, with their reaped children: runc), which misses the
// shims that exited.
func runtimeCPU(base string) float64 {
	if runtimeAcct != "" {
		b, err := os.ReadFile(runtimeAcct)
		if err != nil {
			return 0
		}
		if strings.HasSuffix(runtimeAcct, "cpuacct.usage") {
			ns, _ := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
			return ns / 1e9
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "usage_usec "); ok {
				us, _ := strconv.ParseFloat(v, 64)
				return us / 1e6
			}
		}
		return 0
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	total := 0.0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.Contains(string(cmdline), base) {
			continue
		}
		name := string(cmdline)
		if i := strings.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if b := filepath.Base(name); b != "containerd" && !strings.HasPrefix(b, "containerd-shim") {
			continue
		}
		total += cpuTicks(pid, true)
	}
	return total
}

// keepLog copies an agent's log to dst; a failure is reported, not fatal.
func keepLog(src, dst string) {
	b, err := os.ReadFile(src)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(dst), 0o755)
	}
	if err == nil {
		err = os.WriteFile(dst, b, 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchnode: keep log: %v\n", err)
	}
}

// rssMB is the process's resident memory in MiB, 0 when it cannot be read.
func rssMB(pid int) float64 {
	u, err := procfs.Read(pid)
	if err != nil {
		return 0
	}
	return float64(u.RSS) / (1 << 20)
}
