package pleg

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	apitest "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/cri-client/pkg/fake"

	"github.com/wasmlet/wasmlet/host/internal/container"
	"github.com/wasmlet/wasmlet/host/internal/runtime"
)

func newRuntime(t *testing.T) (*runtime.Manager, *fake.RemoteRuntime) {
	dir, err := os.MkdirTemp("", "wlpleg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	f := fake.NewFakeRemoteRuntime()
	ep := "unix://" + filepath.Join(dir, "cri.sock")
	if err := f.Start(ep); err != nil {
		t.Fatal(err)
	}
	f.ImageService.SetFakeImageSize(1)
	t.Cleanup(f.Stop)
	m, err := runtime.New(context.Background(), runtime.Config{Endpoint: ep, Timeout: 5 * time.Second, RootDir: filepath.Join(dir, "r"), PodLogsDir: filepath.Join(dir, "l")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, f
}

func drain(ch <-chan Event) map[EventType]int {
	got := map[EventType]int{}
	for {
		select {
		case e := <-ch:
			got[e.Type]++
		default:
			return got
		}
	}
}

func TestPLEG_Relist(t *testing.T) {
	ctx := context.Background()
	m, f := newRuntime(t)
	p, err := New(Config{Runtime: m})
	if err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default", UID: "u1"},
		Spec: v1.PodSpec{HostNetwork: true, Containers: []v1.Container{{Name: "c", Image: "img:1"}}}}
	if r := m.SyncPod(ctx, pod, nil, runtime.NewBackOff()); r.Error() != nil {
		t.Fatal(r.Error())
	}
	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	// Sandbox and container started.
	if got := drain(p.Events()); got[ContainerStarted] != 2 || len(got) != 1 {
		t.Fatalf("events = %v", got)
	}
	st, err := p.Cache().Get("u1")
	if err != nil || st.FindContainer("c") == nil || st.FindContainer("c").State != container.StateRunning {
		t.Fatalf("cache = %+v, %v", st, err)
	}
	// Nothing changed: no events.
	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if got := drain(p.Events()); len(got) != 0 {
		t.Fatalf("idle relist events = %v", got)
	}
	// The container dies.
	f.RuntimeService.Lock()
	for _, c := range f.RuntimeService.Containers {
		c.State = runtimeapi.ContainerState_CONTAINER_EXITED
		c.ExitCode = 1
	}
	f.RuntimeService.Unlock()
	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if got := drain(p.Events()); got[ContainerDied] != 1 || len(got) != 1 {
		t.Fatalf("events = %v", got)
	}
	st, _ = p.Cache().Get("u1")
	if c := st.FindContainer("c"); c.State != container.StateExited || c.ExitCode != 1 {
		t.Fatalf("cache after death = %+v", c)
	}
	// Removed from the runtime.
	f.RuntimeService.Lock()
	f.RuntimeService.Containers = map[string]*apitest.FakeContainer{}
	f.RuntimeService.Unlock()
	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if got := drain(p.Events()); got[ContainerRemoved] != 1 {
		t.Fatalf("events = %v", got)
	}
}

func TestPLEG_RelistRetriesFailedInspection(t *testing.T) {
	ctx := context.Background()
	m, f := newRuntime(t)
	p, _ := New(Config{Runtime: m})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default", UID: "u1"},
		Spec: v1.PodSpec{HostNetwork: true, Containers: []v1.Container{{Name: "c", Image: "img:1"}}}}
	m.SyncPod(ctx, pod, nil, runtime.NewBackOff())
	// The relist lists; reading the pod's sandbox then fails.
	f.RuntimeService.InjectError("PodSandboxStatus", errors.New("boom"))
	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if got := drain(p.Events()); len(got) != 0 {
		t.Fatalf("events sent despite failed inspection: %v", got)
	}
	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if got := drain(p.Events()); got[ContainerStarted] != 2 {
		t.Fatalf("events after retry = %v", got)
	}
}

func TestCache_GetNewerThan(t *testing.T) {
	c := NewCache()
	t0 := time.Now()
	done := make(chan *container.PodStatus)
	go func() {
		s, _ := c.GetNewerThan(context.Background(), "u", t0)
		done <- s
	}()
	select {
	case <-done:
		t.Fatal("returned before a newer status")
	case <-time.After(20 * time.Millisecond):
	}
	c.Set("u", &container.PodStatus{UID: "u", Name: "x"}, nil, t0.Add(time.Millisecond))
	if s := <-done; s.Name != "x" {
		t.Fatalf("status = %+v", s)
	}
	// An older Set does not replace a newer one.
	c.Set("u", &container.PodStatus{UID: "u", Name: "old"}, nil, t0)
	if s, _ := c.Get("u"); s.Name != "x" {
		t.Errorf("older status replaced newer: %+v", s)
	}
	// The global timestamp also satisfies a waiter.
	c.UpdateTime(t0.Add(time.Second))
	if _, err := c.GetNewerThan(context.Background(), "other", t0); err != nil {
		t.Error(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := c.GetNewerThan(ctx, "other", t0.Add(time.Hour)); err == nil {
		t.Error("no error on a cancelled wait")
	}
}

func TestPLEG_Healthy(t *testing.T) {
	m, _ := newRuntime(t)
	p, _ := New(Config{Runtime: m, RelistThreshold: time.Millisecond})
	if err := p.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if p.Healthy() == nil {
		t.Error("healthy after the threshold")
	}
}

func TestPLEG_RelistSkipsInspectionWhenCacheMatches(t *testing.T) {
	ctx := context.Background()
	m, f := newRuntime(t)
	p, _ := New(Config{Runtime: m})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default", UID: "u1"},
		Spec: v1.PodSpec{HostNetwork: true, Containers: []v1.Container{{Name: "c", Image: "img:1"}}}}
	m.SyncPod(ctx, pod, nil, runtime.NewBackOff())
	// What the agent does after a sync: read back and cache.
	st, err := m.GetPodStatus(ctx, "u1", "a", "default")
	if err != nil {
		t.Fatal(err)
	}
	p.Cache().Set("u1", st, nil, time.Now())
	count := func() int {
		n := 0
		for _, c := range f.RuntimeService.GetCalls() {
			if c == "ContainerStatus" {
				n++
			}
		}
		return n
	}
	before := count()
	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if got := drain(p.Events()); got[ContainerStarted] != 2 {
		t.Fatalf("events = %v", got)
	}
	if n := count() - before; n != 0 {
		t.Errorf("relist inspected the pod (%d ContainerStatus calls) although the cache matched", n)
	}
	// A change the cache does not show is inspected.
	f.RuntimeService.Lock()
	for _, c := range f.RuntimeService.Containers {
		c.State = runtimeapi.ContainerState_CONTAINER_EXITED
	}
	f.RuntimeService.Unlock()
	before = count()
	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count() - before; n != 1 {
		t.Errorf("ContainerStatus calls after a death = %d, want 1", n)
	}
}

// TestPLEG_RelistError: a runtime that fails every listing; RelistError
// says so at the first failed relist (long before Healthy's threshold) and
// clears when a relist works.
func TestPLEG_RelistError(t *testing.T) {
	m, f := newRuntime(t)
	p, _ := New(Config{Runtime: m})
	f.RuntimeService.InjectError("ListContainers", errors.New("listing broken"))
	if err := p.Relist(context.Background()); err == nil {
		t.Fatal("relist succeeded against a failing runtime")
	}
	if err := p.RelistError(); err == nil || !strings.Contains(err.Error(), "relists failing since") || !strings.Contains(err.Error(), "listing broken") {
		t.Fatalf("RelistError after a failed relist = %v, want the failure", err)
	}
	if err := p.Healthy(); err != nil {
		t.Errorf("Healthy = %v before its threshold", err)
	}
	if err := p.Relist(context.Background()); err != nil { // the injected error was used up
		t.Fatal(err)
	}
	if err := p.RelistError(); err != nil {
		t.Errorf("RelistError after a good relist = %v", err)
	}
}

// TestPLEG_InspectsWithoutListing: a relist lists the runtime once, and
// reads each changed pod's statuses from that listing, as the kubelet's
// GenericPLEG does, instead of listing the pod's sandboxes and containers
// again.
func TestPLEG_InspectsWithoutListing(t *testing.T) {
	ctx := context.Background()
	m, f := newRuntime(t)
	p, _ := New(Config{Runtime: m})
	for _, uid := range []types.UID{"u1", "u2", "u3"} {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: string(uid), Namespace: "default", UID: uid},
			Spec: v1.PodSpec{HostNetwork: true, Containers: []v1.Container{{Name: "c", Image: "img:1"}}}}
		m.SyncPod(ctx, pod, nil, runtime.NewBackOff())
	}
	before := len(f.RuntimeService.GetCalls())
	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, c := range f.RuntimeService.GetCalls()[before:] {
		count[c]++
	}
	if count["ListPodSandbox"] != 1 || count["ListContainers"] != 1 || count["PodSandboxStatus"] != 3 || count["ContainerStatus"] != 3 {
		t.Fatalf("CRI calls of one relist over 3 new pods = %v; want 1 listing of each kind and each pod's sandbox and container read once", count)
	}
	for _, uid := range []types.UID{"u1", "u2", "u3"} {
		st, err := p.Cache().Get(uid)
		if err != nil || len(st.Sandboxes) != 1 || !st.Sandboxes[0].Ready || len(st.Containers) != 1 || st.Containers[0].State != container.StateRunning || st.Name != string(uid) {
			t.Errorf("cached status of %s = %+v, %v", uid, st, err)
		}
	}
}
