//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/cri"
)

var (
	runtimeFlag    = flag.String("runtime", "containerd", "runtime under test: containerd or embedded")
	endpointFlag   = flag.String("endpoint", "", "CRI endpoint of the runtime under test (unix://…)")
	wasmletFlag    = flag.String("wasmlet", "../../../bin/wasmlet", "the wasmlet binary")
	imageFlag      = flag.String("image", "wasmlet.local/testbox:1.0", "the testbox image reference")
	wasmFlag       = flag.String("wasm", "", "testbox.wasm, for the in-process embedded runtime (referenced by path)")
	busyboxFlag    = flag.String("busybox", "", "a busybox image reference (containerd only; empty skips the shell container)")
	baseFlag       = flag.String("base", "", "a short directory for agent state (unix socket paths < 108 bytes); empty means a temp dir")
	hackFlag       = flag.String("hack", "../../../hack", "the repository's hack directory (hack/containerd/up.sh)")
	ctrdBaseFlag   = flag.String("containerd-base", "", "BASE given to hack/containerd/up.sh; enables the containerd restart case")
	benchPodsFlag  = flag.Int("bench-pods", 30, "pods in the start-up figure")
	agentFlagsFlag = flag.String("agent-flags", "", "extra flags for every `wasmlet run`, space separated")
	agentEnvFlag   = flag.String("agent-env", "", "extra environment (NAME=value, space separated) for every `wasmlet run`, e.g. GOGC=50")
)

// nodeName is every agent's node name: static pods are named <pod>-<nodeName>.
const nodeName = "e2e"

// pollEvery is the period of every wait in the suite.
const pollEvery = 100 * time.Millisecond

// rt is the bare CRI client of the runtime under test.
var rt *cri.Client

func TestMain(m *testing.M) {
	flag.Parse()
	// The CRI client logs every failed call through klog; the suite reports
	// what matters itself (diagnose), so keep the output readable.
	klog.SetLogger(logr.Discard())
	if *endpointFlag == "" {
		fmt.Fprintln(os.Stderr, "e2e: -endpoint is required (run hack/e2e.sh)")
		os.Exit(2)
	}
	if *baseFlag == "" {
		d, err := os.MkdirTemp("", "wle")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		*baseFlag = d
	}
	bin, err := filepath.Abs(*wasmletFlag)
	if err == nil {
		*wasmletFlag = bin
		_, err = os.Stat(bin)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: wasmlet binary: %v\n", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	rt, err = cri.Connect(ctx, *endpointFlag)
	if err == nil {
		err = rt.WaitReady(ctx)
	}
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: runtime %s: %v\n", *endpointFlag, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// agent is one `wasmlet run` process with its own manifest directory, root
// directory, pod logs directory and read-only port. It can be killed and
// started again on the same directories.
type agent struct {
	name      string
	dir       string
	manifests string
	root      string
	logs      string
	logFile   string
	port      int
	endpoint  string // empty: the embedded runtime in-process

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	cached  *v1.PodList
	cacheAt time.Time
}

// newAgent prepares directories for an agent named name; endpoint is the CRI
// endpoint it is given (empty: none, the embedded runtime in-process).
func newAgent(t testing.TB, name, endpoint string) *agent {
	t.Helper()
	dir := filepath.Join(*baseFlag, name)
	a := &agent{
		name: name, dir: dir, endpoint: endpoint,
		manifests: filepath.Join(dir, "manifests"),
		root:      filepath.Join(dir, "root"),
		logs:      filepath.Join(dir, "logs"),
		logFile:   filepath.Join(dir, "agent.log"),
		port:      freePort(t),
	}
	for _, d := range []string{a.manifests, a.root, a.logs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// start runs `wasmlet run` and waits until /healthz answers 200.
func (a *agent) start(t testing.TB) {
	t.Helper()
	args := []string{"run",
		"--node-name", nodeName,
		"--pod-manifest-path", a.manifests,
		"--root-dir", a.root,
		"--pod-logs-dir", a.logs,
		"--address", "127.0.0.1",
		"--read-only-port", strconv.Itoa(a.port),
	}
	if a.endpoint != "" {
		args = append(args, "--container-runtime-endpoint", a.endpoint)
	}
	args = append(args, strings.Fields(*agentFlagsFlag)...)
	out, err := os.OpenFile(a.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(out, "==== e2e: %s %s\n", *wasmletFlag, strings.Join(args, " "))
	cmd := exec.Command(*wasmletFlag, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), strings.Fields(*agentEnvFlag)...)
	// The agent dies with the suite, whatever kills it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		t.Fatalf("agent %s: %v", a.name, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		out.Close()
		close(exited)
	}()
	a.mu.Lock()
	a.cmd, a.exited, a.cached = cmd, exited, nil
	a.mu.Unlock()
	eventually(t, 60*time.Second, fmt.Sprintf("agent %s: /healthz answers 200", a.name), func() (bool, string) {
		select {
		case <-exited:
			t.Fatalf("agent %s exited during start-up: %s\n%s", a.name, cmd.ProcessState, a.logTail(40))
		default:
		}
		code, body, err := a.get("/healthz")
		if err != nil {
			return false, err.Error()
		}
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
	})
}

// pid is the running agent's process ID.
func (a *agent) pid() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cmd.Process.Pid
}

// kill ends the agent with SIGKILL (a crash) and waits for it.
func (a *agent) kill(t testing.TB) { a.signal(t, syscall.SIGKILL, 10*time.Second) }

// stop ends the agent with SIGTERM (a clean shutdown) and waits for it.
func (a *agent) stop(t testing.TB) { a.signal(t, syscall.SIGTERM, 30*time.Second) }

func (a *agent) signal(t testing.TB, sig syscall.Signal, wait time.Duration) {
	t.Helper()
	a.mu.Lock()
	cmd, exited := a.cmd, a.exited
	a.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-exited:
		return
	default:
	}
	cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(wait):
		cmd.Process.Kill()
		<-exited
		t.Errorf("agent %s did not exit within %v of %v", a.name, wait, sig)
	}
}

// running reports whether the agent process is alive.
func (a *agent) running() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.exited == nil {
		return false
	}
	select {
	case <-a.exited:
		return false
	default:
		return true
	}
}

func (a *agent) get(path string) (int, []byte, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d%s", a.port, path))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// metric returns the sum over all label sets of a metric in /metrics
// (Prometheus text format).
func (a *agent) metric(name string) (float64, error) { return a.metricWhere(name, "") }

// metricWhere is metric summed only over the label sets containing match,
// e.g. `result="reject"`.
func (a *agent) metricWhere(name, match string) (float64, error) {
	code, b, err := a.get("/metrics")
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("/metrics: %d", code)
	}
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(?:\{[^}]*\})? (\S+)$`)
	ms := re.FindAllSubmatch(b, -1)
	if ms == nil {
		return 0, fmt.Errorf("/metrics has no %s", name)
	}
	sum := 0.0
	for _, m := range ms {
		if !bytes.Contains(m[0], []byte(match)) {
			continue
		}
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			return 0, fmt.Errorf("/metrics %s: %w", name, err)
		}
		sum += v
	}
	return sum, nil
}

// pods returns /pods, fetched at most once per poll period (many waits
// share one agent).
func (a *agent) pods() (*v1.PodList, error) {
	a.mu.Lock()
	if a.cached != nil && time.Since(a.cacheAt) < pollEvery {
		l := a.cached
		a.mu.Unlock()
		return l, nil
	}
	a.mu.Unlock()
	code, b, err := a.get("/pods")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("/pods: %d %s", code, b)
	}
	var l v1.PodList
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("/pods: %w", err)
	}
	a.mu.Lock()
	a.cached, a.cacheAt = &l, time.Now()
	a.mu.Unlock()
	return &l, nil
}

// pod returns the static pod made from a manifest whose metadata.name is
// name (it is named <name>-<node>), or nil when /pods does not list it.
func (a *agent) pod(name string) (*v1.Pod, error) {
	l, err := a.pods()
	if err != nil {
		return nil, err
	}
	for i := range l.Items {
		if l.Items[i].Name == staticName(name) {
			return &l.Items[i], nil
		}
	}
	return nil, nil
}

// staticName is the name of the static pod from a manifest named name.
func staticName(name string) string { return name + "-" + nodeName }

// write puts p into the manifest directory as file (YAML), atomically.
func (a *agent) write(t testing.TB, file string, p *v1.Pod) {
	t.Helper()
	b, err := yaml.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	a.writeRaw(t, file, b)
}

func (a *agent) writeRaw(t testing.TB, file string, b []byte) {
	t.Helper()
	// Written outside the directory and renamed in, so the agent never
	// reads half a file.
	tmp := filepath.Join(a.dir, "."+file+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(a.manifests, file)); err != nil {
		t.Fatal(err)
	}
}

// remove deletes a manifest.
func (a *agent) remove(t testing.TB, file string) {
	t.Helper()
	if err := os.Remove(filepath.Join(a.manifests, file)); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}

// logTail returns the last n lines of the agent's log.
func (a *agent) logTail(n int) string {
	b, _ := os.ReadFile(a.logFile)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logContains reports whether the agent's log holds s.
func (a *agent) logContains(s string) bool {
	b, _ := os.ReadFile(a.logFile)
	return bytes.Contains(b, []byte(s))
}

// containerLog returns the log file of a pod's container at a restart count
// in the kubelet's layout.
func (a *agent) containerLog(p *v1.Pod, container string, restarts int32) string {
	return filepath.Join(a.logs, fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID), container, fmt.Sprintf("%d.log", restarts))
}

// diagnose registers a cleanup that, when t failed, logs the agent's log
// tail, its /pods summary and the runtime's sandboxes and containers.
func (a *agent) diagnose(t *testing.T) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		var b strings.Builder
		fmt.Fprintf(&b, "--- agent %s log (%s), last lines:\n%s\n", a.name, a.logFile, a.logTail(60))
		if l, err := a.pods(); err != nil {
			fmt.Fprintf(&b, "--- /pods: %v\n", err)
		} else {
			fmt.Fprintf(&b, "--- /pods:\n")
			for i := range l.Items {
				fmt.Fprintf(&b, "%s\n", podSummary(&l.Items[i]))
			}
		}
		fmt.Fprintf(&b, "--- runtime %s:\n", *endpointFlag)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rt.Dump(ctx, &b)
		cancel()
		t.Log(b.String())
	})
}

// podSummary is one line per pod for messages: phase, and per container
// its state, restart count and ID.
func podSummary(p *v1.Pod) string {
	if p == nil {
		return "<absent>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s phase=%s", p.Name, p.Status.Phase)
	if p.Status.Reason != "" {
		fmt.Fprintf(&b, " reason=%s", p.Status.Reason)
	}
	for _, set := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range set {
			fmt.Fprintf(&b, " [%s %s restarts=%d id=%.24s]", cs.Name, stateString(cs.State), cs.RestartCount, cs.ContainerID)
		}
	}
	return b.String()
}

func stateString(s v1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Terminated != nil:
		return fmt.Sprintf("terminated(%d,%s)", s.Terminated.ExitCode, s.Terminated.Reason)
	case s.Waiting != nil:
		return "waiting(" + s.Waiting.Reason + ")"
	}
	return "unknown"
}

// eventually polls f every pollEvery until it returns true, failing t with
// what and f's last detail after timeout.
func eventually(t testing.TB, timeout time.Duration, what string, f func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := f()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last: %s", timeout, what, detail)
		}
		time.Sleep(pollEvery)
	}
}

// holds polls f every pollEvery for d and fails t the first time it
// returns false: an invariant observed over a window.
func holds(t testing.TB, d time.Duration, what string, f func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if ok, detail := f(); !ok {
			t.Fatalf("%s no longer holds: %s", what, detail)
		}
		time.Sleep(pollEvery)
	}
}

// waitPod waits until the static pod named name satisfies cond and returns it.
func (a *agent) waitPod(t testing.TB, name string, timeout time.Duration, what string, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var got *v1.Pod
	eventually(t, timeout, fmt.Sprintf("pod %s: %s", staticName(name), what), func() (bool, string) {
		p, err := a.pod(name)
		if err != nil {
			return false, err.Error()
		}
		got = p
		return p != nil && cond(p), podSummary(p)
	})
	return got
}

// waitRunning waits until the pod is Running with every container running
// and ready.
func (a *agent) waitRunning(t testing.TB, name string, timeout time.Duration) *v1.Pod {
	t.Helper()
	return a.waitPod(t, name, timeout, "Running, all containers running", allRunning)
}

func allRunning(p *v1.Pod) bool {
	if p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil || cs.ContainerID == "" {
			return false
		}
	}
	return true
}

// waitGone waits until /pods no longer lists the pod.
func (a *agent) waitGone(t testing.TB, name string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("pod %s gone from /pods", staticName(name)), func() (bool, string) {
		p, err := a.pod(name)
		if err != nil {
			return false, err.Error()
		}
		return p == nil, podSummary(p)
	})
}

// readFileEventually waits until file exists and contains want, returning
// its content.
func readFileEventually(t testing.TB, file, want string, timeout time.Duration) string {
	t.Helper()
	var content string
	eventually(t, timeout, fmt.Sprintf("%q in %s", want, file), func() (bool, string) {
		b, err := os.ReadFile(file)
		if err != nil {
			return false, err.Error()
		}
		content = string(b)
		return strings.Contains(content, want), tail(content, 400)
	})
	return content
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// runtimeID strips the "<runtime>://" prefix of a status container ID.
func runtimeID(id string) string {
	if i := strings.Index(id, "://"); i >= 0 {
		return id[i+3:]
	}
	return id
}

// withTimeout returns a context for one CRI call.
func withTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
