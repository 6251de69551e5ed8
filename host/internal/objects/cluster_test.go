package objects

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/wasmlet/wasmlet/internal/syncbuf"
)

// patience bounds every wait for something asynchronous; tests never
// assert how fast it happens.
const patience = 30 * time.Second

// eventually polls f until it returns nil or patience runs out.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %s: %v", what, patience, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

func configMap(ns, name string, data map[string]string) *v1.ConfigMap {
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

func secret(ns, name string, data map[string]string) *v1.Secret {
	s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// podWith is a pod in ns referencing the ConfigMaps (through env) and
// Secrets (through volumes) named.
func podWith(ns, uid string, cms, secrets []string) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod-" + uid, UID: types.UID(uid)}}
	c := v1.Container{Name: "main"}
	for _, n := range cms {
		c.Env = append(c.Env, v1.EnvVar{Name: "V", ValueFrom: cmKeyRef(n)})
	}
	pod.Spec.Containers = []v1.Container{c}
	for _, n := range secrets {
		pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: n,
			VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: n}}})
	}
	return pod
}

// newTestCluster is a Cluster on a fake client holding objs; its watches
// are stopped when the test ends.
func newTestCluster(t *testing.T, objs ...runtime.Object) (*Cluster, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(objs...)
	c := NewCluster(ClusterConfig{Client: client, SyncTimeout: patience})
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, w := range c.watches {
			stopWatched(w)
		}
	})
	return c, client
}

// countActions counts the fake's actions with verb on resource.
func countActions(client *fake.Clientset, verb, resource string) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

func TestClusterWatchedObjects(t *testing.T) {
	ctx := testCtx(t)
	c, client := newTestCluster(t,
		configMap("default", "web", map[string]string{"a": "1"}),
		secret("default", "creds", map[string]string{"pw": "x"}),
		configMap("default", "other", nil),
	)
	c.RegisterPod(podWith("default", "u1", []string{"web"}, []string{"creds"}))
	if n := c.watchCount(); n != 2 {
		t.Fatalf("watchCount = %d, want 2", n)
	}

	cm, err := c.ConfigMap(ctx, "default", "web")
	if err != nil {
		t.Fatalf("ConfigMap: %v", err)
	}
	if cm.Data["a"] != "1" {
		t.Fatalf("ConfigMap data = %v", cm.Data)
	}
	cm.Data["a"] = "changed by caller" // a copy: must not reach the cache
	s, err := c.Secret(ctx, "default", "creds")
	if err != nil {
		t.Fatalf("Secret: %v", err)
	}
	if string(s.Data["pw"]) != "x" {
		t.Fatalf("Secret data = %v", s.Data)
	}

	updated := configMap("default", "web", map[string]string{"a": "2"})
	if _, err := client.CoreV1().ConfigMaps("default").Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "updated ConfigMap", func() error {
		cm, err := c.ConfigMap(ctx, "default", "web")
		if err != nil {
			return err
		}
		if cm.Data["a"] != "2" {
			return errors.New("data a = " + cm.Data["a"])
		}
		return nil
	})
	for _, res := range []string{"configmaps", "secrets"} {
		if n := countActions(client, "get", res); n != 0 {
			t.Errorf("%d GETs of %s; watched objects come from the cache", n, res)
		}
	}
}

func TestClusterMissingWatchedObject(t *testing.T) {
	ctx := testCtx(t)
	c, _ := newTestCluster(t)
	c.RegisterPod(podWith("default", "u1", []string{"nope"}, []string{"gone"}))

	_, err := c.ConfigMap(ctx, "default", "nope")
	if !apierrors.IsNotFound(err) {
		t.Fatalf("ConfigMap error = %v, want NotFound", err)
	}
	if want := `configmaps "nope" not found`; err.Error() != want {
		t.Errorf("error text = %q, want %q", err, want)
	}
	_, err = c.Secret(ctx, "default", "gone")
	if !apierrors.IsNotFound(err) || err.Error() != `secrets "gone" not found` {
		t.Errorf("Secret error = %v, want NotFound naming it", err)
	}
}

func TestClusterUnregisterStopsWatches(t *testing.T) {
	c, _ := newTestCluster(t)
	a := podWith("default", "a", []string{"shared", "only-a"}, []string{"s"})
	b := podWith("default", "b", []string{"shared"}, nil)
	c.RegisterPod(a)
	c.RegisterPod(b)
	if n := c.watchCount(); n != 3 {
		t.Fatalf("after registering a and b: watchCount = %d, want 3", n)
	}
	c.mu.Lock()
	shared := c.watches[objectKey{resConfigMaps, "default", "shared"}]
	c.mu.Unlock()

	c.UnregisterPod(a)
	if n := c.watchCount(); n != 1 {
		t.Fatalf("after unregistering a: watchCount = %d, want 1 (shared)", n)
	}
	c.RegisterPod(a)
	c.RegisterPod(a) // again: no double counting
	c.UnregisterPod(a)
	if n := c.watchCount(); n != 1 {
		t.Fatalf("after a re-registered twice and unregistered: watchCount = %d, want 1", n)
	}

	// Re-registering b without references releases what it had.
	c.RegisterPod(podWith("default", "b", nil, nil))
	if n := c.watchCount(); n != 0 {
		t.Fatalf("after b dropped its references: watchCount = %d, want 0", n)
	}
	select {
	case <-shared.stop:
	default:
		t.Fatal("the shared object's reflector was not stopped")
	}
	c.UnregisterPod(b) // nothing left: no-op
	c.UnregisterPod(nil)
	c.RegisterPod(nil)
}

func TestClusterUnreferencedObjectIsFetched(t *testing.T) {
	ctx := testCtx(t)
	c, client := newTestCluster(t, configMap("ns1", "cfg", map[string]string{"k": "v"}))
	cm, err := c.ConfigMap(ctx, "ns1", "cfg")
	if err != nil || cm.Data["k"] != "v" {
		t.Fatalf("ConfigMap = %v, %v", cm, err)
	}
	if g, l, w := countActions(client, "get", "configmaps"), countActions(client, "list", "configmaps"),
		countActions(client, "watch", "configmaps"); g != 1 || l != 0 || w != 0 {
		t.Errorf("get/list/watch calls = %d/%d/%d, want 1/0/0", g, l, w)
	}
	if c.watchCount() != 0 {
		t.Error("a lookup started a watch")
	}
	_, err = c.Secret(ctx, "ns1", "absent")
	if !apierrors.IsNotFound(err) || err.Error() != `secrets "absent" not found` {
		t.Errorf("Secret error = %v, want NotFound naming it", err)
	}
}

func TestClusterForbiddenWatchDoesNotHang(t *testing.T) {
	var logs syncbuf.Buffer
	client := fake.NewClientset(secret("default", "s", nil))
	var lists atomic.Int32
	client.PrependReactor("list", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists.Add(1)
		return true, nil, apierrors.NewForbidden(v1.Resource("secrets"), "", errors.New("no relationship found"))
	})
	c := NewCluster(ClusterConfig{Client: client, Logger: hclog.New(&hclog.LoggerOptions{Output: &logs})})
	pod := podWith("default", "u1", nil, []string{"s"})
	start := time.Now()
	c.RegisterPod(pod)
	defer c.UnregisterPod(pod)
	eventually(t, "first list", func() error {
		if lists.Load() == 0 {
			return errors.New("no list yet")
		}
		return nil
	})

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := c.Secret(ctx, "default", "s")
	if err == nil {
		t.Fatal("Secret succeeded although listing is forbidden")
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "secret default/s") {
		t.Errorf("error = %v, want the Forbidden list error naming secret default/s", err)
	}
	// client-go's backoff (0.8 s at first, growing) paces the retries;
	// allow far more calls than it makes.
	if n, limit := lists.Load(), 5+int32(2*time.Since(start).Seconds()); n > limit {
		t.Errorf("%d list calls in %s: the reflector spins", n, time.Since(start))
	}
	eventually(t, "log of the failing list", func() error {
		if !strings.Contains(logs.String(), "secret default/s") {
			return errors.New("not logged yet: " + logs.String())
		}
		return nil
	})
}

func TestClusterUnsyncedWatchReturnsContextError(t *testing.T) {
	client := fake.NewClientset()
	release := make(chan struct{})
	defer close(release)
	client.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-release // an API server that does not answer
		return true, nil, errors.New("released")
	})
	c := NewCluster(ClusterConfig{Client: client})
	pod := podWith("default", "u1", []string{"slow"}, nil)
	c.RegisterPod(pod)
	defer c.UnregisterPod(pod)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.ConfigMap(ctx, "default", "slow")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "configmap default/slow") {
		t.Errorf("error = %v, want a deadline error naming configmap default/slow", err)
	}
}

func TestClusterServicesAndRun(t *testing.T) {
	svc := func(ns, name string) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	c, client := newTestCluster(t, svc("b", "z"), svc("a", "y"), svc("a", "x"),
		configMap("default", "cfg", map[string]string{"k": "v"}))
	if _, err := c.Services(""); err == nil || !strings.Contains(err.Error(), "not synced") {
		t.Fatalf("Services before Run: err = %v, want 'not synced'", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(patience):
		}
	}()
	var all []*v1.Service
	eventually(t, "Services after Run", func() (err error) {
		all, err = c.Services("")
		return err
	})
	var names []string
	for _, s := range all {
		names = append(names, s.Namespace+"/"+s.Name)
	}
	if got, want := strings.Join(names, ","), "a/x,a/y,b/z"; got != want {
		t.Errorf("Services(\"\") = %s, want %s", got, want)
	}
	inA, err := c.Services("a")
	if err != nil || len(inA) != 2 {
		t.Errorf("Services(\"a\") = %d services, %v; want 2", len(inA), err)
	}
	none, err := c.Services("empty")
	if err != nil || len(none) != 0 {
		t.Errorf("Services(\"empty\") = %v, %v; want none", none, err)
	}

	// Ending Run stops the object watches; lookups then GET.
	c.RegisterPod(podWith("default", "u1", []string{"cfg"}, nil))
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run returned %v, want nil", err)
		}
		done <- nil
	case <-time.After(patience):
		t.Fatal("Run did not return after its context ended")
	}
	if n := c.watchCount(); n != 0 {
		t.Errorf("after Run: watchCount = %d, want 0", n)
	}
	cm, err := c.ConfigMap(testCtx(t), "default", "cfg")
	if err != nil || cm.Data["k"] != "v" {
		t.Errorf("ConfigMap after Run = %v, %v", cm, err)
	}
	if countActions(client, "get", "configmaps") != 1 {
		t.Error("ConfigMap after Run did not GET")
	}
}
