package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cri-client/pkg/fake"
	"k8s.io/utils/ptr"

	"github.com/wasmlet/wasmlet/host/apis/config/v1alpha1"
)

type harness struct {
	dir, manifests, endpoint string
	fake                     *fake.RemoteRuntime
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	dir, err := os.MkdirTemp("", "wlag")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	h := &harness{dir: dir, manifests: filepath.Join(dir, "manifests"), endpoint: "unix://" + filepath.Join(dir, "cri.sock")}
	if err := os.MkdirAll(h.manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	h.fake = fake.NewFakeRemoteRuntime()
	if err := h.fake.Start(h.endpoint); err != nil {
		t.Fatal(err)
	}
	h.fake.ImageService.SetFakeImageSize(1 << 20)
	t.Cleanup(h.fake.Stop)
	return h
}

func (h *harness) write(t testing.TB, name, image string) {
	t.Helper()
	m := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  hostNetwork: true\n  containers:\n  - name: c\n    image: %s\n", name, image)
	if err := os.WriteFile(filepath.Join(h.manifests, name+".yaml"), []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
}

// config is the test agent's configuration: the harness's manifests and
// runtime, short periods, no read-only server, no cgroups and plugins kept
// loaded.
func (h *harness) config() Config {
	return Config{
		WasmletConfiguration: v1alpha1.WasmletConfiguration{
			NodeName: "n1", StaticPodPath: h.manifests, ContainerRuntimeEndpoint: h.endpoint,
			RootDir: filepath.Join(h.dir, "root"), PodLogsDir: filepath.Join(h.dir, "logs"),
			PLEGRelistPeriod:     metav1.Duration{Duration: 100 * time.Millisecond},
			HousekeepingInterval: metav1.Duration{Duration: 200 * time.Millisecond},
			ContainerGCPeriod:    metav1.Duration{Duration: 200 * time.Millisecond},
			MaxPods:              5000, ReadOnlyPort: ptr.To(0), HealthzPort: ptr.To(0), ContainerLogSymlinkDir: "none", CgroupsPerQOS: ptr.To(false), PluginIdleTimeout: &metav1.Duration{},
		},
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: os.Stderr}),
	}
}

// start runs an agent until the returned stop is called; edit, if given,
// changes the test config first.
func (h *harness) start(t testing.TB, edit ...func(*Config)) (*Agent, func()) {
	t.Helper()
	cfg := h.config()
	for _, e := range edit {
		e(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	return a, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

// waitPods waits until the agent shows n pods, all with phase want.
func waitPods(t testing.TB, a *Agent, n int, want v1.PodPhase, timeout time.Duration) []v1.Pod {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		pods := a.Pods()
		ok := len(pods) == n
		for _, p := range pods {
			ok = ok && p.Status.Phase == want
		}
		if ok {
			return pods
		}
		if time.Now().After(deadline) {
			var s []string
			for _, p := range pods {
				s = append(s, p.Name+"="+string(p.Status.Phase))
			}
			t.Fatalf("want %d pods %s; have %v", n, want, s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *harness) count(call string) int {
	n := 0
	for _, c := range h.fake.RuntimeService.GetCalls() {
		if c == call {
			n++
		}
	}
	return n
}

func TestAgent_Run_StaticPodLifecycle(t *testing.T) {
	h := newHarness(t)
	h.write(t, "web", "wasmlet.local/busybox:1.0")
	h.write(t, "db", "wasmlet.local/busybox:1.0")
	a, stop := h.start(t)
	pods := waitPods(t, a, 2, v1.PodRunning, 10*time.Second)
	for _, p := range pods {
		if !strings.HasSuffix(p.Name, "-n1") || len(p.Status.ContainerStatuses) != 1 || !strings.HasPrefix(p.Status.ContainerStatuses[0].ContainerID, "fakeRuntime://") {
			t.Errorf("pod %s status = %+v", p.Name, p.Status)
		}
	}
	// Changed manifest: the pod (a new UID) is recreated with the new spec.
	h.write(t, "web", "wasmlet.local/busybox:2.0")
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok := false
		for _, p := range a.Pods() {
			if p.Name == "web-n1" && p.Status.Phase == v1.PodRunning && p.Status.ContainerStatuses[0].Image == "wasmlet.local/busybox:2.0" {
				ok = len(a.Pods()) == 2
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("web not recreated: %+v", a.Pods())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Removed manifest: its containers and sandbox are gone from the runtime.
	os.Remove(filepath.Join(h.manifests, "db.yaml"))
	waitPods(t, a, 1, v1.PodRunning, 10*time.Second)
	deadline = time.Now().Add(10 * time.Second)
	for {
		rp, err := a.rt.GetPods(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(rp) == 1 && rp[0].Name == "web-n1" && len(rp[0].Objects) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runtime still holds %d pods (%+v)", len(rp), rp)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()

	// Restart: the agent rebuilds its view from the runtime and creates
	// nothing.
	creates := h.count("CreateContainer") + h.count("RunPodSandbox")
	stops := h.count("StopContainer")
	a, stop = h.start(t)
	defer stop()
	waitPods(t, a, 1, v1.PodRunning, 10*time.Second)
	time.Sleep(500 * time.Millisecond) // a few relists and housekeepings
	if c := h.count("CreateContainer") + h.count("RunPodSandbox"); c != creates {
		t.Errorf("restart created %d sandboxes/containers", c-creates)
	}
	if s := h.count("StopContainer"); s != stops {
		t.Errorf("restart stopped %d containers", s-stops)
	}
}

func TestAgent_Run_RestartsCrashedContainer(t *testing.T) {
	h := newHarness(t)
	h.write(t, "crash", "wasmlet.local/busybox:1.0")
	a, stop := h.start(t)
	defer stop()
	waitPods(t, a, 1, v1.PodRunning, 10*time.Second)
	h.fake.RuntimeService.Lock()
	for _, c := range h.fake.RuntimeService.Containers {
		c.State = 2 // CONTAINER_EXITED
		c.ExitCode = 1
		c.FinishedAt = time.Now().UnixNano()
	}
	h.fake.RuntimeService.Unlock()
	// PLEG sees the death; the pod is restarted at once (first crash: no
	// back-off yet) with restart count 1.
	deadline := time.Now().Add(10 * time.Second)
	for {
		p := a.Pods()[0]
		if cs := p.Status.ContainerStatuses[0]; cs.RestartCount == 1 && cs.State.Running != nil {
			if cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 1 {
				t.Errorf("last state = %+v", cs.LastTerminationState)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not restarted: %+v", p.Status.ContainerStatuses)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAgent_Run_RejectsOverMaxPods(t *testing.T) {
	h := newHarness(t)
	h.write(t, "a", "img:1")
	h.write(t, "b", "img:1")
	cfg := h.config()
	cfg.MaxPods = 1
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var running, failed int
		var reason string
		for _, p := range a.Pods() {
			switch p.Status.Phase {
			case v1.PodRunning:
				running++
			case v1.PodFailed:
				failed++
				reason = p.Status.Reason + ": " + p.Status.Message
			}
		}
		if running == 1 && failed == 1 {
			if !strings.HasPrefix(reason, "OutOfpods: ") || !strings.Contains(reason, "admitter MaxPods") {
				t.Errorf("rejection = %q", reason)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("running %d failed %d", running, failed)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAgent_Run_HousekeepingKillsOrphans(t *testing.T) {
	h := newHarness(t)
	h.write(t, "gone", "img:1")
	h.write(t, "stays", "img:1")
	a, stop := h.start(t)
	waitPods(t, a, 2, v1.PodRunning, 10*time.Second)
	stop()
	// The manifest goes while the agent is down: the next agent finds the
	// pod only in the runtime and must kill and collect it.
	os.Remove(filepath.Join(h.manifests, "gone.yaml"))
	a, stop = h.start(t)
	defer stop()
	waitPods(t, a, 1, v1.PodRunning, 10*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		rp, err := a.rt.GetPods(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(rp) == 1 && rp[0].Name == "stays-n1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runtime pods = %d, want only stays-n1", len(rp))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if a.Pods()[0].Status.ContainerStatuses[0].RestartCount != 0 || h.count("StopContainer") != 1 {
		t.Errorf("restarts %d, StopContainer calls %d (want 0 and 1)", a.Pods()[0].Status.ContainerStatuses[0].RestartCount, h.count("StopContainer"))
	}
}

func TestNewContext_Certificates(t *testing.T) {
	dir := t.TempDir()
	// Bootstrapping writes the kubeconfig, so it needs its path.
	if _, err := New(Config{WasmletConfiguration: v1alpha1.WasmletConfiguration{NodeName: "n1", RootDir: dir, BootstrapKubeConfig: filepath.Join(dir, "b")}}); err == nil ||
		!strings.Contains(err.Error(), "bootstrapKubeconfig: Invalid value") || !strings.Contains(err.Error(), "needs kubeconfig") {
		t.Errorf("bootstrap without kubeconfig: %v", err)
	}
	// Stopped while the bootstrap kubeconfig is missing: the context's
	// error, after the file was named in the log.
	var log strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := NewContext(ctx, Config{
		WasmletConfiguration: v1alpha1.WasmletConfiguration{
			NodeName: "n1", RootDir: dir, KubeConfig: filepath.Join(dir, "node.kubeconfig"),
			BootstrapKubeConfig: filepath.Join(dir, "missing.kubeconfig"),
		},
		Logger: hclog.New(&hclog.LoggerOptions{Output: &log}),
	})
	if err == nil || !strings.Contains(err.Error(), "context deadline exceeded") || !strings.Contains(log.String(), filepath.Join(dir, "missing.kubeconfig")) {
		t.Errorf("stopped while waiting: %v; log:\n%s", err, log.String())
	}
}
