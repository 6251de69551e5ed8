package cluster

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wasmlet/wasmlet/host/internal/config"
	"github.com/wasmlet/wasmlet/host/internal/pod"
)

func TestResourceOf(t *testing.T) {
	for _, c := range []struct{ path, want string }{
		{"/api/v1/pods", "pods"},
		{"/api/v1/namespaces/default/pods/web/status", "pods/status"},
		{"/api/v1/namespaces/default/pods/web", "pods"},
		{"/api/v1/namespaces/default/events", "events"},
		{"/api/v1/nodes/n1/status", "nodes/status"},
		{"/api/v1/nodes", "nodes"},
		{"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", "leases"},
		{"/api/v1/namespaces/default", "namespaces"},
		{"/healthz", "/healthz"},
	} {
		if got := resourceOf(c.path); got != c.want {
			t.Errorf("resourceOf(%q) = %q, want %q", c.path, got, c.want)
		}
	}
}

func TestCluster_heartbeatConfig(t *testing.T) {
	for _, c := range []struct {
		name        string
		statusEvery time.Duration
		want        time.Duration
	}{
		{"the kubelet's default period", 0, 10 * time.Second},
		{"a shorter period", 4 * time.Second, 4 * time.Second},
		{"at most the lease duration", 5 * time.Minute, 40 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			main := &rest.Config{Host: "https://api", QPS: 50, Burst: 100, UserAgent: "wasmlet"}
			hb := heartbeatConfig(main, c.statusEvery)
			if hb.QPS >= 0 || hb.RateLimiter != nil || hb.Timeout != c.want {
				t.Errorf("heartbeat QPS %v limiter %v timeout %v; want no rate limit and timeout %v", hb.QPS, hb.RateLimiter, hb.Timeout, c.want)
			}
			if hb.Host != main.Host || hb.UserAgent != main.UserAgent {
				t.Errorf("heartbeat host %q agent %q, want the main client's", hb.Host, hb.UserAgent)
			}
			if main.QPS != 50 || main.Timeout != 0 {
				t.Errorf("the main config changed: QPS %v timeout %v", main.QPS, main.Timeout)
			}
			// A client with no rate limiter can be built from it.
			if _, err := kubernetes.NewForConfig(hb); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCluster_apiPod(t *testing.T) {
	static := func(hash string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-n1", Namespace: "default", UID: types.UID(hash),
			Annotations: map[string]string{config.AnnotationSource: config.FileSource, config.AnnotationHash: hash}}}
	}
	mirror := func(hash string, deleting bool) *v1.Pod {
		m := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-n1", Namespace: "default", UID: types.UID("m-" + hash),
			Annotations: map[string]string{config.AnnotationSource: config.APIServerSource, config.AnnotationMirror: hash}}}
		if deleting {
			m.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		return m
	}
	apiPod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "default", UID: "api-uid",
		Annotations: map[string]string{config.AnnotationSource: config.APIServerSource}}}
	for _, c := range []struct {
		name   string
		pod    *v1.Pod
		mirror *v1.Pod
		want   types.UID // "" for none
	}{
		{name: "a static pod's own mirror", pod: static("h1"), mirror: mirror("h1", false), want: "m-h1"},
		{name: "no mirror yet", pod: static("h1")},
		{name: "a mirror being deleted", pod: static("h1"), mirror: mirror("h1", true)},
		{name: "the mirror of the static pod a changed manifest replaces", pod: static("h2"), mirror: mirror("h1", false)},
		{name: "an API pod is its own", pod: apiPod, want: "api-uid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pm := pod.New()
			pm.AddPod(c.pod)
			if c.mirror != nil {
				pm.AddPod(c.mirror)
			}
			got, ok := (&Cluster{pods: pm}).apiPod(c.pod)
			if ok != (c.want != "") || ok && got.UID != c.want {
				t.Errorf("apiPod = %v %v, want %q", got, ok, c.want)
			}
		})
	}
}
