//go:build e2e

package e2e

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

// idle is a shell script that waits for SIGTERM (a shell as PID 1 would
// otherwise ignore it and hold its pod for the whole grace period).
const idle = "trap 'exit 0' TERM; sleep 3600 & wait"

// tmp is an emptyDir at /tmp: the busybox image has only /bin.
func tmp(c v1.Container) v1.Container {
	c.VolumeMounts = append(c.VolumeMounts, v1.VolumeMount{Name: "tmp", MountPath: "/tmp"})
	return c
}

// withTmp gives the pod the emptyDir tmp mounts.
func withTmp(p *v1.Pod) *v1.Pod {
	p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "tmp", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	return p
}

// shell is a busybox container running script.
func shell(name, script string) v1.Container {
	return v1.Container{Name: name, Image: *busyboxFlag, ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"/bin/sh", "-c", script}}
}

// execProbe is an exec probe every second with the given failure threshold.
func execProbe(failures int32, cmd ...string) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: cmd}}, PeriodSeconds: 1, FailureThreshold: failures, TimeoutSeconds: 5}
}

// execIn runs cmd in the pod's named container through the runtime, as a
// user of the node would with crictl exec.
func execIn(t *testing.T, p *v1.Pod, container string, cmd ...string) string {
	t.Helper()
	cs := status(p, container)
	if cs == nil || cs.ContainerID == "" {
		t.Fatalf("pod %s: container %s has no ID", p.Name, container)
	}
	_, id, _ := strings.Cut(cs.ContainerID, "://")
	ctx, cancel := withTimeout(30 * time.Second)
	defer cancel()
	stdout, stderr, err := rt.Runtime.ExecSync(ctx, id, cmd, 20*time.Second)
	if err != nil {
		t.Fatalf("exec %v in %s/%s: %v (%s)", cmd, p.Name, container, err, stderr)
	}
	return string(stdout)
}

func ready(p *v1.Pod, container string) bool {
	cs := status(p, container)
	return cs != nil && cs.Ready
}

// 13. Probes: a readiness probe gates Ready both ways; a liveness probe
// restarts a wedged container (restart count 1, the old instance's exit
// in lastState); a startup probe holds readiness back until it passes.
func testProbes(t *testing.T, a *agent) {
	readiness := shell("ready", idle)
	readiness.ReadinessProbe = execProbe(1, "cat", "/tmp/ready")
	liveness := shell("live", "touch /tmp/alive; "+idle)
	liveness.LivenessProbe = execProbe(2, "cat", "/tmp/alive")
	startup := shell("startup", idle)
	startup.StartupProbe = execProbe(1000, "cat", "/tmp/started")
	startup.ReadinessProbe = execProbe(1, "true")
	a.Write(t, "probes.yaml", withTmp(newPod("probes", v1.RestartPolicyAlways, tmp(readiness), tmp(liveness), tmp(startup))))

	running := func(p *v1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running == nil {
				return false
			}
		}
		return len(p.Status.ContainerStatuses) == 3
	}
	p := a.waitPod(t, "probes", 90*time.Second, "all three containers running", running)
	if ready(p, "ready") || ready(p, "startup") || condition(p, v1.PodReady) == v1.ConditionTrue {
		t.Errorf("before any probe passed: ready=%v startup ready=%v, pod Ready %s; want false, false, not True",
			ready(p, "ready"), ready(p, "startup"), condition(p, v1.PodReady))
	}
	if cs := status(p, "startup"); cs.Started == nil || *cs.Started {
		t.Errorf("startup container Started = %v before its startup probe passed, want false", cs.Started)
	}

	// Readiness, both ways.
	execIn(t, p, "ready", "touch", "/tmp/ready")
	a.waitPod(t, "probes", 60*time.Second, "container ready Ready once its probe passes", func(p *v1.Pod) bool { return ready(p, "ready") })
	execIn(t, p, "ready", "rm", "/tmp/ready")
	a.waitPod(t, "probes", 60*time.Second, "container ready not Ready once its probe fails", func(p *v1.Pod) bool { return !ready(p, "ready") })

	// Startup gates readiness (whose probe always passes) until it passes.
	p, _ = a.pod("probes")
	if ready(p, "startup") {
		t.Error("startup container Ready before its startup probe passed")
	}
	execIn(t, p, "startup", "touch", "/tmp/started")
	p = a.waitPod(t, "probes", 60*time.Second, "startup container started and Ready", func(p *v1.Pod) bool {
		cs := status(p, "startup")
		return cs.Started != nil && *cs.Started && cs.Ready
	})

	// Liveness: wedge the container; it is restarted once and runs again.
	if cs := status(p, "live"); cs.RestartCount != 0 {
		t.Fatalf("live restarted %d times before its probe failed", cs.RestartCount)
	}
	execIn(t, p, "live", "rm", "/tmp/alive")
	p = a.waitPod(t, "probes", 90*time.Second, "live restarted by its liveness probe and running again", func(p *v1.Pod) bool {
		cs := status(p, "live")
		return cs.RestartCount >= 1 && cs.State.Running != nil
	})
	cs := status(p, "live")
	if cs.RestartCount != 1 {
		t.Errorf("live restart count %d, want 1 (the new instance makes /tmp/alive and stays)", cs.RestartCount)
	}
	// The killed instance, stopped with SIGTERM (its shell exits 0 on it).
	if term := cs.LastTerminationState.Terminated; term == nil || term.ContainerID == "" || term.ContainerID == cs.ContainerID {
		t.Errorf("live last termination %+v, want the killed instance (current %s)", term, cs.ContainerID)
	}
	if rc := status(p, "ready").RestartCount + status(p, "startup").RestartCount; rc != 0 {
		t.Errorf("the other containers restarted %d times, want 0", rc)
	}
}

// hookServer counts the HTTP hook requests by path.
type hookServer struct {
	mu   sync.Mutex
	hits map[string]int
	port int
}

func newHookServer(t *testing.T) *hookServer {
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hookServer{hits: map[string]int{}, port: l.Addr().(*net.TCPAddr).Port}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.hits[r.URL.Path]++
		h.mu.Unlock()
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return h
}

func (h *hookServer) count(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hits[path]
}

// 14. Lifecycle hooks of each kind: postStart exec, httpGet and sleep run
// before the container counts as started; preStop exec, httpGet and sleep
// run when the pod is removed, within its grace period; a failing
// postStart kills the container, which restarts.
func testLifecycleHooks(t *testing.T, a *agent) {
	srv := newHookServer(t)
	dir := t.TempDir()
	httpHook := func(path string) *v1.LifecycleHandler {
		return &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: path, Port: intstr.FromInt32(int32(srv.port)), Host: "127.0.0.1"}}
	}
	execC := shell("exec", idle)
	execC.Lifecycle = &v1.Lifecycle{
		PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"/bin/sh", "-c", "echo post > /out/exec-poststart"}}},
		PreStop:   &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"/bin/sh", "-c", "echo pre > /out/exec-prestop"}}},
	}
	httpC := shell("http", idle)
	httpC.Lifecycle = &v1.Lifecycle{PostStart: httpHook("/poststart"), PreStop: httpHook("/prestop")}
	sleepC := shell("sleep", idle)
	sleepC.Lifecycle = &v1.Lifecycle{
		PostStart: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 1}},
		PreStop:   &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 3}},
	}
	for _, c := range []*v1.Container{&execC, &httpC, &sleepC} {
		c.VolumeMounts = []v1.VolumeMount{{Name: "out", MountPath: "/out"}}
	}
	p := hostNet(newPod("hooks", v1.RestartPolicyAlways, execC, httpC, sleepC))
	p.Spec.Volumes = []v1.Volume{{Name: "out", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir}}}}
	p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(30))
	a.Write(t, "hooks.yaml", p)
	a.waitRunning(t, "hooks", 90*time.Second)
	if b, err := os.ReadFile(filepath.Join(dir, "exec-poststart")); err != nil || strings.TrimSpace(string(b)) != "post" {
		t.Errorf("exec postStart: %q, %v", b, err)
	}
	if n := srv.count("/poststart"); n != 1 {
		t.Errorf("httpGet postStart requests: %d, want 1", n)
	}
	if n := srv.count("/prestop"); n != 0 {
		t.Errorf("httpGet preStop ran %d times while the pod runs", n)
	}

	start := time.Now()
	a.Remove(t, "hooks.yaml")
	waitRuntimeStopped(t, "hooks", 90*time.Second)
	stopped := time.Since(start)
	if b, err := os.ReadFile(filepath.Join(dir, "exec-prestop")); err != nil || strings.TrimSpace(string(b)) != "pre" {
		t.Errorf("exec preStop: %q, %v", b, err)
	}
	if n := srv.count("/prestop"); n != 1 {
		t.Errorf("httpGet preStop requests: %d, want 1", n)
	}
	// The sleep preStop holds its container for its 3 s: a lower bound a
	// busy machine can only lengthen.
	if stopped < 3*time.Second {
		t.Errorf("pod stopped %v after removal, before its 3 s preStop sleep ended", stopped)
	}
	t.Logf("figure: pod with three preStop hooks (one sleeping 3 s) stopped in %v", stopped.Round(10*time.Millisecond))

	// A failing postStart kills the container; it is restarted.
	bad := shell("bad", idle)
	bad.Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"/bin/sh", "-c", "exit 3"}}}}
	a.Write(t, "badhook.yaml", newPod("badhook", v1.RestartPolicyAlways, bad))
	a.waitPod(t, "badhook", 90*time.Second, "container restarted after its failed postStart hook", func(p *v1.Pod) bool {
		cs := status(p, "bad")
		return cs != nil && cs.RestartCount >= 1
	})
	a.Remove(t, "badhook.yaml")
}

// 15. runAsNonRoot with an image that runs as root: the container is not
// created, its waiting reason and message are the kubelet's.
func testRunAsNonRoot(t *testing.T, a *agent) {
	c := shell("root", idle)
	c.SecurityContext = &v1.SecurityContext{RunAsNonRoot: ptr.To(true)}
	a.Write(t, "nonroot.yaml", newPod("nonroot", v1.RestartPolicyAlways, c))
	p := a.waitPod(t, "nonroot", 60*time.Second, "container waiting with CreateContainerConfigError", func(p *v1.Pod) bool {
		cs := status(p, "root")
		return cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == "CreateContainerConfigError"
	})
	if msg := status(p, "root").State.Waiting.Message; !strings.Contains(msg, "container has runAsNonRoot and image will run as root") {
		t.Errorf("waiting message %q, want the kubelet's runAsNonRoot refusal", msg)
	}
	if n := len(podContainers(t, "nonroot")); n != 0 {
		t.Errorf("%d containers created, want none", n)
	}
	a.Remove(t, "nonroot.yaml")
}

// 16. Resources: a Guaranteed pod lands in its pod cgroup under kubepods
// with the pod's memory limit; a container past its memory limit is
// OOM-killed and reported OOMKilled, exit 137; a BestEffort pod lands
// under kubepods/besteffort with oom_score_adj 1000; pod cgroups go with
// their pods.
func testResources(t *testing.T, a *agent) {
	q := resource.MustParse
	res := v1.ResourceRequirements{
		Limits:   v1.ResourceList{v1.ResourceCPU: q("100m"), v1.ResourceMemory: q("32Mi")},
		Requests: v1.ResourceList{v1.ResourceCPU: q("100m"), v1.ResourceMemory: q("32Mi")},
	}
	steady := shell("steady", idle)
	hog := shell("hog", "sleep 2; exec dd if=/dev/zero of=/dev/null bs=128M count=4")
	steady.Resources, hog.Resources = res, res
	a.Write(t, "oom.yaml", newPod("oom", v1.RestartPolicyNever, steady, hog))
	p := a.waitPod(t, "oom", 90*time.Second, "hog terminated", func(p *v1.Pod) bool {
		cs := status(p, "hog")
		return cs != nil && cs.State.Terminated != nil
	})
	if p.Status.QOSClass != v1.PodQOSGuaranteed {
		t.Errorf("qosClass %s, want Guaranteed", p.Status.QOSClass)
	}
	if term := status(p, "hog").State.Terminated; term.Reason != "OOMKilled" || term.ExitCode != 137 {
		t.Errorf("hog terminated %s with exit %d, want OOMKilled and 137", term.Reason, term.ExitCode)
	}
	// The pod's cgroup: v1 (memory hierarchy) or v2 (unified).
	dirs := []string{"/sys/fs/cgroup/memory/kubepods/pod" + string(p.UID), "/sys/fs/cgroup/kubepods/pod" + string(p.UID)}
	limit := ""
	for _, d := range dirs {
		for _, f := range []string{"memory.limit_in_bytes", "memory.max"} {
			if b, err := os.ReadFile(filepath.Join(d, f)); err == nil {
				limit = strings.TrimSpace(string(b))
			}
		}
	}
	if want := strconv.Itoa(64 << 20); limit != want {
		t.Errorf("pod cgroup memory limit %q, want %s (the two containers' limits) in one of %v", limit, want, dirs)
	}
	cgroup := execIn(t, p, "steady", "cat", "/proc/1/cgroup")
	if !strings.Contains(cgroup, "/kubepods/pod"+string(p.UID)+"/") {
		t.Errorf("steady's cgroups are not under its pod cgroup /kubepods/pod%s:\n%s", p.UID, cgroup)
	}
	// A BestEffort pod: under kubepods/besteffort, oom_score_adj 1000 so
	// it dies first. (A Guaranteed container's -997 is asked for too, but
	// the test containerd runs with restrict_oom_score_adj, which keeps
	// a container's score from going below its own.)
	a.Write(t, "besteffort.yaml", newPod("besteffort", v1.RestartPolicyAlways, shell("main", idle)))
	be := a.waitRunning(t, "besteffort", 90*time.Second)
	if be.Status.QOSClass != v1.PodQOSBestEffort {
		t.Errorf("qosClass %s, want BestEffort", be.Status.QOSClass)
	}
	if adj := strings.TrimSpace(execIn(t, be, "main", "cat", "/proc/1/oom_score_adj")); adj != "1000" {
		t.Errorf("BestEffort container's oom_score_adj %s, want 1000", adj)
	}
	if cg := execIn(t, be, "main", "cat", "/proc/1/cgroup"); !strings.Contains(cg, "/kubepods/besteffort/pod"+string(be.UID)+"/") {
		t.Errorf("BestEffort container's cgroups are not under /kubepods/besteffort/pod%s:\n%s", be.UID, cg)
	}
	a.Remove(t, "besteffort.yaml")
	a.Remove(t, "oom.yaml")
	waitRuntimeGone(t, "oom", 90*time.Second)
	harness.Eventually(t, 60*time.Second, "the pod cgroup removed after the pod", func() (bool, string) {
		for _, d := range dirs {
			if _, err := os.Stat(d); err == nil {
				return false, d + " still there"
			}
		}
		return true, ""
	})
}
