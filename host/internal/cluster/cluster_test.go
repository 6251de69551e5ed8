package cluster

import "testing"

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
