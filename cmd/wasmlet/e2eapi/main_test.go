//go:build e2e_apiserver

package e2eapi

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

var (
	runtimeFlag  = flag.String("runtime", "embedded", "runtime under test: embedded or containerd")
	endpointFlag = flag.String("endpoint", "", "CRI endpoint of the runtime under test (unix://…)")
	wasmletFlag  = flag.String("wasmlet", "../../../bin/wasmlet", "the wasmlet binary")
	imageFlag    = flag.String("image", "wasmlet.local/testbox:1.0", "the testbox image reference")
	clusterFlag  = flag.String("cluster", "", "the directory of hack/apiserver/cluster.sh up")
	hackFlag     = flag.String("hack", "../../../hack", "the repository's hack directory")
	baseFlag     = flag.String("base", "", "a short directory for agent state")
	nodeFlag     = flag.String("node", "wasmlet-e2e", "the node's name (cluster.sh node made its kubeconfig)")
	benchFlag    = flag.Int("bench-pods", 30, "pods in the start-up figure")
)

var admin kubernetes.Interface

func TestMain(m *testing.M) {
	flag.Parse()
	if *clusterFlag == "" || *endpointFlag == "" {
		fmt.Fprintln(os.Stderr, "e2eapi: -cluster and -endpoint are required (run hack/e2e-apiserver.sh)")
		os.Exit(2)
	}
	if *baseFlag == "" {
		d, err := os.MkdirTemp("", "e2eapi")
		if err != nil {
			panic(err)
		}
		*baseFlag = d
	}
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(*clusterFlag, "admin.kubeconfig"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2eapi:", err)
		os.Exit(2)
	}
	rc.QPS, rc.Burst = 200, 400
	admin = kubernetes.NewForConfigOrDie(rc)
	os.Exit(m.Run())
}

// agent is one `wasmlet run` joined to the cluster with the node's
// certificate.
type agent struct {
	dir, manifests, root, logs, logFile string
	port                                int

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

func newAgent(t testing.TB) *agent {
	dir := filepath.Join(*baseFlag, "agent")
	a := &agent{dir: dir, manifests: filepath.Join(dir, "manifests"), root: filepath.Join(dir, "root"),
		logs: filepath.Join(dir, "logs"), logFile: filepath.Join(dir, "agent.log"), port: freePort(t)}
	for _, d := range []string{a.manifests, a.root, a.logs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (a *agent) start(t testing.TB) {
	t.Helper()
	args := []string{"run", "--node-name", *nodeFlag,
		"--kubeconfig", filepath.Join(*clusterFlag, "node-"+*nodeFlag+".kubeconfig"),
		"--container-runtime-endpoint", *endpointFlag,
		"--pod-manifest-path", a.manifests, "--root-dir", a.root, "--pod-logs-dir", a.logs,
		"--address", "127.0.0.1", "--read-only-port", strconv.Itoa(a.port), "--log-level", "debug"}
	out, err := os.OpenFile(a.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(out, "==== e2eapi: %s %s\n", *wasmletFlag, strings.Join(args, " "))
	cmd := exec.Command(*wasmletFlag, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("wasmlet: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); out.Close(); close(exited) }()
	a.mu.Lock()
	a.cmd, a.exited = cmd, exited
	a.mu.Unlock()
	eventually(t, 60*time.Second, "wasmlet /healthz answers 200", func() (bool, string) {
		select {
		case <-exited:
			t.Fatalf("wasmlet exited during start-up: %s\n%s", cmd.ProcessState, a.logTail(40))
		default:
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", a.port))
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	})
}

// stop sends SIGTERM and waits for the agent to exit.
func (a *agent) stop(t testing.TB) {
	a.mu.Lock()
	cmd, exited := a.cmd, a.exited
	a.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-exited
		t.Errorf("wasmlet did not exit within 30 s of SIGTERM")
	}
	a.mu.Lock()
	a.cmd = nil
	a.mu.Unlock()
}

func (a *agent) logTail(n int) string {
	b, _ := os.ReadFile(a.logFile)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// localPods is the agent's own /pods.
func (a *agent) localPods(t testing.TB) []v1.Pod {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/pods", a.port))
	if err != nil {
		t.Fatalf("/pods: %v", err)
	}
	defer resp.Body.Close()
	var l v1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		t.Fatalf("/pods: %v", err)
	}
	return l.Items
}

// metric sums the samples of a counter in /metrics whose line contains all
// of match.
func (a *agent) metric(t testing.TB, name string, match ...string) float64 {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", a.port))
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
line:
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, name) {
			continue
		}
		for _, m := range match {
			if !strings.Contains(l, m) {
				continue line
			}
		}
		f := strings.Fields(l)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		sum += v
	}
	return sum
}

func (a *agent) writeStatic(t testing.TB, file string, p *v1.Pod) {
	b, err := yaml.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(a.dir, "."+file)
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(a.manifests, file)); err != nil {
		t.Fatal(err)
	}
}

func cluster(t testing.TB, cmd string) {
	t.Helper()
	out, err := exec.Command(filepath.Join(*hackFlag, "apiserver", "cluster.sh"), cmd, *clusterFlag).CombinedOutput()
	if err != nil {
		t.Fatalf("cluster.sh %s: %v\n%s", cmd, err, out)
	}
}

// newPod is a testbox pod bound to the node.
func newPod(name string, args ...string) *v1.Pod {
	return &v1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
		Spec: v1.PodSpec{
			NodeName:                      *nodeFlag,
			RestartPolicy:                 v1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To(int64(3)),
			AutomountServiceAccountToken:  ptr.To(false),
			Tolerations:                   []v1.Toleration{{Operator: v1.TolerationOpExists}},
			Containers: []v1.Container{{
				Name: "main", Image: *imageFlag, ImagePullPolicy: v1.PullNever, Args: args,
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m")}},
			}},
		},
	}
}

func ctxT(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

func eventually(t testing.TB, timeout time.Duration, what string, f func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, s := f()
		if ok {
			return
		}
		last = s
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last: %s", timeout, what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func condition(p *v1.Pod, c v1.PodConditionType) v1.ConditionStatus {
	for _, x := range p.Status.Conditions {
		if x.Type == c {
			return x.Status
		}
	}
	return ""
}

func running(p *v1.Pod) bool {
	if p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running == nil {
			return false
		}
	}
	return true
}

// waitPod polls the API server (as the admin) until cond holds.
func waitPod(t testing.TB, ns, name string, timeout time.Duration, what string, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var got *v1.Pod
	eventually(t, timeout, fmt.Sprintf("pod %s/%s %s", ns, name, what), func() (bool, string) {
		ctx, cancel := ctxT(5 * time.Second)
		defer cancel()
		p, err := admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got = p
		return cond(p), summary(p)
	})
	return got
}

func waitGone(t testing.TB, ns, name string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("pod %s/%s gone", ns, name), func() (bool, string) {
		ctx, cancel := ctxT(5 * time.Second)
		defer cancel()
		p, err := admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return strings.Contains(err.Error(), "not found"), err.Error()
		}
		return false, summary(p)
	})
}

func summary(p *v1.Pod) string {
	var cs []string
	for _, c := range p.Status.ContainerStatuses {
		st := "waiting"
		switch {
		case c.State.Running != nil:
			st = "running"
		case c.State.Terminated != nil:
			st = fmt.Sprintf("terminated(%d)", c.State.Terminated.ExitCode)
		case c.State.Waiting != nil:
			st = "waiting(" + c.State.Waiting.Reason + ")"
		}
		cs = append(cs, fmt.Sprintf("%s=%s restarts=%d", c.Name, st, c.RestartCount))
	}
	return fmt.Sprintf("%s uid=%s phase=%s reason=%q deleting=%v ip=%s [%s]", p.Name, p.UID, p.Status.Phase, p.Status.Reason, p.DeletionTimestamp != nil, p.Status.PodIP, strings.Join(cs, " "))
}
