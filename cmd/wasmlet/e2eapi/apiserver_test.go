//go:build e2e_apiserver

package e2eapi

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

// TestAPIServer runs the cases in order against one agent joined to the
// cluster; later cases restart the API server and the agent.
func TestAPIServer(t *testing.T) {
	a := newAgent(t)
	a.start(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("wasmlet log tail:\n%s", a.LogTail(60))
		}
		a.Stop(t)
	})
	for _, c := range []struct {
		name     string
		f        func(*testing.T, *agent)
		runtimes []string // nil: every runtime
	}{
		{"NodeReadyAndLease", testNodeReady, nil},
		{"PodRunsAndDeletes", testPodRunsAndDeletes, nil},
		{"MirrorPod", testMirrorPod, nil},
		{"AdmissionRejection", testRejection, nil},
		{"ServiceAccountToken", testServiceAccountToken, nil},
		{"ConfigMapAndSecret", testConfigMapAndSecret, nil},
		{"ProjectedVolume", testProjected, nil},
		{"MissingKeys", testMissingKeys, nil},
		{"ContainerLogs", testContainerLogs, nil},
		{"EphemeralContainer", testEphemeralContainer, nil},
		// The exec probe runs the image's /testbox, a native binary.
		{"LivenessEvents", testLivenessEvents, []string{"containerd"}},
		{"EmptyDirEviction", testEmptyDirEviction, nil},
		{"ContainerStorageEviction", testContainerStorageEviction, nil},
		{"ActiveDeadline", testActiveDeadline, nil},
		{"RuntimeClass", testRuntimeClass, nil},
		{"Kubectl", testKubectl, nil},
		{"APIServerRestart", testAPIServerRestart, nil},
		{"AgentRestart", testAgentRestart, nil},
		{"Figures", testFigures, nil},
	} {
		if c.runtimes != nil && !slices.Contains(c.runtimes, flags.Runtime) {
			t.Logf("%s applies to runtime %v only, not run on %s", c.name, c.runtimes, flags.Runtime)
			continue
		}
		if !t.Run(c.name, func(t *testing.T) { c.f(t, a) }) {
			t.Logf("wasmlet log tail after %s:\n%s", c.name, a.LogTail(40))
		}
	}
}

// 1. The Node appears and turns Ready; its Lease is renewed.
func testNodeReady(t *testing.T, _ *agent) {
	var node *v1.Node
	harness.Eventually(t, 60*time.Second, "node Ready", func() (bool, string) {
		ctx, cancel := ctxT(5 * time.Second)
		defer cancel()
		n, err := admin.CoreV1().Nodes().Get(ctx, *nodeFlag, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		node = n
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.Status == v1.ConditionTrue, fmt.Sprintf("Ready=%s %s", c.Status, c.Message)
			}
		}
		return false, "no Ready condition"
	})
	if node.Labels[v1.LabelHostname] != *nodeFlag || node.Labels[v1.LabelOSStable] != "linux" || node.Labels[v1.LabelArchStable] == "" {
		t.Errorf("node labels %v: want hostname, os and arch", node.Labels)
	}
	for _, c := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		found := false
		for _, x := range node.Status.Conditions {
			if x.Type == c {
				found = x.Status == v1.ConditionFalse
			}
		}
		if !found {
			t.Errorf("node condition %s: want False, conditions %v", c, node.Status.Conditions)
		}
	}
	info := node.Status.NodeInfo
	if info.ContainerRuntimeVersion == "" || !strings.Contains(info.ContainerRuntimeVersion, "://") || info.KubeletVersion == "" {
		t.Errorf("nodeInfo runtime %q kubelet %q: want both, the runtime as name://version", info.ContainerRuntimeVersion, info.KubeletVersion)
	}
	if _, ok := node.Status.Allocatable[v1.ResourcePods]; !ok || node.Status.Capacity.Cpu().IsZero() || node.Status.Capacity.Memory().IsZero() {
		t.Errorf("node capacity %v allocatable %v: want cpu, memory and pods", node.Status.Capacity, node.Status.Allocatable)
	}
	if len(node.Status.Addresses) == 0 {
		t.Errorf("node has no addresses")
	}

	var first *coordinationv1.Lease
	harness.Eventually(t, 30*time.Second, "node lease", func() (bool, string) {
		ctx, cancel := ctxT(5 * time.Second)
		defer cancel()
		l, err := admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, *nodeFlag, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		first = l
		return true, ""
	})
	if first.Spec.HolderIdentity == nil || *first.Spec.HolderIdentity != *nodeFlag || first.Spec.LeaseDurationSeconds == nil || *first.Spec.LeaseDurationSeconds != 40 {
		t.Errorf("lease spec %+v: want holder %s, duration 40 s", first.Spec, *nodeFlag)
	}
	if len(first.OwnerReferences) != 1 || first.OwnerReferences[0].Kind != "Node" || first.OwnerReferences[0].UID != node.UID {
		t.Errorf("lease owner references %v: want the Node (uid %s)", first.OwnerReferences, node.UID)
	}
	harness.Eventually(t, 25*time.Second, "lease renewed", func() (bool, string) {
		ctx, cancel := ctxT(5 * time.Second)
		defer cancel()
		l, err := admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, *nodeFlag, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return l.Spec.RenewTime.After(first.Spec.RenewTime.Time), fmt.Sprintf("renewTime %v (first %v)", l.Spec.RenewTime, first.Spec.RenewTime)
	})
}

// 2 and 3. A pod bound to the node runs and its status shows; deleting it
// kills it gracefully and the object disappears.
func testPodRunsAndDeletes(t *testing.T, a *agent) {
	ctx, cancel := ctxT(time.Minute)
	defer cancel()
	if _, err := admin.CoreV1().Pods("default").Create(ctx, newPod("web", "log", "200ms", "hello"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, "default", "web", 60*time.Second, "Running", harness.Running)
	cs := p.Status.ContainerStatuses[0]
	if cs.Name != "main" || !cs.Ready || cs.ContainerID == "" || cs.ImageID == "" && cs.Image == "" || cs.RestartCount != 0 {
		t.Errorf("container status %+v: want main, ready, an ID and image, no restarts", cs)
	}
	if p.Status.PodIP == "" || p.Status.HostIP == "" || p.Status.StartTime == nil || p.Status.QOSClass == "" {
		t.Errorf("pod status: podIP %q hostIP %q startTime %v qos %q: want all set", p.Status.PodIP, p.Status.HostIP, p.Status.StartTime, p.Status.QOSClass)
	}
	for _, c := range []v1.PodConditionType{v1.PodInitialized, v1.ContainersReady, v1.PodReady} {
		if s := condition(p, c); s != v1.ConditionTrue {
			t.Errorf("condition %s = %q, want True", c, s)
		}
	}
	// Nothing changes, so nothing is written: not even by the 10 s resync
	// of the status sync (the log line prints every 200 ms, the status
	// stays the same).
	quiet, err := admin.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=web", ResourceVersion: p.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	// Let the patches still under way land (the watch shows them), then
	// expect silence for longer than the resync period.
	settle := time.After(2 * time.Second)
	for done := false; !done; {
		select {
		case ev := <-quiet.ResultChan():
			if np, ok := ev.Object.(*v1.Pod); ok {
				p = np
			}
		case <-settle:
			done = true
		}
	}
	silence := time.After(12 * time.Second)
	for done := false; !done; {
		select {
		case ev := <-quiet.ResultChan():
			if np, ok := ev.Object.(*v1.Pod); ok {
				t.Errorf("pod written although nothing changed (%s): %s", ev.Type, harness.PodSummary(np))
			}
		case <-silence:
			done = true
		}
	}
	quiet.Stop()
	// The agent's own view agrees.
	found := 0
	for _, lp := range a.localPods(t) {
		if lp.UID == p.UID {
			found++
		}
	}
	if found != 1 {
		t.Errorf("agent /pods has pod web %d times, want once", found)
	}

	start := time.Now()
	if err := admin.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "default", "web", 60*time.Second)
	took := time.Since(start)
	t.Logf("deleted pod gone from the API server after %v (grace period 3 s)", took.Round(time.Millisecond))
	if flags.Runtime == "containerd" {
		// testbox prints this on SIGTERM: the kill was graceful.
		log := containerLog(t, a, p, "main")
		if !strings.Contains(log, "testbox: terminated") {
			t.Errorf("container log has no graceful-termination line:\n%s", log)
		}
	}
	harness.Eventually(t, 10*time.Second, "pod gone from the agent's /pods", func() (bool, string) {
		for _, lp := range a.localPods(t) {
			if lp.UID == p.UID {
				return false, "still there"
			}
		}
		return true, ""
	})
}

func containerLog(t *testing.T, a *agent, p *v1.Pod, container string) string {
	path := fmt.Sprintf("%s/%s_%s_%s/%s/0.log", a.Logs, p.Namespace, p.Name, p.UID, container)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("container log: %v", err)
	}
	return string(b)
}

// 4. A static pod's mirror pod appears with the annotation and the Node as
// owner, shows the static pod's status, and comes back after an admin
// deletes it; removing the manifest deletes the mirror.
func testMirrorPod(t *testing.T, a *agent) {
	static := newPod("static", "log", "200ms", "static-hello")
	static.Spec.NodeName = ""
	a.Write(t, "static.yaml", static)
	name := "static-" + *nodeFlag
	m := waitPod(t, "default", name, 60*time.Second, "mirror Running", harness.Running)
	if m.Annotations["kubernetes.io/config.mirror"] == "" || m.Annotations["kubernetes.io/config.source"] != "file" {
		t.Errorf("mirror annotations %v: want config.mirror and config.source=file", m.Annotations)
	}
	ctx, cancel := ctxT(time.Minute)
	defer cancel()
	node, err := admin.CoreV1().Nodes().Get(ctx, *nodeFlag, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.OwnerReferences) != 1 || m.OwnerReferences[0].Kind != "Node" || m.OwnerReferences[0].UID != node.UID ||
		m.OwnerReferences[0].Controller == nil || !*m.OwnerReferences[0].Controller {
		t.Errorf("mirror owner references %+v: want the Node %s as controller", m.OwnerReferences, node.UID)
	}
	if m.Spec.ServiceAccountName != "" {
		t.Errorf("mirror service account %q, want none", m.Spec.ServiceAccountName)
	}
	// The status is the static pod's: the same container ID as the agent runs.
	var local *v1.Pod
	for _, lp := range a.localPods(t) {
		if lp.Name == name {
			local = &lp
		}
	}
	if local == nil {
		t.Fatalf("agent /pods has no %s", name)
	}
	if local.UID == m.UID {
		t.Errorf("mirror UID %s equals the static pod's: want the API server's own", m.UID)
	}
	if got, want := m.Status.ContainerStatuses[0].ContainerID, local.Status.ContainerStatuses[0].ContainerID; got != want {
		t.Errorf("mirror container ID %q, static pod's %q", got, want)
	}

	if err := admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	again := waitPod(t, "default", name, 60*time.Second, "recreated and Running", func(p *v1.Pod) bool {
		return p.UID != m.UID && p.DeletionTimestamp == nil && harness.Running(p)
	})
	if got := again.Status.ContainerStatuses[0].ContainerID; got != local.Status.ContainerStatuses[0].ContainerID {
		t.Errorf("after the mirror's deletion the container changed (%s → %s): the static pod must keep running", local.Status.ContainerStatuses[0].ContainerID, got)
	}
	// The manifest changes: a new static pod (new hash), so a new mirror.
	changed := newPod("static", "log", "300ms", "static-changed")
	changed.Spec.NodeName = ""
	a.Write(t, "static.yaml", changed)
	third := waitPod(t, "default", name, 60*time.Second, "replaced by the changed static pod's mirror, Running", func(p *v1.Pod) bool {
		return p.UID != again.UID && p.DeletionTimestamp == nil && harness.Running(p) &&
			p.Annotations["kubernetes.io/config.mirror"] != again.Annotations["kubernetes.io/config.mirror"]
	})
	if got := strings.Join(third.Spec.Containers[0].Args, " "); got != "log 300ms static-changed" {
		t.Errorf("new mirror's args %q, want the changed manifest's", got)
	}
	if err := os.Remove(a.Manifests + "/static.yaml"); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "default", name, 60*time.Second)
}

// 5. A pod the node cannot admit shows phase Failed with the reason, and a
// Warning event.
func testRejection(t *testing.T, _ *agent) {
	p := newPod("toobig", "sleep", "inf")
	p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("100000")
	ctx, cancel := ctxT(time.Minute)
	defer cancel()
	created, err := admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := waitPod(t, "default", "toobig", 30*time.Second, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if got.Status.Reason != "OutOfcpu" || got.Status.Message == "" {
		t.Errorf("rejected pod reason %q message %q: want OutOfcpu and a message", got.Status.Reason, got.Status.Message)
	}
	harness.Eventually(t, 20*time.Second, "a Warning event OutOfcpu", func() (bool, string) {
		l, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(created.UID)})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range l.Items {
			if e.Type == v1.EventTypeWarning && e.Reason == "OutOfcpu" && e.Source.Component == "wasmlet" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(l.Items))
	})
	if err := admin.CoreV1().Pods("default").Delete(ctx, "toobig", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "default", "toobig", 30*time.Second)
}

// 6. The API server restarted mid-run: no pod lost or duplicated, the watch
// resumes (a pod created and one deleted after the restart are seen).
func testAPIServerRestart(t *testing.T, a *agent) {
	ctx, cancel := ctxT(2 * time.Minute)
	defer cancel()
	for _, n := range []string{"keep", "gone"} {
		if _, err := admin.CoreV1().Pods("default").Create(ctx, newPod(n, "log", "500ms", n), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	keep := waitPod(t, "default", "keep", 60*time.Second, "Running", harness.Running)
	waitPod(t, "default", "gone", 60*time.Second, "Running", harness.Running)

	cluster(t, "stop-apiserver")
	time.Sleep(3 * time.Second)
	cluster(t, "start-apiserver")

	if _, err := admin.CoreV1().Pods("default").Create(ctx, newPod("after", "log", "500ms", "after"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := admin.CoreV1().Pods("default").Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, "default", "after", 60*time.Second, "Running after the restart", harness.Running)
	waitGone(t, "default", "gone", 60*time.Second)
	now := waitPod(t, "default", "keep", 10*time.Second, "still Running", harness.Running)
	if now.Status.ContainerStatuses[0].ContainerID != keep.Status.ContainerStatuses[0].ContainerID || now.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("pod keep: container %s restarts %d, was %s: the restart must not touch running pods",
			now.Status.ContainerStatuses[0].ContainerID, now.Status.ContainerStatuses[0].RestartCount, keep.Status.ContainerStatuses[0].ContainerID)
	}
	harness.Eventually(t, 15*time.Second, "agent runs keep and after once each, not gone", func() (bool, string) {
		count := map[string]int{}
		for _, lp := range a.localPods(t) {
			count[lp.Name]++
		}
		return count["keep"] == 1 && count["after"] == 1 && count["gone"] == 0, fmt.Sprint(count)
	})
	for _, n := range []string{"keep", "after"} {
		if err := admin.CoreV1().Pods("default").Delete(ctx, n, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"keep", "after"} {
		waitGone(t, "default", n, 60*time.Second)
	}
}

// 7. wasmlet restarted: running pods are not restarted and their statuses
// stay right (no other phase is ever written meanwhile).
func testAgentRestart(t *testing.T, a *agent) {
	ctx, cancel := ctxT(2 * time.Minute)
	defer cancel()
	if _, err := admin.CoreV1().Pods("default").Create(ctx, newPod("steady", "log", "500ms", "steady"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := waitPod(t, "default", "steady", 60*time.Second, "Running", harness.Running)
	w, err := admin.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=steady", ResourceVersion: before.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	a.Stop(t)
	a.start(t)
	// Watch what gets written for a while after the restart.
	deadline := time.After(8 * time.Second)
	for done := false; !done; {
		select {
		case ev := <-w.ResultChan():
			if p, ok := ev.Object.(*v1.Pod); ok && !harness.Running(p) {
				t.Errorf("after the agent restart the pod was written as %s", harness.PodSummary(p))
			}
		case <-deadline:
			done = true
		}
	}
	after := waitPod(t, "default", "steady", 10*time.Second, "Running", harness.Running)
	b, c := before.Status.ContainerStatuses[0], after.Status.ContainerStatuses[0]
	if b.ContainerID != c.ContainerID || c.RestartCount != 0 || !after.Status.StartTime.Equal(before.Status.StartTime) {
		t.Errorf("after the agent restart: container %s restarts %d start %v; before %s, start %v",
			c.ContainerID, c.RestartCount, after.Status.StartTime, b.ContainerID, before.Status.StartTime)
	}
	if err := admin.CoreV1().Pods("default").Delete(ctx, "steady", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "default", "steady", 60*time.Second)
}
