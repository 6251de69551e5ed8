//go:build e2e_apiserver

package e2eapi

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

var (
	flags       = harness.RegisterFlags(flag.CommandLine, "embedded")
	clusterFlag = flag.String("cluster", "", "the directory of hack/apiserver/cluster.sh up")
	nodeFlag    = flag.String("node", "wasmlet-e2e", "the node's name (cluster.sh node made its kubeconfig)")
)

var (
	admin       kubernetes.Interface
	adminConfig *rest.Config
)

func TestMain(m *testing.M) {
	flag.Parse()
	harness.PollEvery = 50 * time.Millisecond
	if *clusterFlag == "" {
		fmt.Fprintln(os.Stderr, "e2eapi: -cluster is required (run hack/e2e-apiserver.sh)")
		os.Exit(2)
	}
	if err := flags.Check("e2eapi"); err != nil {
		fmt.Fprintf(os.Stderr, "%v (run hack/e2e-apiserver.sh)\n", err)
		os.Exit(2)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(*clusterFlag, "admin.kubeconfig"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2eapi:", err)
		os.Exit(2)
	}
	rc.QPS, rc.Burst = 200, 400
	admin = kubernetes.NewForConfigOrDie(rc)
	adminConfig = rc
	os.Exit(m.Run())
}

// agent is one `wasmlet run` (harness.Agent) joined to the cluster with the
// node's certificate.
// Its kubelet API listens on a free port (the node advertises it), with
// the cluster's CA for the API server's client certificate.
type agent struct {
	*harness.Agent
	apiPort  int
	endpoint string // the CRI endpoint it runs against
}

func newAgent(t testing.TB) *agent {
	return newAgentOn(t, filepath.Join(flags.Base, "agent"), flags.Endpoint)
}

// newAgentOn is an agent with its directories under dir, against the CRI
// endpoint ep.
func newAgentOn(t testing.TB, dir, ep string) *agent {
	return &agent{Agent: harness.NewAgent(t, harness.AgentConfig{
		Name: "wasmlet", Dir: dir, Binary: flags.Wasmlet, Suite: "e2eapi",
	}), apiPort: harness.FreePort(t), endpoint: ep}
}

// start runs the agent with the node's kubeconfig against the runtime under
// test, and the extra flags, and waits until /healthz answers 200.
func (a *agent) start(t testing.TB, extra ...string) {
	t.Helper()
	args := []string{"--node-name", *nodeFlag,
		"--kubeconfig", filepath.Join(*clusterFlag, "node-"+*nodeFlag+".kubeconfig"),
		"--port", strconv.Itoa(a.apiPort), "--client-ca-file", filepath.Join(*clusterFlag, "pki", "ca.crt"),
		"--container-runtime-endpoint", a.endpoint, "--log-level", "debug",
		// Small enough for the log rotation case's chatty container to
		// rotate within seconds, large enough for every other case's logs.
		"--container-log-max-size", "64Ki", "--container-log-max-files", "3",
		// Volume walks reused for 10 s, not a minute: evictions come sooner.
		"--volume-stats-agg-period", "10s"}
	a.Start(t, append(args, extra...)...)
}

// localPods is the agent's own /pods.
func (a *agent) localPods(t testing.TB) []v1.Pod {
	l, err := a.Pods()
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// metric sums the samples of a metric in /metrics whose line contains all
// of match; a metric with no samples yet counts 0.
func (a *agent) metric(t testing.TB, name string, match ...string) float64 {
	v, err := a.Metric(name, match...)
	if err != nil && !errors.Is(err, harness.ErrNoMetric) {
		t.Fatal(err)
	}
	return v
}

func cluster(t testing.TB, cmd string) {
	t.Helper()
	out, err := exec.Command(filepath.Join(flags.Hack, "apiserver", "cluster.sh"), cmd, *clusterFlag).CombinedOutput()
	if err != nil {
		t.Fatalf("cluster.sh %s: %v\n%s", cmd, err, out)
	}
}

// newPod is a testbox pod bound to the node, written as a user would:
// the default ServiceAccount, so the API server adds the projected
// kube-api-access volume.
func newPod(name string, args ...string) *v1.Pod {
	return &v1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
		Spec: v1.PodSpec{
			NodeName:                      *nodeFlag,
			RestartPolicy:                 v1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To(int64(3)),
			Tolerations:                   []v1.Toleration{{Operator: v1.TolerationOpExists}},
			Containers: []v1.Container{{
				Name: "main", Image: flags.Image, ImagePullPolicy: v1.PullNever, Args: args,
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m")}},
			}},
		},
	}
}

func ctxT(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

func condition(p *v1.Pod, c v1.PodConditionType) v1.ConditionStatus {
	for _, x := range p.Status.Conditions {
		if x.Type == c {
			return x.Status
		}
	}
	return ""
}

// waitPod polls the API server (as the admin) until cond holds.
func waitPod(t testing.TB, ns, name string, timeout time.Duration, what string, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var got *v1.Pod
	harness.Eventually(t, timeout, fmt.Sprintf("pod %s/%s %s", ns, name, what), func() (bool, string) {
		ctx, cancel := ctxT(5 * time.Second)
		defer cancel()
		p, err := admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got = p
		return cond(p), harness.PodSummary(p)
	})
	return got
}

func waitGone(t testing.TB, ns, name string, timeout time.Duration) {
	t.Helper()
	harness.Eventually(t, timeout, fmt.Sprintf("pod %s/%s gone", ns, name), func() (bool, string) {
		ctx, cancel := ctxT(5 * time.Second)
		defer cancel()
		p, err := admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return strings.Contains(err.Error(), "not found"), err.Error()
		}
		return false, harness.PodSummary(p)
	})
}
