//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

// TestE2E runs the cases in a fixed order: first those that share one
// agent (in parallel), then those that need an agent of their own. Only one
// agent runs against the runtime at a time, because an agent owns the
// runtime's pods and would clean up another agent's as orphans.
func TestE2E(t *testing.T) {
	sharedCases, out1 := forRuntime([]suiteCase[func(*testing.T, *agent)]{
		{"StaticPod", nil, testStaticPod},
		{"ManifestChange", nil, testManifestChange},
		{"RestartAlways", nil, testRestartAlways},
		{"RestartOnFailure", nil, testRestartOnFailure},
		{"RestartNever", nil, testRestartNever},
		{"InitContainers", nil, testInitContainers},
		// WASI has no signals: the embedded runtime stops a workload by
		// closing its module.
		{"GracefulKill", containerdOnly, testGracefulKill},
		{"BrokenManifest", nil, testBrokenManifest},
		{"AdmissionReject", nil, testAdmissionReject},
		// Probes, hooks, security context and resources run busybox.
		{"Probes", containerdOnly, testProbes},
		{"LifecycleHooks", containerdOnly, testLifecycleHooks},
		{"RunAsNonRoot", containerdOnly, testRunAsNonRoot},
		{"Resources", containerdOnly, testResources},
	})
	ownCases, out2 := forRuntime([]suiteCase[func(*testing.T)]{
		{"AgentRestart", nil, testAgentRestart},
		{"RuntimeRestart", containerdOnly, testRuntimeRestart},
		{"EmbeddedInProcess", embeddedOnly, testEmbeddedInProcess},
		// The figures are taken on containerd.
		{"Figures", containerdOnly, testFigures},
	})
	if out := append(out1, out2...); len(out) > 0 {
		t.Logf("cases not applicable to runtime %s, not run: %s", flags.Runtime, strings.Join(out, ", "))
	}
	t.Run("shared", func(t *testing.T) {
		shared := newAgent(t, "shared", flags.Endpoint)
		shared.start(t)
		t.Cleanup(func() { shared.Stop(t) })
		for _, c := range sharedCases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				shared.diagnose(t)
				c.f(t, shared)
			})
		}
	})
	cleanRuntime(t)

	for _, c := range ownCases {
		t.Run(c.name, c.f)
		cleanRuntime(t)
	}
}

// Runtime sets for suiteCase.runtimes.
var (
	containerdOnly = []string{"containerd"}
	embeddedOnly   = []string{"embedded"}
)

// suiteCase is one case of a table and the runtimes it applies to (nil:
// every runtime).
type suiteCase[F any] struct {
	name     string
	runtimes []string
	f        F
}

// forRuntime returns the cases that apply to -runtime, so that a case
// which cannot apply is not registered at all (rather than skipped), and
// the names of those it left out.
func forRuntime[F any](cases []suiteCase[F]) (kept []suiteCase[F], out []string) {
	for _, c := range cases {
		if c.runtimes == nil || slices.Contains(c.runtimes, flags.Runtime) {
			kept = append(kept, c)
		} else {
			out = append(out, c.name+" ("+strings.Join(c.runtimes, ",")+" only)")
		}
	}
	return kept, out
}

// cleanRuntime removes whatever pods are left in the runtime between
// phases, so one case's leftovers cannot disturb the next.
func cleanRuntime(t *testing.T) {
	ctx, cancel := withTimeout(2 * time.Minute)
	defer cancel()
	if err := rt.RemoveAll(ctx, 2); err != nil {
		t.Logf("cleaning the runtime: %v", err)
	}
}

// 1. A static pod manifest → container Running, its log line in the log
// file, /pods shows it; the kubelet's CRI labels, annotations and log
// layout on the real containers.
func testStaticPod(t *testing.T, a *agent) {
	p := newPod("static", v1.RestartPolicyAlways, box("main", "log", "200ms", "static-hello"))
	if *busyboxFlag != "" {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{
			Name: "shell", Image: *busyboxFlag, ImagePullPolicy: v1.PullIfNotPresent,
			Command: []string{"/bin/sh", "-c", "echo shell-hello; exec sleep 3600"},
		})
	}
	a.Write(t, "static.yaml", p)
	got := a.waitRunning(t, "static", 60*time.Second)

	if got.Namespace != "default" || got.Spec.NodeName != nodeName {
		t.Errorf("pod %s: namespace %q nodeName %q, want default and %s", got.Name, got.Namespace, got.Spec.NodeName, nodeName)
	}
	if len(got.UID) != 32 || got.Annotations["kubernetes.io/config.hash"] != string(got.UID) {
		t.Errorf("pod %s: UID %q, config.hash %q; want the 32-hex config hash in both", got.Name, got.UID, got.Annotations["kubernetes.io/config.hash"])
	}
	if s := got.Annotations["kubernetes.io/config.source"]; s != "file" {
		t.Errorf("pod %s: config.source %q, want file", got.Name, s)
	}
	if _, err := time.Parse(time.RFC3339Nano, got.Annotations["kubernetes.io/config.seen"]); err != nil {
		t.Errorf("pod %s: config.seen %q: %v", got.Name, got.Annotations["kubernetes.io/config.seen"], err)
	}
	for _, c := range []v1.PodConditionType{v1.PodScheduled, v1.PodInitialized, v1.ContainersReady, v1.PodReady} {
		if s := condition(got, c); s != v1.ConditionTrue {
			t.Errorf("pod %s: condition %s is %q, want True", got.Name, c, s)
		}
	}
	if got.Status.PodIP == "" || got.Status.StartTime == nil {
		t.Errorf("pod %s: podIP %q startTime %v, want both set", got.Name, got.Status.PodIP, got.Status.StartTime)
	}

	// The log line, in the CRI log format, where the kubelet puts it.
	logFile := a.containerLog(got, "main", 0)
	content := readFileEventually(t, logFile, "static-hello 1", 30*time.Second)
	if !regexp.MustCompile(`(?m)^\S+ stdout F static-hello 1$`).MatchString(content) {
		t.Errorf("%s: no CRI-format line `<time> stdout F static-hello 1`:\n%s", logFile, harness.Tail(content, 400))
	}
	if *busyboxFlag != "" {
		readFileEventually(t, a.containerLog(got, "shell", 0), "shell-hello", 30*time.Second)
	}

	// What ctr/crictl users see: the kubelet's labels and annotations.
	sbs := podSandboxes(t, "static")
	if len(sbs) != 1 {
		t.Fatalf("pod %s: %d sandboxes in the runtime, want 1", got.Name, len(sbs))
	}
	sb := sbs[0]
	wantPodLabels := map[string]string{labelPodName: got.Name, labelPodNamespace: "default", labelPodUID: string(got.UID), "app": "static"}
	checkLabels(t, "sandbox", sb.Labels, wantPodLabels)
	if m := sb.GetMetadata(); m.GetName() != got.Name || m.GetNamespace() != "default" || m.GetUid() != string(got.UID) {
		t.Errorf("sandbox metadata %v, want name %s namespace default uid %s", m, got.Name, got.UID)
	}
	if sb.Annotations["kubernetes.io/config.source"] != "file" || sb.Annotations["kubernetes.io/config.hash"] != string(got.UID) {
		t.Errorf("sandbox annotations %v, want the pod's config.source and config.hash", sb.Annotations)
	}
	for _, name := range containerNames(got) {
		cs := status(got, name)
		st := containerStatus(t, runtimeID(cs.ContainerID))
		if st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("container %s: runtime state %s, want running", name, st.State)
		}
		if !strings.Contains(cs.ContainerID, "://") {
			t.Errorf("container %s: ID %q, want <runtime>://<id>", name, cs.ContainerID)
		}
		want := map[string]string{labelPodName: got.Name, labelPodNamespace: "default", labelPodUID: string(got.UID), labelContainerName: name}
		checkLabels(t, "container "+name, st.Labels, want)
		ann := st.Annotations
		if !regexp.MustCompile(`^[0-9a-f]{1,16}$`).MatchString(ann["io.kubernetes.container.hash"]) {
			t.Errorf("container %s: annotation io.kubernetes.container.hash %q, want hex", name, ann["io.kubernetes.container.hash"])
		}
		for k, v := range map[string]string{
			"io.kubernetes.container.restartCount":             "0",
			"io.kubernetes.container.terminationMessagePath":   "/dev/termination-log",
			"io.kubernetes.container.terminationMessagePolicy": "File",
			"io.kubernetes.pod.terminationGracePeriod":         "5",
		} {
			if ann[k] != v {
				t.Errorf("container %s: annotation %s = %q, want %q", name, k, ann[k], v)
			}
		}
		if want := a.containerLog(got, name, 0); st.LogPath != want {
			t.Errorf("container %s: log path %q, want %q", name, st.LogPath, want)
		}
		// The kubelet's log symlink, for collectors of /var/log/containers.
		link := filepath.Join(a.LogLinks, fmt.Sprintf("%s_%s_%s-%s.log", got.Name, got.Namespace, name, runtimeID(cs.ContainerID)))
		if target, err := os.Readlink(link); err != nil || target != st.LogPath {
			t.Errorf("container %s: log symlink %s → %q, %v; want → %s", name, link, target, err, st.LogPath)
		}
	}

	// /metrics: the sync loop turns, the pod's start and the PLEG relists
	// are counted.
	for _, name := range []string{"wasmlet_sync_loop_iterations_total", "wasmlet_pod_start_duration_seconds_count", "wasmlet_pleg_relist_duration_seconds_count"} {
		harness.Eventually(t, 30*time.Second, "/metrics: "+name+" > 0", func() (bool, string) {
			v, err := a.Metric(name)
			return err == nil && v > 0, fmt.Sprint(v, err)
		})
	}
	// /stats/summary on the read-only port too, as the kubelet serves it:
	// the node and this pod with its containers.
	harness.Eventually(t, 30*time.Second, "/stats/summary lists the pod", func() (bool, string) {
		code, body, err := a.Get("/stats/summary")
		if err != nil || code != http.StatusOK {
			return false, fmt.Sprint(code, err, string(body))
		}
		var sum statsapi.Summary
		if err := json.Unmarshal(body, &sum); err != nil {
			return false, err.Error()
		}
		for _, ps := range sum.Pods {
			if ps.PodRef.UID == string(got.UID) {
				return sum.Node.NodeName == nodeName && len(ps.Containers) > 0, fmt.Sprintf("node %q, containers %d", sum.Node.NodeName, len(ps.Containers))
			}
		}
		return false, fmt.Sprintf("%d pods, not this one", len(sum.Pods))
	})
	a.Remove(t, "static.yaml")
	a.waitGone(t, "static", 60*time.Second)
}

func checkLabels(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: label %s = %q, want %q (labels %v)", what, k, got[k], v, got)
		}
	}
}

func containerNames(p *v1.Pod) []string {
	var names []string
	for _, c := range p.Spec.Containers {
		names = append(names, c.Name)
	}
	return names
}

// 2. Manifest changed → the pod is recreated with the new spec; manifest
// removed → its containers and sandbox are gone from the runtime.
func testManifestChange(t *testing.T, a *agent) {
	a.Write(t, "change.yaml", newPod("change", v1.RestartPolicyAlways, box("main", "log", "200ms", "version-one")))
	old := a.waitRunning(t, "change", 60*time.Second)
	oldID := runtimeID(status(old, "main").ContainerID)
	readFileEventually(t, a.containerLog(old, "main", 0), "version-one 1", 30*time.Second)

	a.Write(t, "change.yaml", newPod("change", v1.RestartPolicyAlways, box("main", "log", "200ms", "version-two")))
	updated := a.waitPod(t, "change", 60*time.Second, "running with the new spec", func(p *v1.Pod) bool {
		return allRunning(p) && runtimeID(status(p, "main").ContainerID) != oldID &&
			len(p.Spec.Containers) == 1 && strings.Join(p.Spec.Containers[0].Args, " ") == "log 200ms version-two"
	})
	if updated.UID == old.UID {
		t.Errorf("pod %s: UID unchanged (%s) although the manifest changed; static pod UIDs hash the content", updated.Name, old.UID)
	}
	readFileEventually(t, a.containerLog(updated, "main", 0), "version-two 1", 30*time.Second)
	newID := runtimeID(status(updated, "main").ContainerID)
	if st := containerStatus(t, newID); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING || st.Labels[labelPodUID] != string(updated.UID) {
		t.Fatalf("new container %s: runtime state %s, pod UID label %q; want running, %s", newID, st.State, st.Labels[labelPodUID], updated.UID)
	}
	if n := len(podContainers(t, "change")); n == 0 {
		t.Fatalf("the runtime lists no container labelled %s=%s", labelPodName, staticName("change"))
	}
	harness.Eventually(t, 60*time.Second, "the old container stopped", func() (bool, string) {
		for _, c := range podContainers(t, "change") {
			if c.Id == oldID {
				return c.State != runtimeapi.ContainerState_CONTAINER_RUNNING, c.State.String()
			}
		}
		return true, "removed"
	})

	a.Remove(t, "change.yaml")
	a.waitGone(t, "change", 60*time.Second)
	waitRuntimeStopped(t, "change", 60*time.Second)
	// The kubelet removes a deleted pod's sandbox in a cleanup that runs
	// once a minute: allow that much.
	waitRuntimeGone(t, "change", 90*time.Second)
}

// 3a. restartPolicy Always: an exiting container restarts with a growing
// back-off and a rising restart count; the pod stays Running.
func testRestartAlways(t *testing.T, a *agent) {
	a.Write(t, "always.yaml", newPod("always", v1.RestartPolicyAlways, box("main", "echo", "up", ";", "sleep", "1s", ";", "exit", "1")))
	// gaps[n] is the time between the end of run n-1 and the start of run n,
	// read off /pods (lastState.finishedAt → state.startedAt).
	gaps := map[int32]time.Duration{}
	sawBackOff := false
	a.waitPod(t, "always", 150*time.Second, "restart count 3", func(p *v1.Pod) bool {
		cs := status(p, "main")
		if cs == nil {
			return false
		}
		if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			t.Fatalf("pod %s: phase %s under restartPolicy Always", p.Name, p.Status.Phase)
		}
		if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
			sawBackOff = true
		}
		if r, last := cs.State.Running, cs.LastTerminationState.Terminated; r != nil && last != nil && cs.RestartCount > 0 {
			if last.ExitCode != 1 {
				t.Errorf("pod %s: last exit code %d, want 1", p.Name, last.ExitCode)
			}
			gaps[cs.RestartCount] = r.StartedAt.Sub(last.FinishedAt.Time)
		}
		return cs.RestartCount >= 3 && gaps[3] != 0
	})
	t.Logf("restart gaps (run n-1 finished → run n started): %v", gaps)
	if gaps[2] < 5*time.Second || gaps[3] <= gaps[2] {
		t.Errorf("back-off: gap before restart 2 = %v (want ≥ 5s, the kubelet's is 10s), before restart 3 = %v (want longer)", gaps[2], gaps[3])
	}
	if !sawBackOff {
		t.Errorf("never saw the container waiting with reason CrashLoopBackOff between restarts")
	}
	a.Remove(t, "always.yaml")
	a.waitGone(t, "always", 60*time.Second)
}

// 3b. restartPolicy OnFailure: success ends the pod Succeeded with no
// restart; failure restarts the container.
func testRestartOnFailure(t *testing.T, a *agent) {
	a.Write(t, "onfail-ok.yaml", newPod("onfail-ok", v1.RestartPolicyOnFailure, box("main", "echo", "done", ";", "exit", "0")))
	a.Write(t, "onfail-bad.yaml", newPod("onfail-bad", v1.RestartPolicyOnFailure, box("main", "echo", "failing", ";", "exit", "3")))
	ok := a.waitPod(t, "onfail-ok", 60*time.Second, "Succeeded", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
	checkTerminated(t, ok, "main", 0, "Completed")
	bad := a.waitPod(t, "onfail-bad", 60*time.Second, "restarted after exit 3", func(p *v1.Pod) bool {
		cs := status(p, "main")
		if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			t.Fatalf("pod %s: phase %s; a failing OnFailure pod restarts", p.Name, p.Status.Phase)
		}
		return cs != nil && cs.RestartCount >= 1
	})
	if last := status(bad, "main").LastTerminationState.Terminated; last == nil || last.ExitCode != 3 {
		t.Errorf("pod %s: last termination %+v, want exit code 3", bad.Name, last)
	}
	a.staysTerminal(t, "onfail-ok", v1.PodSucceeded)
	a.Remove(t, "onfail-ok.yaml")
	a.Remove(t, "onfail-bad.yaml")
	a.waitGone(t, "onfail-ok", 60*time.Second)
	a.waitGone(t, "onfail-bad", 60*time.Second)
}

// 3c. restartPolicy Never: exit 0 → Succeeded, exit 3 → Failed, no restart.
func testRestartNever(t *testing.T, a *agent) {
	a.Write(t, "never-ok.yaml", newPod("never-ok", v1.RestartPolicyNever, box("main", "echo", "done", ";", "exit", "0")))
	a.Write(t, "never-bad.yaml", newPod("never-bad", v1.RestartPolicyNever, box("main", "echo", "failing", ";", "exit", "3")))
	ok := a.waitPod(t, "never-ok", 60*time.Second, "Succeeded", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
	checkTerminated(t, ok, "main", 0, "Completed")
	bad := a.waitPod(t, "never-bad", 60*time.Second, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	checkTerminated(t, bad, "main", 3, "Error")
	a.staysTerminal(t, "never-bad", v1.PodFailed)
	if n := len(podContainers(t, "never-bad")); n != 1 {
		t.Errorf("pod %s: %d containers in the runtime, want the 1 that ran", staticName("never-bad"), n)
	}
	a.Remove(t, "never-ok.yaml")
	a.Remove(t, "never-bad.yaml")
	a.waitGone(t, "never-ok", 60*time.Second)
	a.waitGone(t, "never-bad", 60*time.Second)
}

// staysTerminal watches a finished pod for three seconds (three relists
// and syncs): it must keep its phase and its container must not restart.
func (a *agent) staysTerminal(t *testing.T, name string, phase v1.PodPhase) {
	t.Helper()
	harness.Holds(t, 3*time.Second, fmt.Sprintf("%s stays %s with 0 restarts", staticName(name), phase), func() (bool, string) {
		p, err := a.pod(name)
		if err != nil || p == nil {
			return false, fmt.Sprint(err, harness.PodSummary(p))
		}
		return p.Status.Phase == phase && status(p, "main").RestartCount == 0, harness.PodSummary(p)
	})
}

func checkTerminated(t *testing.T, p *v1.Pod, container string, code int32, reason string) {
	t.Helper()
	cs := status(p, container)
	if cs == nil || cs.State.Terminated == nil {
		t.Errorf("pod %s: container %s not terminated: %s", p.Name, container, harness.PodSummary(p))
		return
	}
	if term := cs.State.Terminated; term.ExitCode != code || term.Reason != reason || cs.RestartCount != 0 {
		t.Errorf("pod %s: container %s terminated exit=%d reason=%q restarts=%d, want exit=%d reason=%q restarts=0",
			p.Name, container, term.ExitCode, term.Reason, cs.RestartCount, code, reason)
	}
}

// 4. Init containers run to completion, in order, before the app
// containers: each appends to a file in an emptyDir, the app cats it.
func testInitContainers(t *testing.T, a *agent) {
	p := newPod("init", v1.RestartPolicyAlways, box("main", "cat", "/work/order", ";", "sleep", "inf"))
	p.Spec.InitContainers = []v1.Container{
		box("first", "sleep", "1s", ";", "append", "/work/order", "first"),
		box("second", "append", "/work/order", "second"),
	}
	p.Spec.Volumes = []v1.Volume{{Name: "work", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	mount := []v1.VolumeMount{{Name: "work", MountPath: "/work"}}
	for i := range p.Spec.InitContainers {
		p.Spec.InitContainers[i].VolumeMounts = mount
	}
	p.Spec.Containers[0].VolumeMounts = mount
	a.Write(t, "init.yaml", p)
	got := a.waitRunning(t, "init", 60*time.Second)
	if s := condition(got, v1.PodInitialized); s != v1.ConditionTrue {
		t.Errorf("pod %s: Initialized %q, want True", got.Name, s)
	}
	first, second, main := status(got, "first"), status(got, "second"), status(got, "main")
	for _, cs := range []*v1.ContainerStatus{first, second} {
		if cs == nil || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 || cs.State.Terminated.Reason != "Completed" {
			t.Fatalf("pod %s: init containers not completed: %s", got.Name, harness.PodSummary(got))
		}
	}
	if !first.State.Terminated.FinishedAt.Time.After(first.State.Terminated.StartedAt.Time) ||
		second.State.Terminated.StartedAt.Before(&first.State.Terminated.FinishedAt) ||
		main.State.Running.StartedAt.Before(&second.State.Terminated.FinishedAt) {
		t.Errorf("pod %s: out of order: first %v–%v, second %v–%v, main started %v", got.Name,
			first.State.Terminated.StartedAt, first.State.Terminated.FinishedAt,
			second.State.Terminated.StartedAt, second.State.Terminated.FinishedAt, main.State.Running.StartedAt)
	}
	content := readFileEventually(t, a.containerLog(got, "main", 0), "second", 30*time.Second)
	if !regexp.MustCompile(`stdout F first\n.*stdout F second\n`).MatchString(content) {
		t.Errorf("pod %s: main's log does not show first then second:\n%s", got.Name, content)
	}
	a.Remove(t, "init.yaml")
	a.waitGone(t, "init", 60*time.Second)
}

// Graceful kill: removing the pod sends SIGTERM first; testbox logs it.
func testGracefulKill(t *testing.T, a *agent) {
	a.Write(t, "graceful.yaml", newPod("graceful", v1.RestartPolicyAlways, box("main", "log", "100ms", "tick")))
	got := a.waitRunning(t, "graceful", 60*time.Second)
	logFile := a.containerLog(got, "main", 0)
	readFileEventually(t, logFile, "tick 1", 30*time.Second)
	// Keep the file open: the agent may remove the log with the container,
	// the open file still shows what the container wrote last.
	f, err := os.Open(logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	start := time.Now()
	a.Remove(t, "graceful.yaml")
	harness.Eventually(t, 30*time.Second, "testbox: terminated in the log after the pod's removal", func() (bool, string) {
		fi, err := f.Stat()
		if err != nil {
			return false, err.Error()
		}
		b := make([]byte, fi.Size())
		n, _ := f.ReadAt(b, 0)
		return strings.Contains(string(b[:n]), "stdout F testbox: terminated"), harness.Tail(string(b[:n]), 200)
	})
	// The log line above is the claim (only SIGTERM makes testbox write
	// it); how long it took is a figure, which a loaded machine may stretch.
	t.Logf("FIGURE graceful stop: removal → \"terminated\" in the log %v", time.Since(start).Round(time.Millisecond))
	a.waitGone(t, "graceful", 60*time.Second)
}

// 7. A broken manifest → an error naming the file in the agent's log; the
// other pods are untouched.
func testBrokenManifest(t *testing.T, a *agent) {
	a.Write(t, "bystander.yaml", newPod("bystander", v1.RestartPolicyAlways, box("main", "log", "1s", "still here")))
	before := a.waitRunning(t, "bystander", 60*time.Second)
	beforeID := status(before, "main").ContainerID

	a.WriteRaw(t, "broken-manifest.yaml", []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: [broken\nspec:\n  containers: 7\n"))
	harness.Eventually(t, 60*time.Second, "an error naming broken-manifest.yaml in the agent's log", func() (bool, string) {
		return a.LogContains("broken-manifest.yaml"), ""
	})
	after, err := a.pod("bystander")
	if err != nil || after == nil || !allRunning(after) || status(after, "main").ContainerID != beforeID || status(after, "main").RestartCount != 0 {
		t.Errorf("bystander disturbed by the broken manifest: before %s, after %s (%v)", harness.PodSummary(before), harness.PodSummary(after), err)
	}
	if st := containerStatus(t, runtimeID(beforeID)); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("bystander container %s is %s in the runtime", beforeID, st.State)
	}
	a.Remove(t, "broken-manifest.yaml")
	a.Remove(t, "bystander.yaml")
	a.waitGone(t, "bystander", 60*time.Second)
}

// Admission: a pod requesting more CPU than the node has is rejected by
// the resource-fit admitter — phase Failed with the kubelet's reason, an
// event in the log, a metric — and nothing of it reaches the runtime.
func testAdmissionReject(t *testing.T, a *agent) {
	c := box("main", "sleep", "inf")
	c.Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1000")}
	a.Write(t, "toobig.yaml", newPod("toobig", v1.RestartPolicyAlways, c))
	got := a.waitPod(t, "toobig", 60*time.Second, "Failed (rejected)", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if got.Status.Reason != "OutOfcpu" || !strings.Contains(got.Status.Message, "cpu") {
		t.Errorf("pod %s: reason %q message %q, want OutOfcpu and a message about cpu", got.Name, got.Status.Reason, got.Status.Message)
	}
	harness.Eventually(t, 30*time.Second, "the rejection in the agent's log and metrics", func() (bool, string) {
		v, err := a.Metric("wasmlet_admission_results_total", `result="reject"`)
		return a.LogContains(staticName("toobig")) && err == nil && v > 0, fmt.Sprint(v, err)
	})
	if n := len(podSandboxes(t, "toobig")); n != 0 {
		t.Errorf("pod %s: %d sandboxes in the runtime; a rejected pod must not run", got.Name, n)
	}
	a.Remove(t, "toobig.yaml")
	a.waitGone(t, "toobig", 60*time.Second)
}

// 5. The agent killed with 10 pods running and started again → no
// container restarted: same container IDs, restart counts unchanged.
func testAgentRestart(t *testing.T) {
	a := newAgent(t, "restart", flags.Endpoint)
	a.start(t)
	defer a.Stop(t)
	a.diagnose(t)
	names := make([]string, 10)
	for i := range names {
		names[i] = fmt.Sprintf("keep%d", i)
		a.Write(t, names[i]+".yaml", hostNet(newPod(names[i], v1.RestartPolicyAlways, box("main", "log", "2s", "alive"))))
	}
	ids := map[string]string{}
	for _, n := range names {
		ids[n] = status(a.waitRunning(t, n, 120*time.Second), "main").ContainerID
	}
	before := runtimeSnapshot(t, names)
	checkSnapshot(t, before, len(names))

	a.Kill(t)
	if diff := diffSnapshots(before, runtimeSnapshot(t, names)); diff != "" {
		t.Fatalf("containers changed when the agent died: %s", diff)
	}
	a.start(t)
	for _, n := range names {
		a.waitPod(t, n, 60*time.Second, "Running with the same container, 0 restarts", func(p *v1.Pod) bool {
			cs := status(p, "main")
			return allRunning(p) && cs.ContainerID == ids[n] && cs.RestartCount == 0
		})
	}
	// Three PLEG relists and syncs' worth of watching: nothing may change.
	harness.Holds(t, 3*time.Second, "the runtime's containers as before the agent restart", func() (bool, string) {
		d := diffSnapshots(before, runtimeSnapshot(t, names))
		return d == "", d
	})
}

// 6. containerd stopped and started again → the agent reconnects and the
// pods are kept.
func testRuntimeRestart(t *testing.T) {
	if *ctrdBaseFlag == "" {
		t.Fatal("-containerd-base (a containerd this suite may restart) is required on containerd")
	}
	a := newAgent(t, "ctrd-restart", flags.Endpoint)
	a.start(t)
	defer a.Stop(t)
	a.diagnose(t)
	names := []string{"kept0", "kept1", "kept2"}
	ids := map[string]string{}
	for _, n := range names {
		a.Write(t, n+".yaml", hostNet(newPod(n, v1.RestartPolicyAlways, box("main", "log", "2s", "alive"))))
	}
	for _, n := range names {
		ids[n] = status(a.waitRunning(t, n, 60*time.Second), "main").ContainerID
	}
	before := runtimeSnapshot(t, names)
	checkSnapshot(t, before, len(names))

	restartContainerd(t)
	if !a.Running() {
		t.Fatalf("the agent exited when containerd went away")
	}
	harness.Eventually(t, 60*time.Second, "agent /healthz 200 after the containerd restart", func() (bool, string) {
		code, body, err := a.Get("/healthz")
		return err == nil && code == 200, fmt.Sprint(code, string(body), err)
	})
	for _, n := range names {
		a.waitPod(t, n, 60*time.Second, "Running with the same container", func(p *v1.Pod) bool {
			cs := status(p, "main")
			return allRunning(p) && cs.ContainerID == ids[n] && cs.RestartCount == 0
		})
	}
	// The agent works on the new connection: a new pod starts.
	a.Write(t, "after.yaml", hostNet(newPod("after", v1.RestartPolicyAlways, box("main", "log", "2s", "alive"))))
	a.waitRunning(t, "after", 60*time.Second)
	harness.Holds(t, 3*time.Second, "the runtime's containers as before the containerd restart", func() (bool, string) {
		d := diffSnapshots(before, runtimeSnapshot(t, names))
		return d == "", d
	})
}

// restartContainerd stops the suite's containerd by its PID (its shims and
// containers keep running) and starts it again with hack/containerd/up.sh.
func restartContainerd(t *testing.T) {
	env, err := os.ReadFile(filepath.Join(*ctrdBaseFlag, "env"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^PID=(\d+)$`).FindSubmatch(env)
	if m == nil {
		t.Fatalf("no PID in %s/env", *ctrdBaseFlag)
	}
	pid, _ := strconv.Atoi(string(m[1]))
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatalf("stopping containerd %d: %v", pid, err)
	}
	harness.Eventually(t, 30*time.Second, fmt.Sprintf("containerd %d exited", pid), func() (bool, string) {
		return syscall.Kill(pid, 0) != nil, ""
	})
	out, err := exec.Command(filepath.Join(flags.Hack, "containerd", "up.sh"), *ctrdBaseFlag).CombinedOutput()
	if err != nil {
		t.Fatalf("restarting containerd: %v\n%s", err, out)
	}
	ctx, cancel := withTimeout(30 * time.Second)
	defer cancel()
	if err := rt.WaitReady(ctx); err != nil {
		t.Fatalf("containerd after restart: %v", err)
	}
}

// The embedded runtime in-process (`wasmlet run` with no endpoint, what
// `make run` does): a pod runs and logs.
func testEmbeddedInProcess(t *testing.T) {
	a := newAgent(t, "inproc", "")
	a.start(t)
	defer a.Stop(t)
	a.diagnose(t)
	if *wasmFlag == "" {
		t.Fatal("-wasm (testbox.wasm) is required for the embedded runtime")
	}
	// The agent's own runtime has an empty image store: the image is
	// referenced by path and pulled (imported) from the file.
	c := box("main", "log", "200ms", "in-process")
	c.Image = *wasmFlag
	a.Write(t, "hello.yaml", newPod("hello", v1.RestartPolicyAlways, c))
	got := a.waitRunning(t, "hello", 60*time.Second)
	readFileEventually(t, a.containerLog(got, "main", 0), "in-process 1", 30*time.Second)
	a.Remove(t, "hello.yaml")
	a.waitGone(t, "hello", 60*time.Second)
}
