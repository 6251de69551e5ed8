//go:build e2e

package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/cri"
	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

var (
	flags          = harness.RegisterFlags(flag.CommandLine, "containerd")
	wasmFlag       = flag.String("wasm", "", "testbox.wasm, for the in-process embedded runtime (referenced by path)")
	busyboxFlag    = flag.String("busybox", "", "a busybox image reference (containerd only; empty leaves out the shell container)")
	ctrdBaseFlag   = flag.String("containerd-base", "", "BASE given to hack/containerd/up.sh; enables the containerd restart case")
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
	harness.PollEvery = pollEvery
	if err := flags.Check("wle"); err != nil {
		fmt.Fprintf(os.Stderr, "%v (run hack/e2e.sh)\n", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	var err error
	rt, err = cri.Connect(ctx, flags.Endpoint)
	if err == nil {
		err = rt.WaitReady(ctx)
	}
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: runtime %s: %v\n", flags.Endpoint, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// agent is one `wasmlet run` (harness.Agent) with the CRI endpoint it is
// given and the static-pod helpers of this suite.
type agent struct {
	*harness.Agent
	endpoint string // empty: the embedded runtime in-process
}

// newAgent prepares directories for an agent named name; endpoint is the CRI
// endpoint it is given (empty: none, the embedded runtime in-process).
func newAgent(t testing.TB, name, endpoint string) *agent {
	t.Helper()
	return &agent{endpoint: endpoint, Agent: harness.NewAgent(t, harness.AgentConfig{
		Name: name, Dir: filepath.Join(flags.Base, name), Binary: flags.Wasmlet, Suite: "e2e",
		Env: strings.Fields(*agentEnvFlag), CachePods: true,
	})}
}

// start runs `wasmlet run` with the suite's node name, the agent's endpoint
// and -agent-flags, and waits until /healthz answers 200.
func (a *agent) start(t testing.TB) {
	t.Helper()
	args := []string{"--node-name", nodeName}
	if a.endpoint != "" {
		args = append(args, "--container-runtime-endpoint", a.endpoint)
	}
	a.Start(t, append(args, strings.Fields(*agentFlagsFlag)...)...)
}

// pod returns the static pod made from a manifest whose metadata.name is
// name (it is named <name>-<node>), or nil when /pods does not list it.
func (a *agent) pod(name string) (*v1.Pod, error) {
	l, err := a.Pods()
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

// containerLog returns the log file of a pod's container at a restart count
// in the kubelet's layout.
func (a *agent) containerLog(p *v1.Pod, container string, restarts int32) string {
	return filepath.Join(a.Logs, fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID), container, fmt.Sprintf("%d.log", restarts))
}

// diagnose registers a cleanup that, when t failed, logs the agent's log
// tail, its /pods summary and the runtime's sandboxes and containers.
func (a *agent) diagnose(t *testing.T) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		var b strings.Builder
		fmt.Fprintf(&b, "--- agent %s log (%s), last lines:\n%s\n", a.Name, a.LogFile, a.LogTail(60))
		if l, err := a.Pods(); err != nil {
			fmt.Fprintf(&b, "--- /pods: %v\n", err)
		} else {
			fmt.Fprintf(&b, "--- /pods:\n")
			for i := range l.Items {
				fmt.Fprintf(&b, "%s\n", harness.PodSummary(&l.Items[i]))
			}
		}
		fmt.Fprintf(&b, "--- runtime %s:\n", flags.Endpoint)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rt.Dump(ctx, &b)
		cancel()
		t.Log(b.String())
	})
}

// waitPod waits until the static pod named name satisfies cond and returns it.
func (a *agent) waitPod(t testing.TB, name string, timeout time.Duration, what string, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var got *v1.Pod
	harness.Eventually(t, timeout, fmt.Sprintf("pod %s: %s", staticName(name), what), func() (bool, string) {
		p, err := a.pod(name)
		if err != nil {
			return false, err.Error()
		}
		got = p
		return p != nil && cond(p), harness.PodSummary(p)
	})
	return got
}

// waitRunning waits until the pod is Running with every container running
// and ready.
func (a *agent) waitRunning(t testing.TB, name string, timeout time.Duration) *v1.Pod {
	t.Helper()
	return a.waitPod(t, name, timeout, "Running, all containers running", allRunning)
}

// allRunning is harness.Running with every container's ID set.
func allRunning(p *v1.Pod) bool {
	if !harness.Running(p) {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.ContainerID == "" {
			return false
		}
	}
	return true
}

// waitGone waits until /pods no longer lists the pod.
func (a *agent) waitGone(t testing.TB, name string, timeout time.Duration) {
	t.Helper()
	harness.Eventually(t, timeout, fmt.Sprintf("pod %s gone from /pods", staticName(name)), func() (bool, string) {
		p, err := a.pod(name)
		if err != nil {
			return false, err.Error()
		}
		return p == nil, harness.PodSummary(p)
	})
}

// readFileEventually waits until file exists and contains want, returning
// its content.
func readFileEventually(t testing.TB, file, want string, timeout time.Duration) string {
	t.Helper()
	var content string
	harness.Eventually(t, timeout, fmt.Sprintf("%q in %s", want, file), func() (bool, string) {
		b, err := os.ReadFile(file)
		if err != nil {
			return false, err.Error()
		}
		content = string(b)
		return strings.Contains(content, want), harness.Tail(content, 400)
	})
	return content
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
