//go:build e2e_apiserver

package e2eapi

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

// poolNode is the node TestNodePool registers: a name of its own, so its
// Node is created with the pool's taints.
const poolNode = "wasmlet-pool"

// TestNodePool: a node an operator puts in a pool, joined with only
// --kubeconfig (no --client-ca-file):
//
//  1. it registers with its labels, taints, provider ID and reserved
//     resources, as `kubectl get node -o json` shows them: allocatable is
//     capacity less kube-reserved, system-reserved and the memory.available
//     and nodefs.available hard eviction thresholds;
//  2. `kubectl logs` reaches its kubelet API, whose client CA is the
//     kubeconfig's cluster CA, as the agent's log says at start;
//  3. a label in the kubernetes.io namespace a node may not set stops the
//     agent at start with a message naming it.
func TestNodePool(t *testing.T) {
	if *kubectlFlag == "" {
		t.Skip("no -kubectl")
	}
	out, err := exec.Command(filepath.Join(flags.Hack, "apiserver", "cluster.sh"), "node", *clusterFlag, poolNode).CombinedOutput()
	if err != nil {
		t.Fatalf("cluster.sh node: %v\n%s", err, out)
	}
	kubeconfig := strings.TrimSpace(string(out))
	a := &agent{Agent: harness.NewAgent(t, harness.AgentConfig{
		Name: "wasmlet-pool", Dir: filepath.Join(flags.Base, "pool"), Binary: flags.Wasmlet, Suite: "e2eapi",
	}), apiPort: harness.FreePort(t)}
	a.Start(t, "--node-name", poolNode, "--kubeconfig", kubeconfig, "--port", strconv.Itoa(a.apiPort),
		"--container-runtime-endpoint", flags.Endpoint, "--log-level", "debug",
		"--node-labels", "pool=gpu,node.kubernetes.io/tier=batch",
		"--register-with-taints", "dedicated=gpu:NoSchedule,spot:PreferNoSchedule",
		"--provider-id", "wasmlet://e2e/"+poolNode,
		"--kube-reserved", "cpu=100m,memory=128Mi",
		"--system-reserved", "memory=64Mi,ephemeral-storage=1Gi",
		"--eviction-hard", "memory.available<100Mi,nodefs.available<10%,pid.available<5%")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("wasmlet-pool log tail:\n%s", a.LogTail(60))
		}
		a.Stop(t)
		ctx, cancel := ctxT(30 * time.Second)
		defer cancel()
		admin.CoreV1().Pods("default").Delete(ctx, "pool-talker", metav1.DeleteOptions{})
		admin.CoreV1().Nodes().Delete(ctx, poolNode, metav1.DeleteOptions{})
	})

	// 1. The Node as kubectl shows it.
	var node v1.Node
	harness.Eventually(t, 60*time.Second, "the pool node through kubectl", func() (bool, string) {
		r := kubectl(t, 30*time.Second, "", "get", "node", poolNode, "-o", "json")
		if r.code != 0 {
			return false, r.stderr
		}
		if err := json.Unmarshal([]byte(r.stdout), &node); err != nil {
			return false, err.Error()
		}
		_, ok := node.Status.Allocatable[v1.ResourceMemory]
		return ok, "no allocatable memory yet"
	})
	for k, want := range map[string]string{"pool": "gpu", "node.kubernetes.io/tier": "batch", v1.LabelHostname: poolNode} {
		if got, ok := node.Labels[k]; !ok || got != want {
			t.Errorf("label %s = %q, want %q (labels %v)", k, got, want, node.Labels)
		}
	}
	var taints []string
	for _, tt := range node.Spec.Taints {
		taints = append(taints, tt.ToString())
	}
	// The node lifecycle controller may add its own (not-ready while the
	// node is new).
	if !slices.Contains(taints, "dedicated=gpu:NoSchedule") || !slices.Contains(taints, "spot:PreferNoSchedule") {
		t.Errorf("taints %v, want dedicated=gpu:NoSchedule and spot:PreferNoSchedule", taints)
	}
	if node.Spec.ProviderID != "wasmlet://e2e/"+poolNode {
		t.Errorf("providerID %q", node.Spec.ProviderID)
	}
	capacity, alloc := node.Status.Capacity, node.Status.Allocatable
	mem, storage, cpu := capacity[v1.ResourceMemory], capacity[v1.ResourceEphemeralStorage], capacity[v1.ResourceCPU]
	// The kubelet's arithmetic: 10% is the float32 0.1 of the capacity.
	nodefs := int64(float64(storage.Value()) * float64(float32(10)/100))
	for _, c := range []struct {
		name v1.ResourceName
		want int64 // milli-units for cpu, bytes else
	}{
		{v1.ResourceMemory, mem.Value() - 128<<20 - 64<<20 - 100<<20},
		{v1.ResourceEphemeralStorage, storage.Value() - 1<<30 - nodefs},
		{v1.ResourceCPU, cpu.MilliValue() - 100},
	} {
		q := alloc[c.name]
		got := q.Value()
		if c.name == v1.ResourceCPU {
			got = q.MilliValue()
		}
		if got != c.want {
			t.Errorf("allocatable %s = %s, want %d (capacity %v)", c.name, q.String(), c.want, capacity)
		}
	}
	if p, q := alloc[v1.ResourcePods], capacity[v1.ResourcePods]; p.Cmp(q) != 0 {
		t.Errorf("allocatable pods %s, capacity %s: want them equal", p.String(), q.String())
	}
	t.Logf("figure: capacity memory %s ephemeral-storage %s cpu %s; allocatable memory %s ephemeral-storage %s cpu %s",
		mem.String(), storage.String(), cpu.String(), ptrQ(alloc[v1.ResourceMemory]), ptrQ(alloc[v1.ResourceEphemeralStorage]), ptrQ(alloc[v1.ResourceCPU]))

	// 2. kubectl logs through the API server to the kubelet API, whose
	// client CA is the kubeconfig's cluster CA.
	if !a.LogContains(`client_ca="the cluster CA of kubeconfig `) && !a.LogContains("client_ca="+filepath.Join(*clusterFlag, "pki", "ca.crt")) {
		t.Errorf("the agent's log names no client CA for the kubelet API:\n%s", a.LogTail(40))
	}
	if !a.LogContains("authorization_mode=Webhook") {
		t.Errorf("the agent's log names no authorization mode")
	}
	pod := newPod("pool-talker", "echo", "from-the-pool", ";", "log", "300ms", "tick")
	pod.Spec.NodeName = poolNode
	createPod(t, pod)
	waitPod(t, "default", "pool-talker", 90*time.Second, "Running", harness.Running)
	harness.Eventually(t, 30*time.Second, "kubectl logs", func() (bool, string) {
		r := kubectl(t, 30*time.Second, "", "logs", "pool-talker", "-c", "main")
		return r.code == 0 && strings.HasPrefix(r.stdout, "from-the-pool\n"), r.stdout + r.stderr
	})

	// 3. A label NodeRestriction would refuse stops the agent at start.
	dir := t.TempDir()
	cmd := exec.Command(flags.Wasmlet, "run", "--node-name", poolNode, "--kubeconfig", kubeconfig,
		"--root-dir", filepath.Join(dir, "root"), "--read-only-port", "0", "--healthz-port", "0", "--port", "0",
		"--container-runtime-endpoint", flags.Endpoint, "--node-labels", "pool=gpu,node-role.kubernetes.io/worker=")
	cmd.Env = os.Environ()
	done := make(chan struct{})
	var runOut []byte
	go func() { runOut, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("wasmlet run with a refused label still runs after 60 s:\n%s", runOut)
	}
	if err == nil || !strings.Contains(string(runOut), `label "node-role.kubernetes.io/worker"`) || !strings.Contains(string(runOut), "NodeRestriction") {
		t.Errorf("wasmlet run with node-role.kubernetes.io/worker: %v\n%s\nwant a failure naming the label", err, runOut)
	}
}

// ptrQ formats a quantity for a log line.
func ptrQ(q resource.Quantity) string { return q.String() }
