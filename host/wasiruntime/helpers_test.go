package wasiruntime

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
)

// Shared by the package's tests: testbox built for wasip1 once, and one
// compilation cache so each test does not recompile it.
var (
	testboxWasm string
	testCache   string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wasiruntime-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testboxWasm = filepath.Join(dir, "testbox.wasm")
	testCache = filepath.Join(dir, "cache")
	cmd := exec.Command("go", "build", "-o", testboxWasm, "../../examples/workloads/testbox")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build testbox.wasm: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const testboxImage = "wasmlet.local/testbox:test"

// harness is a Runtime served on a unix socket with real CRI clients.
type harness struct {
	rt   *Runtime
	rs   criapi.RuntimeService
	is   criapi.ImageManagerService
	root string
	logs string // sandbox log directories go under here
	stop func() // stops serving and closes the runtime
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	root := t.TempDir()
	h := &harness{root: root, logs: t.TempDir()}
	h.start(t)
	if _, err := h.rt.images.Import(testboxImage, testboxWasm); err != nil {
		t.Fatal(err)
	}
	return h
}

// start (re)starts the runtime on h.root.
func (h *harness) start(t testing.TB) {
	t.Helper()
	rt, err := New(Config{RootDir: h.root, CacheDir: testCache, PodIP: "10.1.2.3",
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: testWriter{t}})})
	if err != nil {
		t.Fatal(err)
	}
	l, err := Listen(rt.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- rt.Serve(ctx, l) }()
	rs, err := remote.NewRemoteRuntimeService(context.Background(), rt.Endpoint(), 2*time.Minute, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	is, err := remote.NewRemoteImageService(context.Background(), rt.Endpoint(), 2*time.Minute, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	h.rt, h.rs, h.is = rt, rs, is
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		rs.Close(context.Background())
		is.Close(context.Background())
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if err := rt.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	h.stop = stop
	t.Cleanup(stop)
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (h *harness) sandbox(t testing.TB, name string, labels map[string]string) (string, *runtimeapi.PodSandboxConfig) {
	t.Helper()
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name},
		Hostname:     name,
		LogDirectory: filepath.Join(h.logs, "default_"+name+"_uid-"+name),
		Labels:       labels,
	}
	id, err := h.rs.RunPodSandbox(context.Background(), cfg, "")
	if err != nil {
		t.Fatalf("RunPodSandbox %s: %v", name, err)
	}
	return id, cfg
}

// container creates a testbox container with args (joined steps) and
// optional changes to its config, and returns its ID.
func (h *harness) container(t testing.TB, sb string, sbCfg *runtimeapi.PodSandboxConfig, name string, args []string, change func(*runtimeapi.ContainerConfig)) string {
	t.Helper()
	cfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: testboxImage},
		Command:  []string{"/testbox"},
		Args:     args,
		LogPath:  name + "/0.log",
		Labels:   map[string]string{"io.kubernetes.container.name": name},
	}
	if change != nil {
		change(cfg)
	}
	id, err := h.rs.CreateContainer(context.Background(), sb, cfg, sbCfg)
	if err != nil {
		t.Fatalf("CreateContainer %s: %v", name, err)
	}
	return id
}

func (h *harness) run(t testing.TB, sb string, sbCfg *runtimeapi.PodSandboxConfig, name string, args []string, change func(*runtimeapi.ContainerConfig)) string {
	t.Helper()
	id := h.container(t, sb, sbCfg, name, args, change)
	if err := h.rs.StartContainer(context.Background(), id); err != nil {
		t.Fatalf("StartContainer %s: %v", name, err)
	}
	return id
}

// waitExit waits for a container to exit and returns its status.
func (h *harness) waitExit(t testing.TB, id string, timeout time.Duration) *runtimeapi.ContainerStatus {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		resp, err := h.rs.ContainerStatus(context.Background(), id, false)
		if err != nil {
			t.Fatalf("ContainerStatus: %v", err)
		}
		if resp.Status.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			return resp.Status
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s still %s after %v", id, resp.Status.State, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitLog waits until the log file has a line containing text.
func waitLog(t testing.TB, path, text string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), text) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("log %s has no %q after %v; it has:\n%s", path, text, timeout, b)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// logLine is one parsed CRI log line.
type logLine struct {
	time    time.Time
	stream  string
	partial bool
	text    string
}

func readLog(t testing.TB, path string) []logLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []logLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), " ", 4)
		if len(parts) < 3 {
			t.Fatalf("log line %q is not in CRI format", sc.Text())
		}
		ts, err := time.Parse(time.RFC3339Nano, parts[0])
		if err != nil {
			t.Fatalf("log line %q: timestamp: %v", sc.Text(), err)
		}
		if parts[1] != "stdout" && parts[1] != "stderr" || parts[2] != "F" && parts[2] != "P" {
			t.Fatalf("log line %q: bad stream or tag", sc.Text())
		}
		l := logLine{time: ts, stream: parts[1], partial: parts[2] == "P"}
		if len(parts) == 4 {
			l.text = parts[3]
		}
		out = append(out, l)
	}
	return out
}
