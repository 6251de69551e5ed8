package node

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func localNode() *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{v1.LabelHostname: "n1"}},
		Status:     v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{ContainerRuntimeVersion: "wasi://1.0"}},
	}
}

func count(c *fake.Clientset, verb, resource string) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

func readyOf(n *v1.Node) v1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status
		}
	}
	return ""
}

func TestRegistrar_RegisterCreatesOrAdopts(t *testing.T) {
	existing := localNode()
	existing.UID = "old-uid"
	existing.Labels = map[string]string{"team": "x"}
	for _, c := range []struct {
		name    string
		objects []*v1.Node
		creates int
		uid     string
	}{
		{"new node", nil, 1, ""},
		{"existing node adopted", []*v1.Node{existing}, 1, "old-uid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			client := fake.NewClientset()
			for _, n := range c.objects {
				client = fake.NewClientset(n.DeepCopy())
			}
			r := NewRegistrar(RegistrarConfig{Client: client, Node: localNode()})
			if err := r.register(context.Background()); err != nil {
				t.Fatal(err)
			}
			got, err := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if readyOf(got) != v1.ConditionTrue || len(got.Status.Conditions) != 4 {
				t.Errorf("conditions %v: want Ready True and three pressure conditions", got.Status.Conditions)
			}
			if got.Labels[v1.LabelHostname] != "n1" {
				t.Errorf("labels %v: want the hostname label", got.Labels)
			}
			if c.uid != "" && string(got.UID) != c.uid {
				t.Errorf("UID %s, want the adopted %s", got.UID, c.uid)
			}
			if n, ok := r.Node(); !ok || n.Name != "n1" {
				t.Errorf("Node() = %v, %v", n, ok)
			}
		})
	}
}

func TestRegistrar_UpdateStatusOnlyWhenChanged(t *testing.T) {
	client := fake.NewClientset()
	var notReady error
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := NewRegistrar(RegistrarConfig{Client: client, Node: localNode(), Ready: func() error { return notReady }, Now: func() time.Time { return now }})
	if err := r.register(context.Background()); err != nil {
		t.Fatal(err)
	}
	base := count(client, "patch", "nodes")
	now = now.Add(10 * time.Second)
	if err := r.UpdateStatus(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := count(client, "patch", "nodes"); n != base {
		t.Errorf("%d patches after an unchanged update, want %d", n, base)
	}
	notReady = errors.New("PLEG is not healthy")
	now = now.Add(10 * time.Second)
	if err := r.UpdateStatus(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _ := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if readyOf(got) != v1.ConditionFalse {
		t.Errorf("Ready %q after the runtime went unhealthy, want False", readyOf(got))
	}
	// Unchanged but the report frequency has passed: posted again.
	before := count(client, "patch", "nodes")
	now = now.Add(6 * time.Minute)
	if err := r.UpdateStatus(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := count(client, "patch", "nodes"); n != before+1 {
		t.Errorf("%d patches after the report frequency, want %d", n, before+1)
	}
}

func TestRegistrar_RenewLease(t *testing.T) {
	client := fake.NewClientset()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := localNode()
	n.UID = "uid-1" // the fake keeps it; a real API server assigns one
	r := NewRegistrar(RegistrarConfig{Client: client, Node: n, Now: func() time.Time { return now }})
	if err := r.register(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.renewLease(context.Background())
	now = now.Add(10 * time.Second)
	r.renewLease(context.Background())
	l, err := client.CoordinationV1().Leases(LeaseNamespace).Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *l.Spec.HolderIdentity != "n1" || *l.Spec.LeaseDurationSeconds != 40 || !l.Spec.RenewTime.Time.Equal(now) {
		t.Errorf("lease spec holder %s duration %d renew %v, want n1, 40, %v", *l.Spec.HolderIdentity, *l.Spec.LeaseDurationSeconds, l.Spec.RenewTime, now)
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" || l.OwnerReferences[0].UID != "uid-1" {
		t.Errorf("lease owners %v, want the Node", l.OwnerReferences)
	}
	if c, u := count(client, "create", "leases"), count(client, "update", "leases"); c != 1 || u != 1 {
		t.Errorf("lease creates %d updates %d, want 1 and 1", c, u)
	}
}

func TestRegistrar_RuntimeHandlers(t *testing.T) {
	client := fake.NewClientset()
	handlers := []v1.NodeRuntimeHandler{{Name: "", Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptr.To(true), UserNamespaces: ptr.To(false)}}}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := NewRegistrar(RegistrarConfig{Client: client, Node: localNode(), Now: func() time.Time { return now },
		RuntimeHandlers: func() []v1.NodeRuntimeHandler { return handlers }})
	if err := r.register(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _ := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if hs := got.Status.RuntimeHandlers; len(hs) != 1 || hs[0].Name != "" || !*hs[0].Features.RecursiveReadOnlyMounts || *hs[0].Features.UserNamespaces {
		t.Fatalf("registered status.runtimeHandlers = %+v, want the runtime's default handler", hs)
	}
	// The runtime restarted with a second handler: the next status says so.
	handlers = append(handlers, v1.NodeRuntimeHandler{Name: "runc2", Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptr.To(true), UserNamespaces: ptr.To(true)}})
	now = now.Add(10 * time.Second)
	if err := r.UpdateStatus(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _ = client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if hs := got.Status.RuntimeHandlers; len(hs) != 2 || hs[1].Name != "runc2" {
		t.Errorf("status.runtimeHandlers after the runtime listed runc2 = %+v", hs)
	}
}

func TestRegistrar_RegisterTaintsAndNoCreate(t *testing.T) {
	local := localNode()
	local.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}}
	local.Spec.ProviderID = "p://1"
	client := fake.NewClientset()
	r := NewRegistrar(RegistrarConfig{Client: client, Node: local})
	if err := r.register(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Taints) != 1 || got.Spec.Taints[0].ToString() != "dedicated=gpu:NoSchedule" || got.Spec.ProviderID != "p://1" {
		t.Errorf("spec %+v: want the taint and provider ID", got.Spec)
	}

	// registerNode false: nothing is created; the Node once made by
	// someone else is adopted.
	client = fake.NewClientset()
	r = NewRegistrar(RegistrarConfig{Client: client, Node: localNode(), NoCreate: true})
	if err := r.register(context.Background()); err == nil || count(client, "create", "nodes") != 0 {
		t.Fatalf("error %v, %d creates: want an error and none", err, count(client, "create", "nodes"))
	}
	made := localNode()
	made.UID = "made-by-admin"
	if _, err := client.CoreV1().Nodes().Create(context.Background(), made, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.register(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, ok := r.Node(); !ok || n.UID != "made-by-admin" {
		t.Errorf("Node() = %v, %v: want the one made by someone else", n, ok)
	}
}

func TestRegistrar_ExtendedResources(t *testing.T) {
	client := fake.NewClientset()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	capacity, allocatable := v1.ResourceList{"test.device/a": resource.MustParse("2")}, v1.ResourceList{"test.device/a": resource.MustParse("2")}
	local := localNode()
	local.Status.Capacity = v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}
	r := NewRegistrar(RegistrarConfig{Client: client, Node: local, Now: func() time.Time { return now },
		ExtendedResources: func() (v1.ResourceList, v1.ResourceList) { return capacity, allocatable }})
	if err := r.register(context.Background()); err != nil {
		t.Fatal(err)
	}
	check := func(wantCap, wantAlloc int64) {
		t.Helper()
		got, _ := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
		c, a := got.Status.Capacity["test.device/a"], got.Status.Allocatable["test.device/a"]
		if c.Value() != wantCap || a.Value() != wantAlloc {
			t.Fatalf("test.device/a capacity %s allocatable %s, want %d and %d", c.String(), a.String(), wantCap, wantAlloc)
		}
		if _, ok := got.Status.Capacity[v1.ResourceCPU]; !ok {
			t.Fatalf("capacity lost cpu: %v", got.Status.Capacity)
		}
	}
	check(2, 2)
	// A device became unhealthy: allocatable drops, capacity stays.
	allocatable = v1.ResourceList{"test.device/a": resource.MustParse("1")}
	now = now.Add(10 * time.Second)
	if err := r.UpdateStatus(context.Background()); err != nil {
		t.Fatal(err)
	}
	check(2, 1)
	if _, ok := local.Status.Capacity["test.device/a"]; ok {
		t.Error("the local node's own capacity was changed")
	}
	n := WithExtendedResources(local, func() (v1.ResourceList, v1.ResourceList) { return capacity, allocatable })
	if q := n.Status.Allocatable["test.device/a"]; q.Value() != 1 {
		t.Errorf("WithExtendedResources allocatable = %s, want 1", q.String())
	}
	if _, ok := local.Status.Allocatable["test.device/a"]; ok {
		t.Error("WithExtendedResources changed the node it was given")
	}
}

func TestRegistrar_Pressure(t *testing.T) {
	client := fake.NewClientset()
	var pressure []v1.NodeConditionType
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := NewRegistrar(RegistrarConfig{Client: client, Node: localNode(), Pressure: func() []v1.NodeConditionType { return pressure }, Now: func() time.Time { return now }})
	if err := r.register(context.Background()); err != nil {
		t.Fatal(err)
	}
	type want struct {
		status v1.ConditionStatus
		reason string
	}
	for _, step := range []struct {
		name     string
		pressure []v1.NodeConditionType
		want     map[v1.NodeConditionType]want
	}{
		{"none", nil, map[v1.NodeConditionType]want{
			v1.NodeMemoryPressure: {v1.ConditionFalse, "KubeletHasSufficientMemory"},
			v1.NodeDiskPressure:   {v1.ConditionFalse, "KubeletHasNoDiskPressure"},
			v1.NodePIDPressure:    {v1.ConditionFalse, "KubeletHasSufficientPID"},
		}},
		{"memory and PID", []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodePIDPressure}, map[v1.NodeConditionType]want{
			v1.NodeMemoryPressure: {v1.ConditionTrue, "KubeletHasInsufficientMemory"},
			v1.NodeDiskPressure:   {v1.ConditionFalse, "KubeletHasNoDiskPressure"},
			v1.NodePIDPressure:    {v1.ConditionTrue, "KubeletHasInsufficientPID"},
		}},
		{"disk", []v1.NodeConditionType{v1.NodeDiskPressure}, map[v1.NodeConditionType]want{
			v1.NodeMemoryPressure: {v1.ConditionFalse, "KubeletHasSufficientMemory"},
			v1.NodeDiskPressure:   {v1.ConditionTrue, "KubeletHasDiskPressure"},
			v1.NodePIDPressure:    {v1.ConditionFalse, "KubeletHasSufficientPID"},
		}},
	} {
		pressure = step.pressure
		now = now.Add(10 * time.Second)
		if err := r.UpdateStatus(context.Background()); err != nil {
			t.Fatal(err)
		}
		got, _ := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
		for _, c := range got.Status.Conditions {
			w, ok := step.want[c.Type]
			if !ok {
				continue
			}
			if c.Status != w.status || c.Reason != w.reason {
				t.Errorf("%s: %s = %s %s, want %s %s", step.name, c.Type, c.Status, c.Reason, w.status, w.reason)
			}
		}
	}
}

// blockingStatus is a client whose node status patches after the first
// block until their context ends, as a request to an overloaded API server
// does without a timeout.
type blockingStatus struct {
	kubernetes.Interface
	patches atomic.Int32
	blocked chan struct{} // closed when a patch starts blocking
	once    sync.Once
}

func (b *blockingStatus) CoreV1() typedcorev1.CoreV1Interface {
	return blockingCore{b.Interface.CoreV1(), b}
}

type blockingCore struct {
	typedcorev1.CoreV1Interface
	b *blockingStatus
}

func (c blockingCore) Nodes() typedcorev1.NodeInterface {
	return blockingNodes{c.CoreV1Interface.Nodes(), c.b}
}

type blockingNodes struct {
	typedcorev1.NodeInterface
	b *blockingStatus
}

func (n blockingNodes) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*v1.Node, error) {
	if n.b.patches.Add(1) > 1 {
		n.b.once.Do(func() { close(n.b.blocked) })
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return n.NodeInterface.Patch(ctx, name, pt, data, opts, sub...)
}

func TestRegistrar_RunRenewsLeaseWhileStatusBlocks(t *testing.T) {
	client := fake.NewClientset()
	hb := &blockingStatus{Interface: client, blocked: make(chan struct{})}
	r := NewRegistrar(RegistrarConfig{Client: client, HeartbeatClient: hb, Node: localNode(),
		StatusUpdateFrequency: 5 * time.Millisecond, StatusReportFrequency: time.Nanosecond, LeaseDuration: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	select {
	case <-hb.blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("no status patch after registration within 10 s")
	}
	// Renewals after the status post hung: the Lease keeps its cadence.
	start := count(client, "update", "leases") + count(client, "create", "leases")
	deadline := time.Now().Add(10 * time.Second)
	for count(client, "update", "leases")+count(client, "create", "leases") < start+3 {
		if time.Now().After(deadline) {
			t.Fatalf("lease renewals while a status post hangs: %d, want %d more within 10 s",
				count(client, "update", "leases")+count(client, "create", "leases")-start, 3)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRegistrar_renewLeases_cadence: the Lease is renewed at once, then
// each wait (a quarter of the lease duration, lengthened by at most 4 %)
// begins only once the renewal before it has ended, as the kubelet's lease
// controller does.
func TestRegistrar_renewLeases_cadence(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset()
	renewing := make(chan string)
	release := make(chan struct{})
	client.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if v := a.GetVerb(); v == "create" || v == "update" {
			select {
			case renewing <- v:
				select {
				case <-release:
				case <-ctx.Done():
				}
			case <-ctx.Done():
			}
		}
		return false, nil, nil
	})
	r := NewRegistrar(RegistrarConfig{Client: client, Node: localNode(), LeaseDuration: 40 * time.Second})
	waits := make(chan time.Duration, 1)
	tick := make(chan time.Time)
	r.after = func(d time.Duration) <-chan time.Time {
		select {
		case waits <- d:
		case <-ctx.Done():
		}
		return tick
	}
	done := make(chan struct{})
	go func() { r.renewLeases(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	recv := func(what string, ch <-chan time.Duration) time.Duration {
		t.Helper()
		select {
		case d := <-ch:
			return d
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s within 10 s", what)
			return 0
		}
	}
	for i, verb := range []string{"create", "update", "update"} {
		select {
		case got := <-renewing:
			if got != verb {
				t.Fatalf("renewal %d: %s, want %s", i, got, verb)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("renewal %d did not start within 10 s", i)
		}
		select {
		case d := <-waits:
			t.Fatalf("renewal %d: a wait of %s began while the renewal ran", i, d)
		default:
		}
		release <- struct{}{}
		if d := recv("wait after the renewal", waits); d < 10*time.Second || d > 10400*time.Millisecond {
			t.Errorf("wait after renewal %d = %s, want 10 s to 10.4 s", i, d)
		}
		if i < 2 {
			tick <- time.Time{}
		}
	}
}
