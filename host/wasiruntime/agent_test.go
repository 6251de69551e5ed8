package wasiruntime_test

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
	"k8s.io/utils/ptr"

	"github.com/wasmlet/wasmlet/host/agent"
	"github.com/wasmlet/wasmlet/host/apis/config/v1alpha1"
	"github.com/wasmlet/wasmlet/host/wasiruntime"
)

// The agent with the embedded runtime in-process, as `make run` starts it:
// static pods of the image testbox, Running and logging.

const agentImage = "wasmlet.local/testbox:agent"

func manifest(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: default
spec:
  hostNetwork: true
  containers:
  - name: testbox
    image: %s
    imagePullPolicy: IfNotPresent
    command: ["/testbox"]
    args: ["log", "1h", "hello from %s"]
    resources:
      limits:
        memory: 64Mi
`, name, agentImage, name)
}

// agentFixture is an agent whose embedded runtime has testbox imported and
// compiled, and a directory of static pods.
type agentFixture struct {
	manifests, root, logs string
	a                     *agent.Agent
	cancel                context.CancelFunc
	done                  chan error
}

func newAgentFixture(t testing.TB) *agentFixture {
	t.Helper()
	f := &agentFixture{manifests: t.TempDir(), root: t.TempDir(), logs: t.TempDir(), done: make(chan error, 1)}
	rtRoot := filepath.Join(f.root, "runtime")
	images, err := wasiruntime.OpenImages(rtRoot)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := images.Import(agentImage, wasiruntime.TestboxWasm()); err != nil {
		t.Fatal(err)
	}
	if err := wasiruntime.Precompile(context.Background(), rtRoot, agentImage); err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		WasmletConfiguration: v1alpha1.WasmletConfiguration{
			NodeName: "n1", StaticPodPath: f.manifests, RootDir: f.root, PodLogsDir: f.logs, ReadOnlyPort: ptr.To(0), HealthzPort: ptr.To(0), ContainerLogSymlinkDir: "none",
		},
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: os.Stderr}),
	})
	if err != nil {
		t.Fatal(err)
	}
	f.a = a
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go func() { f.done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-f.done:
			if err != nil {
				t.Errorf("agent Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("agent did not stop")
		}
	})
	return f
}

// running counts the pods the agent reports Running with a started container.
func (f *agentFixture) running() int {
	n := 0
	for _, p := range f.a.Pods() {
		if p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil {
			n++
		}
	}
	return n
}

func (f *agentFixture) waitRunning(t testing.TB, want int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for f.running() < want {
		select {
		case err := <-f.done:
			t.Fatalf("agent stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d pods Running after %v", f.running(), want, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestAgent_EmbeddedRuntime(t *testing.T) {
	f := newAgentFixture(t)
	if err := os.WriteFile(filepath.Join(f.manifests, "hello.yaml"), []byte(manifest("hello")), 0o644); err != nil {
		t.Fatal(err)
	}
	f.waitRunning(t, 1, 60*time.Second)
	// The kubelet's log layout: <logs>/<ns>_<pod>_<uid>/<container>/<restart>.log.
	deadline := time.Now().Add(30 * time.Second)
	for {
		logs, _ := filepath.Glob(filepath.Join(f.logs, "default_hello-n1_*", "testbox", "0.log"))
		if len(logs) == 1 {
			b, _ := os.ReadFile(logs[0])
			if strings.Contains(string(b), " stdout F hello from hello 1") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line in %v", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := os.Remove(filepath.Join(f.manifests, "hello.yaml")); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(60 * time.Second)
	for len(f.a.Pods()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("pod still there after its manifest was removed: %d pods", len(f.a.Pods()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BenchmarkAgent_StartPods: 100 static pods written at once, until the agent
// reports all Running on the embedded runtime; pods/s is reported.
func BenchmarkAgent_StartPods(b *testing.B) {
	const n = 100
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		f := newAgentFixture(b)
		time.Sleep(500 * time.Millisecond) // let the agent settle
		b.StartTimer()
		start := time.Now()
		for j := 0; j < n; j++ {
			name := fmt.Sprintf("p%03d", j)
			if err := os.WriteFile(filepath.Join(f.manifests, name+".yaml"), []byte(manifest(name)), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		f.waitRunning(b, n, 5*time.Minute)
		b.ReportMetric(n/time.Since(start).Seconds(), "pods/s")
		b.StopTimer()
		f.cancel()
		<-f.done
		f.done <- nil
	}
}
