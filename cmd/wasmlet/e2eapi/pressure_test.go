//go:build e2e_apiserver

package e2eapi

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

// memoryAvailable is memory.available as the agent reads it
// (harness.MemoryAvailable).
func memoryAvailable(t *testing.T) int64 {
	t.Helper()
	n, err := harness.MemoryAvailable()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// nodeCondition is the status and reason of one of the node's
// conditions.
func nodeCondition(t *testing.T, c v1.NodeConditionType) (v1.ConditionStatus, string) {
	x, err := nodeConditionOf(c)
	if err != nil {
		return "", err.Error()
	}
	return x.Status, x.Reason
}

// nodeConditionOf is one of the node's conditions.
func nodeConditionOf(c v1.NodeConditionType) (*v1.NodeCondition, error) {
	ctx, cancel := ctxT(10 * time.Second)
	defer cancel()
	n, err := admin.CoreV1().Nodes().Get(ctx, *nodeFlag, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == c {
			return &n.Status.Conditions[i], nil
		}
	}
	return nil, fmt.Errorf("node %s has no condition %s", *nodeFlag, c)
}

// TestPressure: memory pressure made on purpose. The agent's hard
// memory.available threshold is set 512 MiB under what is available at
// the start, with a 10 s transition period; a Guaranteed pod runs, then a
// BestEffort pod allocates 1.5 GiB. The node reports MemoryPressure, the
// BestEffort pod is evicted with the kubelet's message, Evicted event and
// DisruptionTarget condition, the Node gets EvictionThresholdMet, the
// eviction is counted by signal; once the pod's memory is freed and the
// transition period has passed MemoryPressure is False again, and the
// Guaranteed pod ran on without a restart.
func TestPressure(t *testing.T) {
	if flags.Runtime != "containerd" {
		t.Skip("containerd only: the embedded runtime's pods live in the runtime's process, so their memory is not theirs to rank or free by a kill")
	}
	available := memoryAvailable(t)
	threshold := available - 512<<20
	a := newAgent(t)
	a.start(t, "--eviction-hard", "memory.available<"+strconv.FormatInt(threshold, 10),
		"--eviction-pressure-transition-period", "10s")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log tail:\n%s", a.LogTail(80))
		}
		a.Stop(t)
	})
	t.Logf("memory.available at start %d MiB, threshold %d MiB", available>>20, threshold>>20)
	harness.Eventually(t, 60*time.Second, "node MemoryPressure False", func() (bool, string) {
		s, r := nodeCondition(t, v1.NodeMemoryPressure)
		return s == v1.ConditionFalse, string(s) + " " + r
	})

	steady := newPod("guaranteed", "sleep", "inf")
	q := v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m"), v1.ResourceMemory: resource.MustParse("64Mi")}
	steady.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: q, Limits: q}
	createPod(t, steady)
	t.Cleanup(func() { deletePod(t, steady.Name) })
	waitPod(t, "default", steady.Name, 120*time.Second, "Running", harness.Running)

	before := a.metric(t, "wasmlet_evictions_total", `eviction_signal="memory.available"`)
	hog := newPod("besteffort-hog", "oom", "1536", ";", "sleep", "inf")
	hog.Spec.Containers[0].Resources = v1.ResourceRequirements{}
	hog.Spec.TerminationGracePeriodSeconds = ptr.To(int64(3))
	createPod(t, hog)
	t.Cleanup(func() { deletePod(t, hog.Name) })

	harness.Eventually(t, 120*time.Second, "node MemoryPressure True", func() (bool, string) {
		s, r := nodeCondition(t, v1.NodeMemoryPressure)
		return s == v1.ConditionTrue && r == "KubeletHasInsufficientMemory", string(s) + " " + r
	})
	got := waitPod(t, "default", hog.Name, 120*time.Second, "Failed/Evicted", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	checkEvicted(t, got, "memory")
	if !strings.Contains(got.Status.Message, "Container main was using ") || !strings.HasSuffix(got.Status.Message, "request is 0, has larger consumption of memory. ") {
		t.Errorf("evicted pod: message %q, want the kubelet's memory message naming the container", got.Status.Message)
	}
	if m := a.metric(t, "wasmlet_evictions_total", `eviction_signal="memory.available"`); m != before+1 {
		t.Errorf("wasmlet_evictions_total{eviction_signal=\"memory.available\"} = %v, want %v", m, before+1)
	}

	harness.Eventually(t, 120*time.Second, "node MemoryPressure False after the transition period", func() (bool, string) {
		s, r := nodeCondition(t, v1.NodeMemoryPressure)
		return s == v1.ConditionFalse, string(s) + " " + r
	})
	g := waitPod(t, "default", steady.Name, 30*time.Second, "Running", harness.Running)
	if cs := g.Status.ContainerStatuses; len(cs) != 1 || cs[0].RestartCount != 0 || cs[0].State.Running == nil {
		t.Errorf("the Guaranteed pod after the eviction: %+v, want running, never restarted", cs)
	}
}

// checkEvicted checks a pod evicted for node pressure on resource as the
// kubelet leaves it: reason Evicted, the kubelet's message
// ("The node was low on resource: <resource>. Threshold quantity: …"), a
// DisruptionTarget condition of reason TerminationByKubelet with that
// message, a Warning event Evicted of the pod with it and a Warning event
// EvictionThresholdMet of the Node ("Attempting to reclaim <resource>").
func checkEvicted(t *testing.T, p *v1.Pod, resource string) {
	t.Helper()
	prefix := "The node was low on resource: " + resource + ". Threshold quantity: "
	if p.Status.Reason != "Evicted" || !strings.HasPrefix(p.Status.Message, prefix) {
		t.Errorf("evicted pod: reason %q message %q, want Evicted and a message beginning %q", p.Status.Reason, p.Status.Message, prefix)
	}
	var dt *v1.PodCondition
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == v1.DisruptionTarget {
			dt = &p.Status.Conditions[i]
		}
	}
	if dt == nil || dt.Status != v1.ConditionTrue || dt.Reason != v1.PodReasonTerminationByKubelet || dt.Message != p.Status.Message {
		t.Errorf("DisruptionTarget condition %+v, want True, TerminationByKubelet, the eviction message", dt)
	}
	waitEvent(t, p.Name, v1.EventTypeWarning, "Evicted", p.Status.Message)
	waitEvent(t, *nodeFlag, v1.EventTypeWarning, "EvictionThresholdMet", "Attempting to reclaim "+resource)
}
