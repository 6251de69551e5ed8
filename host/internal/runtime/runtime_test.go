package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmlet/wasmlet/host/internal/container"
	"github.com/wasmlet/wasmlet/host/internal/podspec"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/fake"

	testingclock "k8s.io/utils/clock/testing"
)

func newTestManager(t testing.TB) (*Manager, *fake.RemoteRuntime) {
	t.Helper()
	return newTestManagerWith(t, func(*Config) {})
}

// newTestManagerWith is newTestManager with cfg changed by set first.
func newTestManagerWith(t testing.TB, set func(*Config)) (*Manager, *fake.RemoteRuntime) {
	t.Helper()
	dir, err := os.MkdirTemp("", "wlrt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	f := fake.NewFakeRemoteRuntime()
	ep := "unix://" + filepath.Join(dir, "cri.sock")
	if err := f.Start(ep); err != nil {
		t.Fatal(err)
	}
	f.ImageService.SetFakeImageSize(1 << 20)
	t.Cleanup(f.Stop)
	cfg := Config{Endpoint: ep, Timeout: 10 * time.Second, RootDir: filepath.Join(dir, "root"), PodLogsDir: filepath.Join(dir, "logs")}
	set(&cfg)
	m, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, f
}

func testPod(uid string, policy v1.RestartPolicy, containers ...string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-" + uid, Namespace: "default", UID: types.UID(uid), Labels: map[string]string{"app": "web"}},
		Spec:       v1.PodSpec{RestartPolicy: policy, HostNetwork: true},
	}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c, Image: "wasmlet.local/busybox:1.0", TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: v1.TerminationMessageReadFile})
	}
	return p
}

func (m *Manager) mustStatus(t *testing.T, pod *v1.Pod) *container.PodStatus {
	t.Helper()
	st, err := m.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func syncOnce(t *testing.T, m *Manager, pod *v1.Pod, bo *flowcontrol.Backoff) (*container.PodStatus, container.SyncResult) {
	t.Helper()
	r := m.SyncPod(context.Background(), pod, m.mustStatus(t, pod), bo)
	return m.mustStatus(t, pod), r
}

// exit makes the fake runtime report the container as exited.
func exit(f *fake.RemoteRuntime, id string, code int32, at time.Time) {
	f.RuntimeService.Lock()
	defer f.RuntimeService.Unlock()
	c := f.RuntimeService.Containers[id]
	c.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.ExitCode = code
	c.FinishedAt = at.UnixNano()
}

func TestManager_SyncPod_StartsSandboxAndContainers(t *testing.T) {
	m, f := newTestManager(t)
	pod := testPod("u1", v1.RestartPolicyAlways, "a", "b")
	st, r := syncOnce(t, m, pod, NewBackOff())
	if err := r.Error(); err != nil {
		t.Fatal(err)
	}
	if len(st.Sandboxes) != 1 || !st.Sandboxes[0].Ready || !st.Sandboxes[0].HostNetwork {
		t.Fatalf("sandboxes = %+v", st.Sandboxes)
	}
	if len(st.Containers) != 2 {
		t.Fatalf("containers = %d, want 2", len(st.Containers))
	}
	for _, c := range st.Containers {
		if c.State != container.StateRunning || c.RestartCount != 0 || c.Hash != HashContainer(podspec.FindContainer(pod, c.Name)) {
			t.Errorf("container %s = %+v", c.Name, c)
		}
	}
	// The kubelet's labels, annotations and log layout.
	f.RuntimeService.Lock()
	for _, c := range f.RuntimeService.Containers {
		for k, want := range map[string]string{LabelPodName: pod.Name, LabelPodNamespace: "default", LabelPodUID: "u1", LabelContainerName: c.Metadata.Name} {
			if c.Labels[k] != want {
				t.Errorf("label %s = %q, want %q", k, c.Labels[k], want)
			}
		}
		if c.Annotations[AnnotationRestartCount] != "0" || c.Annotations[AnnotationContainerHash] != HashContainer(podspec.FindContainer(pod, c.Metadata.Name)) || c.Annotations[AnnotationTerminationMessagePath] != "/dev/termination-log" {
			t.Errorf("annotations = %v", c.Annotations)
		}
	}
	for _, s := range f.RuntimeService.Sandboxes {
		if s.Labels["app"] != "web" || s.Labels[LabelPodUID] != "u1" {
			t.Errorf("sandbox labels = %v", s.Labels)
		}
	}
	f.RuntimeService.Unlock()
	if _, err := os.Stat(filepath.Join(m.PodLogDir("default", pod.Name, pod.UID), "a")); err != nil {
		t.Errorf("container log dir: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(m.PodDir(pod.UID), "etc-hosts")); err != nil || !strings.HasPrefix(string(b), "# Kubernetes-managed hosts file (host network).") {
		t.Errorf("etc-hosts = %q, %v", b, err)
	}

	// A second sync with nothing changed does nothing.
	before := len(f.RuntimeService.GetCalls())
	_, r = syncOnce(t, m, pod, NewBackOff())
	for _, c := range f.RuntimeService.GetCalls()[before:] {
		if c == "RunPodSandbox" || c == "CreateContainer" || c == "StopContainer" {
			t.Errorf("idle sync called %s", c)
		}
	}
	if len(r.Steps) != 0 {
		t.Errorf("idle sync steps = %+v", r.Steps)
	}
}

func TestManager_SyncPod_SpecChangeRestartsContainer(t *testing.T) {
	m, _ := newTestManager(t)
	pod := testPod("u2", v1.RestartPolicyAlways, "a")
	st, _ := syncOnce(t, m, pod, NewBackOff())
	old := st.Containers[0].ID
	// Like the kubelet, only a new image restarts a running container
	// (other fields of an API pod's containers are immutable).
	pod.Spec.Containers[0].Args = []string{"--new"}
	st, _ = syncOnce(t, m, pod, NewBackOff())
	if cur := st.FindContainer("a"); cur.ID != old {
		t.Fatalf("args change restarted the container: %+v (old %s)", cur, old)
	}
	pod.Spec.Containers[0].Image = "wasmlet.local/busybox:2.0"
	st, r := syncOnce(t, m, pod, NewBackOff())
	if err := r.Error(); err != nil {
		t.Fatal(err)
	}
	cur := st.FindContainer("a")
	if cur.ID == old || cur.State != container.StateRunning || cur.RestartCount != 1 || cur.Hash != HashContainer(&pod.Spec.Containers[0]) {
		t.Fatalf("after spec change: %+v (old %s)", cur, old)
	}
}

func TestManager_SyncPod_RestartPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy      v1.RestartPolicy
		exitCode    int32
		wantRestart bool
	}{
		{v1.RestartPolicyAlways, 0, true},
		{v1.RestartPolicyAlways, 1, true},
		{v1.RestartPolicyOnFailure, 0, false},
		{v1.RestartPolicyOnFailure, 1, true},
		{v1.RestartPolicyNever, 0, false},
		{v1.RestartPolicyNever, 1, false},
	} {
		t.Run(string(tc.policy)+"/"+string(rune('0'+tc.exitCode)), func(t *testing.T) {
			m, f := newTestManager(t)
			pod := testPod("u3", tc.policy, "a")
			st, _ := syncOnce(t, m, pod, NewBackOff())
			exit(f, st.Containers[0].ID, tc.exitCode, time.Now().Add(-time.Minute))
			st, r := syncOnce(t, m, pod, NewBackOff())
			restarted := st.FindContainer("a").State == container.StateRunning
			if restarted != tc.wantRestart {
				t.Fatalf("restarted = %v, want %v (steps %+v)", restarted, tc.wantRestart, r.Steps)
			}
			if restarted && st.FindContainer("a").RestartCount != 1 {
				t.Errorf("restart count = %d, want 1", st.FindContainer("a").RestartCount)
			}
			if !restarted && st.Sandboxes[0].Ready {
				t.Errorf("sandbox of a finished pod still ready")
			}
		})
	}
}

func TestManager_SyncPod_CrashLoopBackOff(t *testing.T) {
	m, f := newTestManager(t)
	clk := testingclock.NewFakeClock(time.Now())
	bo := flowcontrol.NewFakeBackOff(BackOffInitial, BackOffMax, clk)
	pod := testPod("u4", v1.RestartPolicyAlways, "a")
	st, _ := syncOnce(t, m, pod, bo)
	// First crash: restarted at once, back-off now 10 s.
	exit(f, st.Containers[0].ID, 1, clk.Now())
	st, r := syncOnce(t, m, pod, bo)
	if st.FindContainer("a").State != container.StateRunning || r.Error() != nil {
		t.Fatalf("first restart: %+v %v", st.FindContainer("a"), r.Error())
	}
	// Second crash within 10 s: back-off.
	exit(f, st.FindContainer("a").ID, 1, clk.Now())
	st, r = syncOnce(t, m, pod, bo)
	if st.FindContainer("a").State == container.StateRunning || !strings.Contains(r.Error().Error(), "CrashLoopBackOff") {
		t.Fatalf("want back-off, got %+v %v", st.FindContainer("a"), r.Error())
	}
	if reason, msg, ok := m.WaitingReason(pod.UID, "a"); !ok || reason != "CrashLoopBackOff" || !strings.Contains(msg, "back-off 10s") {
		t.Errorf("waiting reason = %q %q %v", reason, msg, ok)
	}
	// After 10 s it restarts, with restart count 2, and the back-off doubles.
	clk.Step(11 * time.Second)
	st, r = syncOnce(t, m, pod, bo)
	if c := st.FindContainer("a"); c.State != container.StateRunning || c.RestartCount != 2 || r.Error() != nil {
		t.Fatalf("after back-off: %+v %v", c, r.Error())
	}
	if got := bo.Get(backOffKey(pod, &pod.Spec.Containers[0])); got != 20*time.Second {
		t.Errorf("back-off = %v, want 20s", got)
	}
}

func TestManager_SyncPod_InitContainersInOrder(t *testing.T) {
	m, f := newTestManager(t)
	pod := testPod("u5", v1.RestartPolicyAlways, "app")
	pod.Spec.InitContainers = []v1.Container{{Name: "init1", Image: "i:1"}, {Name: "init2", Image: "i:1"}}
	for _, want := range []string{"init1", "init2", "app"} {
		st, r := syncOnce(t, m, pod, NewBackOff())
		if r.Error() != nil {
			t.Fatal(r.Error())
		}
		if c := st.Containers[0]; c.Name != want || c.State != container.StateRunning {
			t.Fatalf("newest = %s %s, want %s running", c.Name, c.State, want)
		}
		if len(st.Containers) > 1 && st.Containers[1].State == container.StateRunning {
			t.Fatalf("%s started while %s still runs", want, st.Containers[1].Name)
		}
		if want != "app" {
			// An idle sync while the init container runs starts nothing.
			st2, _ := syncOnce(t, m, pod, NewBackOff())
			if len(st2.Containers) != len(st.Containers) {
				t.Fatalf("started something while %s runs", want)
			}
			exit(f, st.Containers[0].ID, 0, time.Now())
		}
	}
}

func TestManager_SyncPod_FailedInitNeverKillsPod(t *testing.T) {
	m, f := newTestManager(t)
	pod := testPod("u6", v1.RestartPolicyNever, "app")
	pod.Spec.InitContainers = []v1.Container{{Name: "init1", Image: "i:1"}}
	st, _ := syncOnce(t, m, pod, NewBackOff())
	exit(f, st.Containers[0].ID, 3, time.Now())
	st, _ = syncOnce(t, m, pod, NewBackOff())
	if st.FindContainer("app") != nil || st.Sandboxes[0].Ready {
		t.Fatalf("app started or sandbox alive after failed init with Never: %+v", st)
	}
}

func TestManager_KillPod_GracePeriod(t *testing.T) {
	m, f := newTestManager(t)
	pod := testPod("u7", v1.RestartPolicyAlways, "a")
	zero := int64(0)
	pod.Spec.TerminationGracePeriodSeconds = &zero
	st, _ := syncOnce(t, m, pod, NewBackOff())
	if err := m.KillPod(context.Background(), pod, st, nil); err != nil {
		t.Fatal(err)
	}
	st = m.mustStatus(t, pod)
	if st.Running() {
		t.Fatalf("pod still running: %+v", st)
	}
	calls := strings.Join(f.RuntimeService.GetCalls(), ",")
	if !strings.Contains(calls, "StopContainer") || !strings.Contains(calls, "StopPodSandbox") {
		t.Errorf("calls = %s", calls)
	}
	if g := gracePeriod(pod, nil); g != 0 {
		t.Errorf("grace = %d", g)
	}
}

func TestManager_GarbageCollect(t *testing.T) {
	m, _ := newTestManager(t)
	pod := testPod("u8", v1.RestartPolicyAlways, "a")
	st, _ := syncOnce(t, m, pod, NewBackOff())
	if err := m.KillPod(context.Background(), pod, st, nil); err != nil {
		t.Fatal(err)
	}
	pods, err := m.GetPods(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.GarbageCollect(context.Background(), pods, func(types.UID) bool { return false }); err != nil {
		t.Fatal(err)
	}
	pods, err = m.GetPods(context.Background())
	if err != nil || len(pods) != 0 {
		t.Fatalf("pods after GC = %v, %v", pods, err)
	}
	if _, err := os.Stat(m.PodDir(pod.UID)); !os.IsNotExist(err) {
		t.Errorf("pod dir still there: %v", err)
	}
}

func TestPullPolicy(t *testing.T) {
	for img, want := range map[string]v1.PullPolicy{"busybox": v1.PullAlways, "busybox:latest": v1.PullAlways, "busybox:1.0": v1.PullIfNotPresent, "localhost:5000/busybox": v1.PullAlways, "b@sha256:00": v1.PullIfNotPresent} {
		if got := pullPolicy(&v1.Container{Image: img}); got != want {
			t.Errorf("pullPolicy(%s) = %s, want %s", img, got, want)
		}
	}
}

func TestManager_SyncPod_NetworkNotReady(t *testing.T) {
	m, f := newTestManager(t)
	f.RuntimeService.Lock()
	f.RuntimeService.FakeStatus = &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: false, Message: "cni plugin not initialized"},
	}}
	f.RuntimeService.Unlock()
	podNet := testPod("n1", v1.RestartPolicyAlways, "a")
	podNet.Spec.HostNetwork = false
	_, r := syncOnce(t, m, podNet, NewBackOff())
	if err := r.Error(); err == nil || !strings.Contains(err.Error(), "network not ready") {
		t.Fatalf("pod network sync error = %v, want network not ready", err)
	}
	if n := strings.Count(strings.Join(f.RuntimeService.GetCalls(), ","), "RunPodSandbox"); n != 0 {
		t.Errorf("RunPodSandbox called %d times without a network", n)
	}
	// A host-network pod runs regardless.
	st, r := syncOnce(t, m, testPod("n2", v1.RestartPolicyAlways, "a"), NewBackOff())
	if r.Error() != nil || st.FindContainer("a") == nil {
		t.Fatalf("host-network pod: %v", r.Error())
	}
	if h, err := m.Health(context.Background()); err != nil || !h.RuntimeReady || h.NetworkReady {
		t.Errorf("health = %+v, %v", h, err)
	}
}

// recordingHooks records the hook points called, adds an env variable, a
// label and a read-only mount at PreCreate, refuses the container when
// refuse is set, and subscribes to PostStop when postStop is set.
type recordingHooks struct {
	mu       sync.Mutex
	points   []string
	refuse   string
	postStop bool
	config   *runtimeapi.ContainerConfig
}

func (h *recordingHooks) record(point container.HookPoint, c *v1.Container, suffix string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	name := string(point)
	if c != nil {
		name += "/" + c.Name
	}
	h.points = append(h.points, name+suffix)
}

func (h *recordingHooks) Hook(_ context.Context, point container.HookPoint, _ *v1.Pod, c *v1.Container) (*container.Adjustment, error) {
	h.record(point, c, "")
	if point == container.HookPreCreate {
		oom := int64(500)
		return &container.Adjustment{Env: []container.EnvVar{{Name: "INJECTED", Value: "1"}}, Labels: map[string]string{"hooked": "yes"},
			Mounts:      []*runtimeapi.Mount{{HostPath: "/srv/shared", ContainerPath: "/shared", Readonly: true}},
			OOMScoreAdj: &oom, Owners: map[string]string{"mounts:/shared": "recorder"}}, nil
	}
	return nil, nil
}

func (h *recordingHooks) Validate(_ context.Context, _ *v1.Pod, c *v1.Container, cfg *runtimeapi.ContainerConfig, adj *container.Adjustment) error {
	h.record(container.HookValidate, c, "")
	h.mu.Lock()
	defer h.mu.Unlock()
	h.config = cfg
	if h.refuse != "" {
		return errors.New(h.refuse)
	}
	if adj == nil || adj.Owners["mounts:/shared"] != "recorder" {
		return fmt.Errorf("Validate got adjustment %+v, want the PreCreate one", adj)
	}
	return nil
}

func (h *recordingHooks) PreUpdate(_ context.Context, _ *v1.Pod, c *v1.Container, r *runtimeapi.LinuxContainerResources) error {
	h.record(container.HookPreUpdate, c, fmt.Sprintf(":%d", r.GetMemoryLimitInBytes()))
	return nil
}

func (h *recordingHooks) PostStop(_ context.Context, _ *v1.Pod, c *v1.Container, exit container.Exit) error {
	code := "none"
	if exit.Code != nil {
		code = strconv.Itoa(int(*exit.Code))
	}
	h.record(container.HookPostStop, c, ":"+code)
	return nil
}

func (h *recordingHooks) Subscribed(point container.HookPoint) bool {
	return point != container.HookPostStop || h.postStop
}

func TestManager_SyncPod_Hooks(t *testing.T) {
	tests := []struct {
		name           string
		postStop       bool
		want           string
		statusReadKill bool
	}{
		{"no PostStop subscriber", false, "PreSandbox,PreCreate/a,Validate/a,PostStart/a,PreStop/a,PodTerminated", false},
		{"PostStop subscriber", true, "PreSandbox,PreCreate/a,Validate/a,PostStart/a,PreStop/a,PostStop/a:0,PodTerminated", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, f := newTestManager(t)
			h := &recordingHooks{postStop: tt.postStop}
			m.cfg.Hooks = h
			pod := testPod("h1", v1.RestartPolicyAlways, "a")
			st, r := syncOnce(t, m, pod, NewBackOff())
			if r.Error() != nil {
				t.Fatal(r.Error())
			}
			f.RuntimeService.Lock()
			f.RuntimeService.Called = nil
			f.RuntimeService.Unlock()
			if err := m.KillPod(context.Background(), pod, st, nil); err != nil {
				t.Fatal(err)
			}
			f.RuntimeService.Lock()
			statusRead := slices.Contains(f.RuntimeService.Called, "ContainerStatus")
			f.RuntimeService.Unlock()
			if statusRead != tt.statusReadKill {
				t.Errorf("ContainerStatus called on kill: %v, want %v (only for a PostStop subscriber)", statusRead, tt.statusReadKill)
			}
			// A second kill stops nothing: no second PodTerminated.
			if err := m.KillPod(context.Background(), pod, m.mustStatus(t, pod), nil); err != nil {
				t.Fatal(err)
			}
			// A sync that sees the container exited reports no second
			// PostStop for it.
			m.postStopExited(context.Background(), pod, m.mustStatus(t, pod))
			if got := strings.Join(h.points, ","); got != tt.want {
				t.Errorf("hook points = %s, want %s", got, tt.want)
			}
			f.RuntimeService.Lock()
			defer f.RuntimeService.Unlock()
			for _, c := range f.RuntimeService.Containers {
				if c.Labels["hooked"] != "yes" {
					t.Errorf("PreCreate label missing: %v", c.Labels)
				}
			}
			cfg := h.config
			if cfg == nil {
				t.Fatal("Validate saw no config")
			}
			if i := slices.IndexFunc(cfg.Mounts, func(m *runtimeapi.Mount) bool { return m.ContainerPath == "/shared" }); i < 0 || !cfg.Mounts[i].Readonly || cfg.Mounts[i].HostPath != "/srv/shared" {
				t.Errorf("Validate's config lacks the read-only mount: %v", cfg.Mounts)
			}
			if cfg.Linux.Resources.OomScoreAdj != 500 || !slices.ContainsFunc(cfg.Envs, func(e *runtimeapi.KeyValue) bool { return e.Key == "INJECTED" }) {
				t.Errorf("Validate's config lacks the adjusted OOM score or env: %d, %v", cfg.Linux.Resources.OomScoreAdj, cfg.Envs)
			}
		})
	}
}

// A container that exits on its own is reported to PostStop once, with its
// exit code, from the status the sync already has.
func TestManager_SyncPod_PostStopExited(t *testing.T) {
	m, f := newTestManager(t)
	h := &recordingHooks{postStop: true}
	m.cfg.Hooks = h
	pod := testPod("ps", v1.RestartPolicyNever, "a")
	st, _ := syncOnce(t, m, pod, NewBackOff())
	exit(f, st.Containers[0].ID, 3, time.Now())
	// The second sync and the kill of the pod (nothing left to restart)
	// see the same exited instance: one PostStop.
	for range 2 {
		m.SyncPod(context.Background(), pod, m.mustStatus(t, pod), NewBackOff())
	}
	h.mu.Lock()
	got := strings.Join(h.points, ",")
	h.mu.Unlock()
	if want := "PreSandbox,PreCreate/a,Validate/a,PostStart/a,PostStop/a:3,PodTerminated"; got != want {
		t.Errorf("hook points = %s, want %s", got, want)
	}
}

func TestManager_SyncPod_HookRefusal(t *testing.T) {
	m, f := newTestManager(t)
	m.cfg.Hooks = &recordingHooks{refuse: "hook plugin v refused the container: /etc is not allowed"}
	pod := testPod("h2", v1.RestartPolicyAlways, "a")
	_, r := syncOnce(t, m, pod, NewBackOff())
	i := slices.IndexFunc(r.Steps, func(s container.StepResult) bool { return s.Err != nil })
	if i < 0 || !errors.Is(r.Steps[i].Err, container.ErrCreateContainerConfig) || !strings.Contains(r.Steps[i].Message, "/etc is not allowed") {
		t.Fatalf("sync steps = %+v, want CreateContainerConfigError with the plugin's message", r.Steps)
	}
	f.RuntimeService.Lock()
	defer f.RuntimeService.Unlock()
	if n := len(f.RuntimeService.Containers); n != 0 {
		t.Errorf("%d containers created despite the refusal", n)
	}
}

func TestManager_PreUpdate(t *testing.T) {
	m, _ := newTestManager(t)
	if err := m.PreUpdate(context.Background(), testPod("u", v1.RestartPolicyAlways, "a"), &v1.Container{Name: "a"}, &runtimeapi.LinuxContainerResources{}); err != nil {
		t.Fatalf("PreUpdate without hooks = %v", err)
	}
	h := &recordingHooks{}
	m.cfg.Hooks = h
	if err := m.PreUpdate(context.Background(), testPod("u", v1.RestartPolicyAlways, "a"), &v1.Container{Name: "a"}, &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(h.points, ","); got != "PreUpdate/a:1048576" {
		t.Errorf("hook points = %s", got)
	}
}

// The hash is the kubelet's: the value its own consistency test pins for
// a container named test_container with image foo/image:v1.
func TestHashContainer_Kubelet(t *testing.T) {
	c := &v1.Container{Name: "test_container", Image: "foo/image:v1", Command: []string{"/bin/testcmd"}, Args: []string{"/bin/sh", "-c", "echo abc"}}
	if got := HashContainer(c); got != "8e45cbd0" {
		t.Errorf("HashContainer = %s, want the kubelet's 8e45cbd0", got)
	}
}

// devicesFunc is a Devices of one function.
type devicesFunc func(pod *v1.Pod, c *v1.Container, cfg *runtimeapi.ContainerConfig) error

func (f devicesFunc) ApplyDevices(_ context.Context, pod *v1.Pod, c *v1.Container, cfg *runtimeapi.ContainerConfig) error {
	return f(pod, c, cfg)
}

func TestManager_SyncPod_Devices(t *testing.T) {
	m, f := newTestManager(t)
	m.cfg.Devices = devicesFunc(func(_ *v1.Pod, c *v1.Container, cfg *runtimeapi.ContainerConfig) error {
		if c.Name == "broken" {
			return errors.New("plugin unix:///p.sock resource test.device/x: Allocate: down")
		}
		cfg.Annotations["test.device/allocated"] = c.Name
		return nil
	})
	pod := testPod("d1", v1.RestartPolicyAlways, "a")
	if _, r := syncOnce(t, m, pod, NewBackOff()); r.Error() != nil {
		t.Fatal(r.Error())
	}
	f.RuntimeService.Lock()
	for _, c := range f.RuntimeService.Containers {
		if c.Annotations["test.device/allocated"] != "a" {
			t.Errorf("container annotations %v: the devices' annotation missing", c.Annotations)
		}
	}
	f.RuntimeService.Unlock()

	broken := testPod("d2", v1.RestartPolicyAlways, "broken")
	_, r := syncOnce(t, m, broken, NewBackOff())
	var step *container.StepResult
	for i := range r.Steps {
		if r.Steps[i].Target == "broken" && r.Steps[i].Err != nil {
			step = &r.Steps[i]
		}
	}
	if step == nil || !errors.Is(step.Err, container.ErrCreateContainerConfig) || !strings.Contains(step.Message, "Allocate: down") {
		t.Fatalf("sync of a container whose devices fail: %+v, want CreateContainerConfigError with the plugin's error", r.Steps)
	}
}
