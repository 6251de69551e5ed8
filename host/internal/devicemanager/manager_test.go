package devicemanager

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/wasmlet/wasmlet/host/internal/admission"
)

// fakePlugin is a device plugin served on a unix socket in the manager's
// plugin directory.
type fakePlugin struct {
	pluginapi.UnsafeDevicePluginServer
	socket    string
	server    *grpc.Server
	options   *pluginapi.DevicePluginOptions
	optsErr   error
	lists     chan []*pluginapi.Device // each is sent on the stream
	end       chan error               // ends the stream with the error
	preferred []string
	response  *pluginapi.ContainerAllocateResponse

	mu       sync.Mutex
	calls    []string
	allocs   [][]string
	preStart [][]string
}

func (p *fakePlugin) call(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, name)
}

func (p *fakePlugin) Calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

func (p *fakePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	p.call("GetDevicePluginOptions")
	if p.optsErr != nil {
		return nil, p.optsErr
	}
	if p.options == nil {
		return &pluginapi.DevicePluginOptions{}, nil
	}
	return p.options, nil
}

func (p *fakePlugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	p.call("ListAndWatch")
	for {
		select {
		case devs := <-p.lists:
			if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
				return err
			}
		case err := <-p.end:
			return err
		case <-s.Context().Done():
			return nil
		}
	}
}

func (p *fakePlugin) GetPreferredAllocation(_ context.Context, r *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	p.call("GetPreferredAllocation")
	return &pluginapi.PreferredAllocationResponse{ContainerResponses: []*pluginapi.ContainerPreferredAllocationResponse{{DeviceIDs: p.preferred}}}, nil
}

func (p *fakePlugin) Allocate(_ context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	p.call("Allocate")
	p.mu.Lock()
	p.allocs = append(p.allocs, r.ContainerRequests[0].DevicesIds)
	p.mu.Unlock()
	resp := p.response
	if resp == nil {
		resp = &pluginapi.ContainerAllocateResponse{}
	}
	return &pluginapi.AllocateResponse{ContainerResponses: []*pluginapi.ContainerAllocateResponse{resp}}, nil
}

func (p *fakePlugin) PreStartContainer(_ context.Context, r *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	p.call("PreStartContainer")
	p.mu.Lock()
	p.preStart = append(p.preStart, r.DevicesIds)
	p.mu.Unlock()
	return &pluginapi.PreStartContainerResponse{}, nil
}

// serve starts p on <dir>/<name>.sock.
func (p *fakePlugin) serve(t *testing.T, dir, name string) {
	t.Helper()
	if p.lists == nil {
		p.lists = make(chan []*pluginapi.Device)
	}
	if p.end == nil {
		p.end = make(chan error)
	}
	p.socket = name + ".sock"
	l, err := net.Listen("unix", filepath.Join(dir, p.socket))
	if err != nil {
		t.Fatal(err)
	}
	p.server = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.server, p)
	go p.server.Serve(l)
	t.Cleanup(p.server.Stop)
}

// register asks the manager on socket to register p for resource.
func (p *fakePlugin) register(socket, version, resource string) error {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{Version: version, Endpoint: p.socket, ResourceName: resource})
	return err
}

// plug serves p as name, registers it for test.device/a and sends its
// first list, waiting until the manager reports it.
func (p *fakePlugin) plug(t *testing.T, m *Manager, name string, first []*pluginapi.Device) {
	t.Helper()
	p.serve(t, m.Dir(), name)
	if err := p.register(m.SocketPath(), pluginapi.Version, "test.device/a"); err != nil {
		t.Fatal(err)
	}
	p.lists <- first
	n := 0
	for _, d := range first {
		if d.Health == healthy {
			n++
		}
	}
	waitCounts(t, m, "test.device/a", int64(len(first)), int64(n))
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// startManager runs a Manager on root until the test ends.
func startManager(t *testing.T, root string, cfg Config) (*Manager, *clock) {
	t.Helper()
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg.RootDir, cfg.Now = root, clk.Now
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	waitFor(t, "the registration socket", func() bool { _, err := os.Stat(m.SocketPath()); return err == nil })
	return m, clk
}

func tempRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dm") // short: a unix socket path has 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// counts is a resource's capacity and allocatable; -1 when not reported.
func counts(m *Manager, res string) [2]int64 {
	c, a := m.Resources()
	out := [2]int64{-1, -1}
	if q, ok := c[v1.ResourceName(res)]; ok {
		out[0] = q.Value()
	}
	if q, ok := a[v1.ResourceName(res)]; ok {
		out[1] = q.Value()
	}
	return out
}

func waitCounts(t *testing.T, m *Manager, res string, capacity, allocatable int64) {
	t.Helper()
	want := [2]int64{capacity, allocatable}
	var got [2]int64
	deadline := time.Now().Add(10 * time.Second)
	for got = counts(m, res); got != want; got = counts(m, res) {
		if time.Now().After(deadline) {
			t.Fatalf("%s capacity/allocatable = %v, want %v", res, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func devs(health ...string) []*pluginapi.Device {
	var out []*pluginapi.Device
	for i, h := range health {
		out = append(out, &pluginapi.Device{ID: string(rune('a' + i)), Health: h})
	}
	return out
}

const (
	healthy   = pluginapi.Healthy
	unhealthy = pluginapi.Unhealthy
)

func TestManager_Register(t *testing.T) {
	m, _ := startManager(t, tempRoot(t), Config{})
	p := &fakePlugin{}
	p.serve(t, m.Dir(), "p")
	if err := p.register(m.SocketPath(), "v1alpha", "test.device/a"); err == nil || !strings.Contains(err.Error(), `requested API version "v1alpha" is not supported by kubelet`) {
		t.Errorf("register with a wrong version: %v", err)
	}
	if err := p.register(m.SocketPath(), pluginapi.Version, "gpu"); err == nil || !strings.Contains(err.Error(), `the ResourceName "gpu" is invalid`) {
		t.Errorf("register a native resource name: %v", err)
	}
	if len(p.Calls()) != 0 {
		t.Errorf("refused registrations called the plugin: %v", p.Calls())
	}
	if err := p.register(m.SocketPath(), pluginapi.Version, "test.device/a"); err != nil {
		t.Fatal(err)
	}
	if got := counts(m, "test.device/a"); got != [2]int64{-1, -1} {
		t.Errorf("before the first list: %v, want the resource unreported", got)
	}
	p.lists <- devs(healthy, healthy)
	waitCounts(t, m, "test.device/a", 2, 2)
	p.lists <- devs(healthy, unhealthy)
	waitCounts(t, m, "test.device/a", 2, 1)
	p.lists <- devs(unhealthy, unhealthy)
	waitCounts(t, m, "test.device/a", 2, 0)
	p.lists <- devs(healthy, healthy, healthy)
	waitCounts(t, m, "test.device/a", 3, 3)
}

func TestManager_Register_OptionsFail(t *testing.T) {
	m, _ := startManager(t, tempRoot(t), Config{})
	p := &fakePlugin{optsErr: errors.New("GetDevicePluginOptions failed")}
	p.serve(t, m.Dir(), "p")
	err := p.register(m.SocketPath(), pluginapi.Version, "test.device/a")
	if err == nil || !strings.Contains(err.Error(), "failed to get device plugin options") || !strings.Contains(err.Error(), "GetDevicePluginOptions failed") || !strings.Contains(err.Error(), "test.device/a") {
		t.Fatalf("register: %v, want the options' failure naming the resource", err)
	}
	if got := p.Calls(); !slices.Equal(got, []string{"GetDevicePluginOptions"}) {
		t.Errorf("calls %v, want GetDevicePluginOptions only", got)
	}
	if got := counts(m, "test.device/a"); got != [2]int64{-1, -1} {
		t.Errorf("resource %v, want unreported", got)
	}
}

func TestManager_StreamEnds(t *testing.T) {
	for _, how := range []string{"stream error", "plugin stopped"} {
		t.Run(how, func(t *testing.T) {
			m, clk := startManager(t, tempRoot(t), Config{GracePeriod: time.Minute})
			p := &fakePlugin{}
			p.plug(t, m, "p", devs(healthy, healthy))
			if how == "stream error" {
				p.end <- errors.New("ListAndWatch failed")
			} else {
				p.server.Stop()
			}
			// Allocatable drops at once; capacity stays for the grace period.
			waitCounts(t, m, "test.device/a", 2, 0)
			if got := p.Calls(); !slices.Equal(got, []string{"GetDevicePluginOptions", "ListAndWatch"}) {
				t.Errorf("calls %v", got)
			}
			clk.add(time.Minute)
			waitCounts(t, m, "test.device/a", 2, 0)
			clk.add(time.Second)
			waitCounts(t, m, "test.device/a", 0, 0)
		})
	}
}

func TestManager_StreamFailsAtOnce(t *testing.T) {
	m, _ := startManager(t, tempRoot(t), Config{})
	p := &fakePlugin{}
	p.serve(t, m.Dir(), "p")
	go func() { p.end <- errors.New("ListAndWatch failed") }()
	if err := p.register(m.SocketPath(), pluginapi.Version, "test.device/a"); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, m, "test.device/a", 0, 0)
}

func devicePod(uid, res string, n int64, env ...v1.EnvVar) *v1.Pod {
	rl := v1.ResourceList{v1.ResourceName(res): *resource.NewQuantity(n, resource.DecimalSI)}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-" + uid, Namespace: "ns", UID: types.UID(uid)},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Env: env, Resources: v1.ResourceRequirements{Requests: rl, Limits: rl}}}},
	}
}

// activePods is a settable pod list for Config.ActivePods.
type activePods struct {
	mu   sync.Mutex
	pods []*v1.Pod
}

func (a *activePods) set(p ...*v1.Pod) { a.mu.Lock(); defer a.mu.Unlock(); a.pods = p }
func (a *activePods) get() []*v1.Pod   { a.mu.Lock(); defer a.mu.Unlock(); return slices.Clone(a.pods) }

func TestManager_Allocate(t *testing.T) {
	active := &activePods{}
	m, _ := startManager(t, tempRoot(t), Config{ActivePods: active.get})
	p := &fakePlugin{
		options:   &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true, PreStartRequired: true},
		preferred: []string{"b"},
		response: &pluginapi.ContainerAllocateResponse{
			Envs:        map[string]string{"DEVICE": "b", "OWN": "plugin"},
			Mounts:      []*pluginapi.Mount{{ContainerPath: "/dev/shm/b", HostPath: "/tmp/b", ReadOnly: true}},
			Devices:     []*pluginapi.DeviceSpec{{ContainerPath: "/dev/b", HostPath: "/dev/null", Permissions: "rw"}},
			Annotations: map[string]string{"test.device/b": "yes"},
			CdiDevices:  []*pluginapi.CDIDevice{{Name: "test.device/a=b"}},
		},
	}
	p.plug(t, m, "p", devs(healthy, healthy))

	pod := devicePod("u1", "test.device/a", 1, v1.EnvVar{Name: "OWN", Value: "container"})
	active.set(pod)
	if r, err := m.Admit(context.Background(), admission.Attributes{Pod: pod}); err != nil || !r.Admit {
		t.Fatalf("admit: %+v %v", r, err)
	}
	if got := p.allocs; len(got) != 1 || !slices.Equal(got[0], []string{"b"}) {
		t.Fatalf("Allocate asked for %v, want the preferred [b]", got)
	}
	cfg := &runtimeapi.ContainerConfig{Envs: []*runtimeapi.KeyValue{{Key: "OWN", Value: []byte("container")}}, Annotations: map[string]string{}}
	if err := m.ApplyDevices(context.Background(), pod, &pod.Spec.Containers[0], cfg); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range cfg.Envs {
		env[e.Key] = string(e.Value)
	}
	if env["DEVICE"] != "b" || env["OWN"] != "container" || len(cfg.Envs) != 2 {
		t.Errorf("envs %v: want DEVICE=b from the plugin and the container's own OWN", env)
	}
	if len(cfg.Mounts) != 1 || cfg.Mounts[0].HostPath != "/tmp/b" || cfg.Mounts[0].ContainerPath != "/dev/shm/b" || !cfg.Mounts[0].Readonly {
		t.Errorf("mounts %v", cfg.Mounts)
	}
	if len(cfg.Devices) != 1 || cfg.Devices[0].ContainerPath != "/dev/b" || cfg.Devices[0].Permissions != "rw" {
		t.Errorf("devices %v", cfg.Devices)
	}
	if cfg.Annotations["test.device/b"] != "yes" || len(cfg.CDIDevices) != 1 || cfg.CDIDevices[0].Name != "test.device/a=b" {
		t.Errorf("annotations %v, CDI devices %v", cfg.Annotations, cfg.CDIDevices)
	}
	if len(p.preStart) != 1 || !slices.Equal(p.preStart[0], []string{"b"}) {
		t.Errorf("PreStartContainer calls %v, want one for [b]", p.preStart)
	}
	// Admitting it again (a restart of its worker) keeps its device.
	if r, _ := m.Admit(context.Background(), admission.Attributes{Pod: pod}); !r.Admit || len(p.allocs) != 1 {
		t.Errorf("second admission: %+v, Allocate calls %d", r, len(p.allocs))
	}

	// One device left: a pod asking for two is refused, naming pod and resource.
	two := devicePod("u2", "test.device/a", 2)
	active.set(pod, two)
	r, err := m.Admit(context.Background(), admission.Attributes{Pod: two})
	if err != nil || r.Admit || r.Reason != "UnexpectedAdmissionError" || !strings.Contains(r.Message, "ns/pod-u2") || !strings.Contains(r.Message, "test.device/a") || !strings.Contains(r.Message, "Available: 1") {
		t.Fatalf("admit two of one: %+v %v", r, err)
	}
	// The first pod ends: its device is free again.
	active.set(two)
	if r, err := m.Admit(context.Background(), admission.Attributes{Pod: two}); err != nil || !r.Admit {
		t.Fatalf("admit two after the first pod left: %+v %v", r, err)
	}
	if last := p.allocs[len(p.allocs)-1]; !slices.Equal(last, []string{"a", "b"}) {
		t.Errorf("Allocate asked for %v, want [a b]", last)
	}
	if m.allocations["u1"] != nil {
		t.Error("the inactive pod whose device was given again kept its allocation")
	}
	m.RemovePod("u2")
	if got := m.allocations["u2"]; got != nil {
		t.Errorf("RemovePod kept %v", got)
	}
}

func TestManager_Allocate_UnhealthyNotGiven(t *testing.T) {
	m, _ := startManager(t, tempRoot(t), Config{})
	p := &fakePlugin{}
	p.plug(t, m, "p", devs(unhealthy, healthy))
	if err := m.Allocate(context.Background(), devicePod("u1", "test.device/a", 1)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.allocs[0], []string{"b"}) {
		t.Errorf("allocated %v, want the healthy b", p.allocs[0])
	}
	// A pod asking for a resource no plugin serves is not the manager's.
	if err := m.Allocate(context.Background(), devicePod("u2", "example.com/other", 1)); err != nil {
		t.Errorf("a resource of no plugin: %v", err)
	}
}

func TestManager_Checkpoint(t *testing.T) {
	root := tempRoot(t)
	active := &activePods{}
	pod := devicePod("u1", "test.device/a", 1)
	active.set(pod)
	func() {
		ctx, cancel := context.WithCancel(context.Background())
		m, err := New(Config{RootDir: root, ActivePods: active.get})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		defer func() { cancel(); <-done }()
		waitFor(t, "the registration socket", func() bool { _, err := os.Stat(m.SocketPath()); return err == nil })
		p := &fakePlugin{response: &pluginapi.ContainerAllocateResponse{Envs: map[string]string{"DEVICE": "first"}}}
		p.plug(t, m, "p", devs(healthy, healthy))
		if err := m.Allocate(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
		p.server.Stop()
	}()

	// A restarted agent: the plugin's stale socket is gone, the allocation stays.
	m, _ := startManager(t, root, Config{ActivePods: active.get})
	if _, err := os.Stat(filepath.Join(m.Dir(), "p.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale plugin socket: %v", err)
	}
	cfg := &runtimeapi.ContainerConfig{}
	if err := m.ApplyDevices(context.Background(), pod, &pod.Spec.Containers[0], cfg); err != nil {
		t.Fatalf("apply from the checkpoint, the plugin not registered yet: %v", err)
	}
	if len(cfg.Envs) != 1 || string(cfg.Envs[0].Value) != "first" {
		t.Errorf("envs %v, want the checkpointed answer", cfg.Envs)
	}
	p := &fakePlugin{}
	p.plug(t, m, "p2", devs(healthy, healthy))
	two := devicePod("u2", "test.device/a", 2)
	active.set(pod, two)
	if err := m.Allocate(context.Background(), two); err == nil || !strings.Contains(err.Error(), "Available: 1") {
		t.Errorf("two devices while the restored pod holds one: %v", err)
	}
	if r, _ := m.Admit(context.Background(), admission.Attributes{Pod: devicePod("u3", "test.device/a", 1)}); !r.Admit {
		t.Errorf("one device left: %+v", r)
	}
	if got := p.allocs; len(got) != 1 || !slices.Equal(got[0], []string{"b"}) {
		t.Errorf("Allocate asked for %v, want [b], a being held", got)
	}
}

func TestManager_Allocate_InitContainerDevicesReused(t *testing.T) {
	m, _ := startManager(t, tempRoot(t), Config{})
	p := &fakePlugin{}
	p.plug(t, m, "p", devs(healthy))
	pod := devicePod("u1", "test.device/a", 1)
	init := pod.Spec.Containers[0]
	init.Name = "init"
	pod.Spec.InitContainers = []v1.Container{init}
	if err := m.Allocate(context.Background(), pod); err != nil {
		t.Fatalf("an init container's device given again to the app container: %v", err)
	}
	if len(p.allocs) != 2 || !slices.Equal(p.allocs[0], []string{"a"}) || !slices.Equal(p.allocs[1], []string{"a"}) {
		t.Errorf("Allocate calls %v, want [a] twice", p.allocs)
	}
	// A sidecar (restartable init container) keeps its device.
	side := devicePod("u2", "test.device/a", 1)
	always := v1.ContainerRestartPolicyAlways
	sc := side.Spec.Containers[0]
	sc.Name, sc.RestartPolicy = "sidecar", &always
	side.Spec.InitContainers = []v1.Container{sc}
	m.RemovePod("u1")
	if err := m.Allocate(context.Background(), side); err == nil || !strings.Contains(err.Error(), "Available: 0") {
		t.Errorf("a sidecar's device given to the app container too: %v", err)
	}
}

// A pod not active yet (later in the batch a restarted agent admits) keeps
// its devices while free ones are enough for the pod being admitted.
func TestManager_Allocate_InactiveKeptWhileNotNeeded(t *testing.T) {
	active := &activePods{}
	m, _ := startManager(t, tempRoot(t), Config{ActivePods: active.get})
	p := &fakePlugin{}
	p.plug(t, m, "p", devs(healthy, healthy))
	first := devicePod("u1", "test.device/a", 1)
	if err := m.Allocate(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	active.set() // u1 not (yet) among the active pods
	if err := m.Allocate(context.Background(), devicePod("u2", "test.device/a", 1)); err != nil {
		t.Fatal(err)
	}
	if a := m.allocations["u1"].get("c", "test.device/a"); a == nil || !slices.Equal(a.DeviceIDs, []string{"a"}) {
		t.Errorf("u1's allocation %v, want [a] kept", a)
	}
	if !slices.Equal(p.allocs[1], []string{"b"}) {
		t.Errorf("u2 given %v, want the free b", p.allocs[1])
	}
}
