package podresources

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/kubelet/pkg/apis/podresources/v1alpha1"
	"k8s.io/utils/ptr"
)

// pods is the test's pod manager: active pods and terminal ones.
type pods struct {
	mu               sync.Mutex
	active, terminal []*v1.Pod
}

func (p *pods) Active() []*v1.Pod { p.mu.Lock(); defer p.mu.Unlock(); return p.active }
func (p *pods) All() []*v1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append(append([]*v1.Pod(nil), p.active...), p.terminal...)
}

func newPod(ns, name string, init []v1.Container, containers ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}, Spec: v1.PodSpec{InitContainers: init}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c, Image: "img"})
	}
	return p
}

// testPods are a pod with a sidecar and a plain init container, a pod of
// two containers, and a pod that has terminated.
func testPods() *pods {
	sidecar := v1.Container{Name: "sidecar", Image: "img", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)}
	return &pods{
		active: []*v1.Pod{
			newPod("default", "web", []v1.Container{{Name: "setup", Image: "img"}, sidecar}, "app"),
			newPod("kube-system", "two", nil, "a", "b"),
		},
		terminal: []*v1.Pod{newPod("default", "done", nil, "job")},
	}
}

// serve runs a server over p until the test ends; it returns the server,
// a v1 and a v1alpha1 client dialled on its socket, and the registry of
// its metrics.
func serve(t *testing.T, p *pods, edit ...func(*Config)) (*Server, podresourcesv1.PodResourcesListerClient, v1alpha1.PodResourcesListerClient, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg := Config{RootDir: shortTempDir(t), ActivePods: p.Active, Pods: p.All, Registerer: reg}
	for _, e := range edit {
		e(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	conn := dial(t, s.Path())
	t.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return s, podresourcesv1.NewPodResourcesListerClient(conn), v1alpha1.NewPodResourcesListerClient(conn), reg
}

// dial connects to the socket at path as a client of the API would.
func dial(t *testing.T, path string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// shortTempDir is a temporary directory whose socket path fits the 108
// bytes of a unix socket address, which t.TempDir's may not.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "wlpr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// summary is a pod list in one line: ns/name[container{nothing}...].
func summary(prs []*podresourcesv1.PodResources) string {
	var out []string
	for _, pr := range prs {
		var cs []string
		for _, c := range pr.Containers {
			s := c.Name
			if len(c.Devices)+len(c.CpuIds)+len(c.Memory)+len(c.DynamicResources) > 0 {
				s += fmt.Sprintf("{devices %v cpus %v memory %v dynamic %v}", c.Devices, c.CpuIds, c.Memory, c.DynamicResources)
			}
			cs = append(cs, s)
		}
		out = append(out, pr.Namespace+"/"+pr.Name+"["+strings.Join(cs, " ")+"]")
	}
	return strings.Join(out, " ")
}

func TestServer_List(t *testing.T) {
	p := testPods()
	_, cli, _, reg := serve(t, p)
	resp, err := cli.List(context.Background(), &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// The active pods only; sidecars before the app containers, plain
	// init containers left out; nothing assigned to any container.
	if got, want := summary(resp.PodResources), "default/web[sidecar app] kube-system/two[a b]"; got != want {
		t.Errorf("List = %s, want %s", got, want)
	}
	if got := counter(t, reg, "kubelet_pod_resources_endpoint_requests_list", "v1"); got != 1 {
		t.Errorf("requests_list = %v, want 1", got)
	}
}

func TestServer_Get(t *testing.T) {
	p := testPods()
	_, cli, _, reg := serve(t, p)
	for _, tc := range []struct {
		ns, name string
		want     string // the pod's summary, or the error's message
	}{
		{"default", "web", "default/web[sidecar app]"},
		{"kube-system", "two", "kube-system/two[a b]"},
		{"default", "two", "pod two in namespace default not found"},
		{"default", "missing", "pod missing in namespace default not found"},
		{"default", "done", "pod done in namespace default not found"}, // terminated
	} {
		t.Run(tc.ns+"/"+tc.name, func(t *testing.T) {
			resp, err := cli.Get(context.Background(), &podresourcesv1.GetPodResourcesRequest{PodNamespace: tc.ns, PodName: tc.name})
			if err != nil {
				// The kubelet's error is a plain one: code Unknown.
				if st := status.Convert(err); st.Code() != codes.Unknown || st.Message() != tc.want {
					t.Errorf("Get: %v, want code Unknown, message %q", err, tc.want)
				}
				return
			}
			if got := summary([]*podresourcesv1.PodResources{resp.PodResources}); got != tc.want {
				t.Errorf("Get = %s, want %s", got, tc.want)
			}
		})
	}
	if got := counter(t, reg, "kubelet_pod_resources_endpoint_errors_get", "v1"); got != 3 {
		t.Errorf("errors_get = %v, want 3", got)
	}
}

func TestServer_GetAllocatableResources(t *testing.T) {
	_, cli, _, _ := serve(t, testPods())
	resp, err := cli.GetAllocatableResources(context.Background(), &podresourcesv1.AllocatableResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Devices)+len(resp.CpuIds)+len(resp.Memory) != 0 {
		t.Errorf("GetAllocatableResources = %v, want nothing", resp)
	}
}

func TestServer_ListV1alpha1(t *testing.T) {
	_, _, cli, reg := serve(t, testPods())
	resp, err := cli.List(context.Background(), &v1alpha1.ListPodResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// Every pod of the pod manager, app containers only, as the kubelet's.
	var got []string
	for _, pr := range resp.PodResources {
		var cs []string
		for _, c := range pr.Containers {
			cs = append(cs, c.Name)
		}
		got = append(got, pr.Namespace+"/"+pr.Name+fmt.Sprint(cs))
	}
	if want := "[default/web[app] kube-system/two[a b] default/done[job]]"; fmt.Sprint(got) != want {
		t.Errorf("v1alpha1 List = %v, want %s", got, want)
	}
	if got := counter(t, reg, "kubelet_pod_resources_endpoint_requests_total", "v1alpha1"); got != 1 {
		t.Errorf("requests_total{v1alpha1} = %v, want 1", got)
	}
}

func TestServer_RateLimit(t *testing.T) {
	// A burst of two and no refill to speak of: the third call is refused.
	_, cli, _, _ := serve(t, testPods(), func(c *Config) { c.QPS, c.Burst = 1e-9, 2 })
	for i, want := range []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted} {
		_, err := cli.List(context.Background(), &podresourcesv1.ListPodResourcesRequest{})
		if st := status.Convert(err); st.Code() != want || (err != nil && st.Message() != "rejected by rate limit") {
			t.Errorf("call %d: %v, want %s", i+1, err, want)
		}
	}
}

func TestNew_Socket(t *testing.T) {
	root := shortTempDir(t)
	path := SocketPath(root)
	if want := filepath.Join(root, "pod-resources", "kubelet.sock"); path != want {
		t.Fatalf("SocketPath = %s, want %s", path, want)
	}
	// A socket a crashed agent left behind: nobody listens on it.
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()

	_, cli, _, _ := serve(t, testPods(), func(c *Config) { c.RootDir = root })
	if _, err := cli.List(context.Background(), &podresourcesv1.ListPodResourcesRequest{}); err != nil {
		t.Fatalf("List on the replaced socket: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("socket: %v, %v", fi, err)
	}
}

func TestNew_Directory(t *testing.T) {
	root := shortTempDir(t)
	s, err := New(Config{RootDir: root, ActivePods: testPods().Active})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Dir(s.Path()))
	if err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("directory: %v, %v; want mode 0750", fi, err)
	}
	// Run with a done context stops at once and removes the socket.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Run(ctx); err != nil {
		t.Errorf("Run: %v", err)
	}
	if _, err := os.Stat(s.Path()); !os.IsNotExist(err) {
		t.Errorf("socket after stop: %v, want gone", err)
	}
	if _, err := New(Config{RootDir: root}); err == nil {
		t.Error("New without ActivePods: no error")
	}
}

// counter is the value of the counter name{server_api_version=version}.
func counter(t *testing.T, reg *prometheus.Registry, name, version string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			if mf.GetName() == name && m.Label[0].GetValue() == version {
				return m.Counter.GetValue()
			}
		}
	}
	t.Fatalf("no %s{server_api_version=%q}", name, version)
	return 0
}
