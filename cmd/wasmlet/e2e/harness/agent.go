package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// AgentConfig describes one `wasmlet run` process.
type AgentConfig struct {
	// Name names the agent in messages.
	Name string
	// Dir holds the agent's manifests, root and logs directories and its
	// log file (agent.log); it is created.
	Dir string
	// Binary is the wasmlet binary.
	Binary string
	// Suite heads the line each start writes into the agent's log.
	Suite string
	// Env is extra environment (NAME=value) for the process.
	Env []string
	// CachePods makes Pods answer from a list at most PollEvery old, for
	// suites where many waits share one agent.
	CachePods bool
}

// Agent is one `wasmlet run` process with its own manifest directory, root
// directory, pod logs directory and read-only port. It can be stopped or
// killed and started again on the same directories.
type Agent struct {
	AgentConfig
	// Manifests is the static pod manifest directory (--pod-manifest-path).
	Manifests string
	// Root is the agent's state directory (--root-dir).
	Root string
	// Logs is the pod logs directory (--pod-logs-dir).
	Logs string
	// LogLinks is the directory of the containers' log symlinks
	// (--container-log-symlink-dir).
	LogLinks string
	// LogFile is where the agent's output goes, appended to on each start.
	LogFile string
	// Port is the read-only port on 127.0.0.1.
	Port int
	// HealthzPort is the healthz port on 127.0.0.1 (--healthz-port).
	HealthzPort int

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	cached  *v1.PodList
	cacheAt time.Time
}

// NewAgent creates the agent's directories and picks its port.
func NewAgent(t testing.TB, c AgentConfig) *Agent {
	t.Helper()
	a := &Agent{
		AgentConfig: c,
		Manifests:   filepath.Join(c.Dir, "manifests"),
		Root:        filepath.Join(c.Dir, "root"),
		Logs:        filepath.Join(c.Dir, "logs"),
		LogLinks:    filepath.Join(c.Dir, "containers"),
		LogFile:     filepath.Join(c.Dir, "agent.log"),
		Port:        FreePort(t),
		HealthzPort: FreePort(t),
	}
	for _, d := range []string{a.Manifests, a.Root, a.Logs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// Start runs `wasmlet run` with the agent's directories and port followed
// by args, and waits until /healthz answers 200 on the read-only port and
// on the healthz port, which serves nothing else. The process gets SIGKILL
// when the suite dies. Dead containers, sandboxes and pod directories are
// collected every 2 s (--container-gc-period, the default minute would
// only make the suites wait) unless args say otherwise; the period itself
// is host/internal/housekeeping's unit test. The hard eviction thresholds
// are the ones the real kubelet gets in the project's tests
// (hack/kubeletconfig/kubelet.yaml), 1Mi and 1%, so a busy test machine's
// disk does not put every suite's node under DiskPressure; args given
// later replace them.
// TestEvictionHard is the suites' --eviction-hard.
const TestEvictionHard = "memory.available<1Mi,nodefs.available<1%,imagefs.available<1%,nodefs.inodesFree<1%"

func (a *Agent) Start(t testing.TB, args ...string) {
	t.Helper()
	args = append([]string{"run",
		"--pod-manifest-path", a.Manifests,
		"--root-dir", a.Root,
		"--pod-logs-dir", a.Logs,
		"--container-log-symlink-dir", a.LogLinks,
		"--address", "127.0.0.1",
		"--read-only-port", strconv.Itoa(a.Port),
		"--healthz-port", strconv.Itoa(a.HealthzPort),
		"--container-gc-period", "2s",
		"--eviction-hard", TestEvictionHard,
	}, args...)
	out, err := os.OpenFile(a.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(out, "==== %s: %s %s\n", a.Suite, a.Binary, strings.Join(args, " "))
	cmd := exec.Command(a.Binary, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), a.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		t.Fatalf("agent %s: %v", a.Name, err)
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
	Eventually(t, 60*time.Second, fmt.Sprintf("agent %s: /healthz answers 200", a.Name), func() (bool, string) {
		select {
		case <-exited:
			t.Fatalf("agent %s exited during start-up: %s\n%s", a.Name, cmd.ProcessState, a.LogTail(40))
		default:
		}
		code, body, err := a.Get("/healthz")
		if err != nil {
			return false, err.Error()
		}
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
	})
	for path, want := range map[string]int{"/healthz": http.StatusOK, "/pods": http.StatusNotFound} {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", a.HealthzPort, path))
		if err != nil {
			t.Fatalf("agent %s: healthz port: %v", a.Name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("agent %s: healthz port %s answered %d, want %d", a.Name, path, resp.StatusCode, want)
		}
	}
}

// Pid is the running agent's process ID.
func (a *Agent) Pid() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cmd.Process.Pid
}

// Kill ends the agent with SIGKILL (a crash) and waits for it.
func (a *Agent) Kill(t testing.TB) { a.Signal(t, syscall.SIGKILL, 10*time.Second) }

// Stop ends the agent with SIGTERM (a clean shutdown) and waits for it.
func (a *Agent) Stop(t testing.TB) { a.Signal(t, syscall.SIGTERM, 30*time.Second) }

// Signal sends sig to the agent unless it has exited, and fails t when it
// has not exited within wait (it is then killed).
func (a *Agent) Signal(t testing.TB, sig syscall.Signal, wait time.Duration) {
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
		t.Errorf("agent %s did not exit within %v of %v", a.Name, wait, sig)
	}
}

// Running reports whether the agent process is alive.
func (a *Agent) Running() bool {
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

// Get fetches path from the agent's read-only server.
func (a *Agent) Get(path string) (int, []byte, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d%s", a.Port, path))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// ErrNoMetric is returned by Metric when /metrics has no sample of the name.
var ErrNoMetric = errors.New("no such metric")

// Metric returns the sum of a metric's samples in /metrics (Prometheus text
// format) over the label sets whose line contains every one of match, e.g.
// `result="reject"`.
func (a *Agent) Metric(name string, match ...string) (float64, error) {
	code, b, err := a.Get("/metrics")
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("/metrics: %d", code)
	}
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(?:\{[^}]*\})? (\S+)$`)
	ms := re.FindAllSubmatch(b, -1)
	if ms == nil {
		return 0, fmt.Errorf("/metrics has no %s: %w", name, ErrNoMetric)
	}
	sum := 0.0
sample:
	for _, m := range ms {
		for _, s := range match {
			if !bytes.Contains(m[0], []byte(s)) {
				continue sample
			}
		}
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			return 0, fmt.Errorf("/metrics %s: %w", name, err)
		}
		sum += v
	}
	return sum, nil
}

// Pods returns the agent's /pods (at most PollEvery old with CachePods).
func (a *Agent) Pods() (*v1.PodList, error) {
	if a.CachePods {
		a.mu.Lock()
		if a.cached != nil && time.Since(a.cacheAt) < PollEvery {
			l := a.cached
			a.mu.Unlock()
			return l, nil
		}
		a.mu.Unlock()
	}
	code, b, err := a.Get("/pods")
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

// Write puts p into the manifest directory as file (YAML), atomically.
func (a *Agent) Write(t testing.TB, file string, p *v1.Pod) {
	t.Helper()
	b, err := yaml.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	a.WriteRaw(t, file, b)
}

// WriteRaw puts b into the manifest directory as file, atomically: it is
// written outside the directory and renamed in, so the agent never reads
// half a file.
func (a *Agent) WriteRaw(t testing.TB, file string, b []byte) {
	t.Helper()
	tmp := filepath.Join(a.Dir, "."+file+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(a.Manifests, file)); err != nil {
		t.Fatal(err)
	}
}

// Remove deletes a manifest (absent is fine).
func (a *Agent) Remove(t testing.TB, file string) {
	t.Helper()
	if err := os.Remove(filepath.Join(a.Manifests, file)); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}

// LogTail returns the last n lines of the agent's log.
func (a *Agent) LogTail(n int) string {
	b, _ := os.ReadFile(a.LogFile)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// LogContains reports whether the agent's log holds s.
func (a *Agent) LogContains(s string) bool {
	b, _ := os.ReadFile(a.LogFile)
	return bytes.Contains(b, []byte(s))
}
