package cluster

import (
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
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
