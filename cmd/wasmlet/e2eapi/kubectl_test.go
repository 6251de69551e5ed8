//go:build e2e_apiserver

package e2eapi

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

var (
	kubectlFlag = flag.String("kubectl", "", "a kubectl binary (hack/kube/build.sh kubectl); empty skips the kubectl cases")
	busyboxFlag = flag.String("busybox", "wasmlet.local/busybox:1.0", "the busybox image reference (containerd)")
)

// kubectlResult is what one kubectl run left.
type kubectlResult struct {
	stdout, stderr string
	code           int
}

// kubectl runs kubectl as the cluster's admin with stdin (may be empty) and
// waits at most timeout; a run killed by the timeout fails the test.
func kubectl(t *testing.T, timeout time.Duration, stdin string, args ...string) kubectlResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, *kubectlFlag, append([]string{"--kubeconfig", filepath.Join(*clusterFlag, "admin.kubeconfig"), "-n", "default"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("kubectl %s: no answer within %s (stdout %q, stderr %q)", strings.Join(args, " "), timeout, harness.Tail(stdout.String(), 5), stderr.String())
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return kubectlResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// kubectlStream starts a long-running kubectl (logs -f, port-forward,
// attach) and returns its stdout lines, a writer to its stdin, and a stop
// function the test's cleanup also calls.
func kubectlStream(t *testing.T, args ...string) (lines <-chan string, stdin io.WriteCloser, stop func() string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, *kubectlFlag, append([]string{"--kubeconfig", filepath.Join(*clusterFlag, "admin.kubeconfig"), "-n", "default"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := make(chan string, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	stopped := false
	stop = func() string {
		if !stopped {
			stopped = true
			cancel()
			<-done
			cmd.Wait()
		}
		return stderr.String()
	}
	t.Cleanup(func() { stop() })
	return ch, in, stop
}

// nextLine waits for the next line of a kubectlStream.
func nextLine(t *testing.T, lines <-chan string, what string) string {
	t.Helper()
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatalf("%s: kubectl ended", what)
		}
		return l
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: no line within 60 s", what)
	}
	return ""
}

// The pod of the kubectl cases on containerd: a ticking shell, a web
// server, a stdin reader to attach to, and a container that exits after
// each run so it has a previous log.
func kubectlPod() *v1.Pod {
	p := newPod("kc")
	sh := func(name, script string) v1.Container {
		return v1.Container{Name: name, Image: *busyboxFlag, ImagePullPolicy: v1.PullNever, Command: []string{"sh", "-c", script}}
	}
	web := sh("web", "mkdir -p /www && echo hello-pf > /www/index.html && exec httpd -f -p 8080 -h /www")
	web.Ports = []v1.ContainerPort{{ContainerPort: 8080}}
	web.ReadinessProbe = &v1.Probe{PeriodSeconds: 1, ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(8080)}}}
	reader := sh("reader", `while read l; do echo "got $l"; done`)
	reader.Stdin = true
	restarter := sh("restarter", `n=$(cat /state/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /state/n; echo "run $n"; sleep 1; exit 3`)
	restarter.VolumeMounts = []v1.VolumeMount{{Name: "state", MountPath: "/state"}}
	p.Spec.Volumes = []v1.Volume{{Name: "state", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	p.Spec.Containers = []v1.Container{
		sh("main", `echo first; echo second; i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.3; done`),
		web, reader, restarter,
	}
	return p
}

var tickRE = regexp.MustCompile(`^tick (\d+)$`)

func tickNumber(t *testing.T, line string) int {
	t.Helper()
	m := tickRE.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("line %q is not a tick", line)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// A real kubectl against the node, through the API server: logs (plain,
// --tail, -f, --previous), exec with stdin and the exit code,
// port-forward, attach, the stats summary through the node proxy; and
// the kubelet API's answers to a pod of another node, an unknown
// container and a malformed log query.
func testKubectl(t *testing.T, a *agent) {
	if *kubectlFlag == "" {
		t.Skip("no -kubectl")
	}
	if flags.Runtime == "embedded" {
		testKubectlEmbedded(t, a)
		return
	}
	createPod(t, kubectlPod())
	waitPod(t, "default", "kc", 90*time.Second, "restarter restarted once", func(p *v1.Pod) bool {
		running := 0
		restarted := false
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Running != nil {
				running++
			}
			if c.Name == "restarter" && c.RestartCount >= 1 {
				restarted = true
			}
		}
		return running >= 3 && restarted
	})
	p, err := admin.CoreV1().Pods("default").Get(context.Background(), "kc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, a, p, "main", "tick 3", 30*time.Second)

	t.Run("logs", func(t *testing.T) {
		r := kubectl(t, time.Minute, "", "logs", "kc", "-c", "main")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "first\nsecond\ntick 1\ntick 2\n") {
			t.Errorf("kubectl logs: exit %d, stdout starts %q, stderr %q; want first, second, tick 1, tick 2", r.code, harness.Tail(r.stdout, 4), r.stderr)
		}
	})
	t.Run("logs --tail", func(t *testing.T) {
		r := kubectl(t, time.Minute, "", "logs", "kc", "-c", "main", "--tail", "2")
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		if r.code != 0 || len(lines) != 2 {
			t.Fatalf("kubectl logs --tail 2: exit %d, %q, stderr %q; want two lines", r.code, r.stdout, r.stderr)
		}
		if a, b := tickNumber(t, lines[0]), tickNumber(t, lines[1]); b != a+1 || a < 3 {
			t.Errorf("kubectl logs --tail 2: %q; want the last two ticks", lines)
		}
	})
	t.Run("logs -f", func(t *testing.T) {
		lines, _, stop := kubectlStream(t, "logs", "-f", "kc", "-c", "main", "--tail", "1")
		first := tickNumber(t, nextLine(t, lines, "logs -f"))
		// Three more lines that were written after the call started.
		for want := first + 1; want <= first+3; want++ {
			if got := tickNumber(t, nextLine(t, lines, "logs -f")); got != want {
				t.Fatalf("logs -f: tick %d after tick %d", got, want-1)
			}
		}
		stop()
	})
	t.Run("logs --previous", func(t *testing.T) {
		prev := kubectl(t, time.Minute, "", "logs", "kc", "-c", "restarter", "--previous")
		cur := kubectl(t, time.Minute, "", "logs", "kc", "-c", "restarter")
		var pn, cn int
		if _, err := fmt.Sscanf(prev.stdout, "run %d\n", &pn); err != nil || prev.code != 0 {
			t.Fatalf("logs --previous: exit %d, %q, stderr %q; want \"run N\"", prev.code, prev.stdout, prev.stderr)
		}
		if _, err := fmt.Sscanf(cur.stdout, "run %d\n", &cn); err != nil || cur.code != 0 {
			t.Fatalf("logs: exit %d, %q, stderr %q; want \"run N\"", cur.code, cur.stdout, cur.stderr)
		}
		// While the restarter waits in back-off, both are its last run (the
		// kubelet's lastState); while it runs, previous is the run before.
		if pn > cn {
			t.Errorf("previous log is run %d, current run %d: want an earlier or the same run", pn, cn)
		}
	})
	t.Run("exec", func(t *testing.T) {
		r := kubectl(t, time.Minute, "from stdin\n", "exec", "-i", "kc", "-c", "main", "--", "sh", "-c", "cat; echo to-stderr >&2; exit 7")
		if r.code != 7 || r.stdout != "from stdin\n" || !strings.Contains(r.stderr, "to-stderr") {
			t.Errorf("kubectl exec: exit %d, stdout %q, stderr %q; want 7, the stdin echoed, to-stderr", r.code, r.stdout, r.stderr)
		}
		r = kubectl(t, time.Minute, "", "exec", "kc", "-c", "web", "--", "cat", "/www/index.html")
		if r.code != 0 || r.stdout != "hello-pf\n" {
			t.Errorf("kubectl exec cat: exit %d, %q, stderr %q", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("port-forward", func(t *testing.T) {
		lines, _, stop := kubectlStream(t, "port-forward", "pod/kc", ":8080")
		l := nextLine(t, lines, "port-forward")
		var port int
		if _, err := fmt.Sscanf(l, "Forwarding from 127.0.0.1:%d -> 8080", &port); err != nil {
			t.Fatalf("port-forward said %q: %v", l, err)
		}
		c := &http.Client{Timeout: 30 * time.Second}
		for i := 0; i < 2; i++ { // two connections, each its own stream
			resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/index.html", port))
			if err != nil {
				t.Fatalf("through port-forward: %v (kubectl: %s)", err, stop())
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != "hello-pf\n" {
				t.Errorf("through port-forward: %d %q; want 200 hello-pf", resp.StatusCode, b)
			}
		}
		stop()
	})
	t.Run("attach", func(t *testing.T) {
		lines, stdin, stop := kubectlStream(t, "attach", "-i", "kc", "-c", "reader")
		// The stream is set up before kubectl reads stdin; a line written
		// now reaches the container once it is.
		if _, err := io.WriteString(stdin, "ping\n"); err != nil {
			t.Fatal(err)
		}
		for {
			l := nextLine(t, lines, "attach")
			if l == "got ping" {
				break
			}
			t.Logf("attach: %q", l)
		}
		stop()
	})
	t.Run("stats/summary", func(t *testing.T) {
		r := kubectl(t, time.Minute, "", "get", "--raw", "/api/v1/nodes/"+*nodeFlag+"/proxy/stats/summary")
		if r.code != 0 {
			t.Fatalf("get --raw stats/summary: exit %d, stderr %q", r.code, r.stderr)
		}
		var s statsapi.Summary
		if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
			t.Fatalf("stats/summary: %v in %q", err, harness.Tail(r.stdout, 5))
		}
		checkSummary(t, &s, "kc", []string{"main", "web", "reader"}) // restarter is mostly in back-off
	})
	t.Run("node endpoints", func(t *testing.T) { testNodeEndpoints(t, "kc") })
	t.Run("log rotation", func(t *testing.T) { testLogRotation(t, a) })
	t.Run("refusals", func(t *testing.T) { testKubeletAPIRefusals(t, a) })
	deletePod(t, "kc")
}

// testNodeEndpoints reads the node's other read endpoints through the API
// server's node proxy: /pods and /runningpods hold pod, /configz a
// KubeletConfiguration, /metrics/resource the names metrics-server
// reads, /metrics/probes the prober's counter only.
func testNodeEndpoints(t *testing.T, pod string) {
	get := func(path string) string {
		r := kubectl(t, time.Minute, "", "get", "--raw", "/api/v1/nodes/"+*nodeFlag+"/proxy"+path)
		if r.code != 0 {
			t.Fatalf("get --raw %s: exit %d, stderr %q", path, r.code, r.stderr)
		}
		return r.stdout
	}
	for _, path := range []string{"/pods", "/runningpods/"} {
		var l v1.PodList
		if err := json.Unmarshal([]byte(get(path)), &l); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		found := false
		for _, p := range l.Items {
			found = found || p.Name == pod
		}
		if !found {
			t.Errorf("%s: %d pods, none named %s", path, len(l.Items), pod)
		}
	}
	// As the node conformance suite reads it: the kubelet's own type,
	// here refusing a field that type has not.
	var cz struct {
		KubeletConfig kubeletconfig.KubeletConfiguration `json:"kubeletconfig"`
	}
	d := json.NewDecoder(strings.NewReader(get("/configz")))
	d.DisallowUnknownFields()
	if err := d.Decode(&cz); err != nil {
		t.Fatalf("/configz: %v", err)
	}
	k := cz.KubeletConfig
	if k.Kind != "KubeletConfiguration" || k.Port == 0 || k.HealthzPort == nil || !ptr.Deref(k.Authentication.Webhook.Enabled, false) || k.Authorization.Mode != "Webhook" {
		t.Errorf("/configz: %+v; want the kind, the ports, webhook authentication and authorization", k)
	}
	res := get("/metrics/resource")
	for _, want := range []string{"node_cpu_usage_seconds_total ", "node_memory_working_set_bytes ",
		`pod_cpu_usage_seconds_total{namespace="default",pod="` + pod + `"}`,
		`container_memory_working_set_bytes{container="main",namespace="default",pod="` + pod + `"}`,
		"resource_scrape_error 0"} {
		if !strings.Contains(res, want) {
			t.Errorf("/metrics/resource has no %q:\n%s", want, harness.Tail(res, 20))
		}
	}
	probes := get("/metrics/probes")
	if want := `prober_probe_total{container="web",namespace="default",pod="` + pod + `"`; !strings.Contains(probes, want) {
		t.Errorf("/metrics/probes has no %s:\n%s", want, harness.Tail(probes, 10))
	}
	for _, l := range strings.Split(probes, "\n") {
		if l != "" && !strings.HasPrefix(l, "# ") && !strings.HasPrefix(l, "prober_") {
			t.Errorf("/metrics/probes has %q, not a prober metric", l)
		}
	}
	if m := get("/metrics"); !strings.Contains(m, "go_goroutines") && !strings.Contains(m, "wasmlet_") {
		t.Errorf("/metrics: %q", harness.Tail(m, 5))
	}
}

// checkNodeSummary checks the node's part of what metrics-server reads:
// its CPU and memory, and its root filesystem.
func checkNodeSummary(t *testing.T, s *statsapi.Summary) {
	t.Helper()
	if s.Node.NodeName != *nodeFlag || s.Node.CPU == nil || s.Node.CPU.UsageCoreNanoSeconds == nil || *s.Node.CPU.UsageCoreNanoSeconds == 0 ||
		s.Node.Memory == nil || s.Node.Memory.WorkingSetBytes == nil || *s.Node.Memory.WorkingSetBytes == 0 {
		t.Errorf("node stats %+v: want the node's name, CPU and memory", s.Node)
	}
	if s.Node.Fs == nil || s.Node.Fs.CapacityBytes == nil || *s.Node.Fs.CapacityBytes == 0 {
		t.Errorf("node fs %+v: want the root filesystem's capacity", s.Node.Fs)
	}
}

// checkSummary checks what metrics-server reads: the node's stats, and the
// pod's and its containers' CPU and memory (a memory working set, a CPU
// counter, which may still be 0 for an idle pod).
func checkSummary(t *testing.T, s *statsapi.Summary, pod string, containers []string) {
	t.Helper()
	checkNodeSummary(t, s)
	for _, ps := range s.Pods {
		if ps.PodRef.Name != pod {
			continue
		}
		if ps.CPU == nil || ps.CPU.UsageCoreNanoSeconds == nil || ps.Memory == nil || ps.Memory.WorkingSetBytes == nil || *ps.Memory.WorkingSetBytes == 0 {
			t.Errorf("pod %s: cpu %+v memory %+v; want both", pod, ps.CPU, ps.Memory)
		}
		got := map[string]bool{}
		for _, c := range ps.Containers {
			got[c.Name] = true
			if c.CPU == nil || c.CPU.UsageCoreNanoSeconds == nil || c.Memory == nil || c.Memory.WorkingSetBytes == nil {
				t.Errorf("container %s of %s: cpu %+v memory %+v; want both", c.Name, pod, c.CPU, c.Memory)
			}
		}
		for _, c := range containers {
			if !got[c] {
				t.Errorf("pod %s's stats have containers %v; want %s", pod, got, c)
			}
		}
		return
	}
	t.Errorf("stats/summary has no pod %s", pod)
}

// testLogRotation runs a chatty container (1 KiB lines, ~100 KiB/s) on an
// agent that rotates logs over 64 KiB keeping 3 files: its log directory
// never holds more than 3 files, rotated ones get gzipped, and `kubectl
// logs -f` started before a rotation keeps reading across it, every line
// in order.
func testLogRotation(t *testing.T, a *agent) {
	p := newPod("chatty")
	pad := strings.Repeat("x", 1000)
	p.Spec.Containers[0] = v1.Container{Name: "main", Image: *busyboxFlag, ImagePullPolicy: v1.PullNever,
		Command: []string{"sh", "-c", `i=0; while :; do i=$((i+1)); echo "line $i ` + pad + `"; usleep 10000; done`}}
	createPod(t, p)
	defer deletePod(t, "chatty")
	p = waitPod(t, "default", "chatty", 90*time.Second, "Running", harness.Running)
	dir := filepath.Join(a.Logs, fmt.Sprintf("default_chatty_%s", p.UID), "main")
	lines, _, stop := kubectlStream(t, "logs", "-f", "chatty", "--tail", "1")
	defer stop()
	last := -1
	readLine := func() {
		l := nextLine(t, lines, "logs -f across rotations")
		var n int
		if _, err := fmt.Sscanf(l, "line %d ", &n); err != nil || !strings.HasSuffix(l, pad) {
			t.Fatalf("logs -f: %.40q… is not a whole line", l)
		}
		if last >= 0 && n != last+1 {
			t.Fatalf("logs -f: line %d after line %d", n, last)
		}
		last = n
	}
	seenGz := false
	harness.Eventually(t, 90*time.Second, "two rotations (a gzipped file) with at most 3 files", func() (bool, string) {
		for i := 0; i < 50; i++ { // keep the follower reading as the files turn over
			readLine()
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		if len(files) > 3 {
			t.Fatalf("%d log files, want at most 3: %v", len(files), files)
		}
		for _, f := range files {
			seenGz = seenGz || strings.HasSuffix(f, ".gz")
		}
		return seenGz, fmt.Sprint(files)
	})
	// The follower is still in step after the rotations.
	for i := 0; i < 200; i++ {
		readLine()
	}
	stop()
}

// testKubeletAPIRefusals asks the kubelet API directly (with the API
// server's client certificate) for a pod of another node, an unknown
// container and a malformed log query.
func testKubeletAPIRefusals(t *testing.T, a *agent) {
	other := newPod("elsewhere")
	other.Spec.NodeName = "another-node"
	createPod(t, other)
	defer func() {
		admin.CoreV1().Pods("default").Delete(context.Background(), "elsewhere", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
	}()
	cert, err := tls.LoadX509KeyPair(filepath.Join(*clusterFlag, "pki", "admin.crt"), filepath.Join(*clusterFlag, "pki", "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}}}}
	for _, x := range []struct {
		method, path string
		code         int
		says         string
	}{
		{"POST", "/exec/default/elsewhere/main?command=true&output=1", http.StatusNotFound, "elsewhere"},
		{"POST", "/exec/default/kc/nope?command=true&output=1", http.StatusNotFound, "nope"},
		{"POST", "/attach/default/kc/nope?output=1", http.StatusNotFound, "nope"},
		{"POST", "/portForward/default/elsewhere", http.StatusNotFound, "elsewhere"},
		{"GET", "/containerLogs/default/elsewhere/main", http.StatusNotFound, "elsewhere"},
		{"GET", "/containerLogs/default/kc/main?tailLines=ten", http.StatusBadRequest, "tailLines"},
		{"GET", "/containerLogs/default/kc/main?sinceSeconds=-1", http.StatusBadRequest, "sinceSeconds"},
		{"GET", "/containerLogs/default/kc/main?sinceTime=yesterday", http.StatusBadRequest, "sinceTime"},
	} {
		req, _ := http.NewRequest(x.method, fmt.Sprintf("https://127.0.0.1:%d%s", a.apiPort, x.path), nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode != x.code || !strings.Contains(string(b), x.says) {
			t.Errorf("%s %s: %d %q; want %d naming %q", x.method, x.path, resp.StatusCode, b, x.code, x.says)
		}
	}
}

// On the embedded WASI runtime: `kubectl logs -f` follows the module's
// output; exec, attach and port-forward end at once with an error naming
// the runtime; the stats summary has the module's CPU and memory.
func testKubectlEmbedded(t *testing.T, a *agent) {
	createPod(t, newPod("kc", "echo", "first", ";", "log", "300ms", "tick"))
	p := waitPod(t, "default", "kc", 90*time.Second, "Running", harness.Running)
	waitLog(t, a, p, "main", "tick 2", 30*time.Second)
	t.Run("logs -f", func(t *testing.T) {
		lines, _, stop := kubectlStream(t, "logs", "-f", "kc", "-c", "main")
		if l := nextLine(t, lines, "logs -f"); l != "first" {
			t.Fatalf("logs -f: first line %q, want first", l)
		}
		prev := tickNumber(t, nextLine(t, lines, "logs -f"))
		for i := 0; i < 3; i++ {
			n := tickNumber(t, nextLine(t, lines, "logs -f"))
			if n != prev+1 {
				t.Fatalf("logs -f: tick %d after tick %d", n, prev)
			}
			prev = n
		}
		stop()
	})
	for _, args := range [][]string{
		{"exec", "kc", "-c", "main", "--", "/testbox", "echo", "hi"},
		{"attach", "kc", "-c", "main"},
		{"port-forward", "pod/kc", ":8080"},
	} {
		t.Run(args[0], func(t *testing.T) {
			r := kubectl(t, time.Minute, "", args...)
			if r.code == 0 || !strings.Contains(r.stderr, "not supported by the embedded WASI runtime") {
				t.Errorf("kubectl %s: exit %d, stdout %q, stderr %q; want a failure naming the WASI runtime", args[0], r.code, r.stdout, r.stderr)
			}
		})
	}
	t.Run("stats/summary", func(t *testing.T) {
		r := kubectl(t, time.Minute, "", "get", "--raw", "/api/v1/nodes/"+*nodeFlag+"/proxy/stats/summary")
		var s statsapi.Summary
		if r.code != 0 {
			t.Fatalf("get --raw stats/summary: exit %d, stderr %q", r.code, r.stderr)
		}
		if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
			t.Fatalf("stats/summary: %v", err)
		}
		// The module's CPU time and linear memory.
		checkSummary(t, &s, "kc", []string{"main"})
	})
	deletePod(t, "kc")
}
