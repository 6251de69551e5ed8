package kubeletapi

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
)

// startNodeServer runs a server with e's endpoints; "admin" may do
// anything, "metrics" only read nodes/metrics.
func startNodeServer(t *testing.T, e NodeEndpoints) *env {
	t.Helper()
	env := &env{serverCA: newTestCA(t, "server-ca"), clientCA: newTestCA(t, "client-ca")}
	dir := t.TempDir()
	certPEM, keyPEM := env.serverCA.issue(t, &x509.Certificate{DNSNames: []string{"node-a"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	authz := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		switch {
		case a.GetUser().GetName() == "admin",
			a.GetUser().GetName() == "metrics" && a.GetSubresource() == "metrics" && a.GetVerb() == "get":
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionDeny, "", nil
	})
	s, err := newServer(Config{
		TLSCertFile: writeFile(t, dir, "tls.crt", certPEM), TLSKeyFile: writeFile(t, dir, "tls.key", keyPEM),
		ClientCAFile: writeFile(t, dir, "ca.crt", env.clientCA.pem), NodeName: "node-a",
	}, options{authorizer: authz, listener: ln})
	if err != nil {
		t.Fatal(err)
	}
	RegisterNodeEndpoints(s, e)
	env.addr = s.Addr().String()
	runServer(t, s)
	return env
}

func TestNodeEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	probes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "prober_probe_total", Help: "probes"}, []string{"pod"})
	other := prometheus.NewCounter(prometheus.CounterOpts{Name: "wasmlet_other_total", Help: "other"})
	reg.MustRegister(probes, other)
	probes.WithLabelValues("web").Add(3)
	other.Inc()
	var down atomic.Bool
	e := startNodeServer(t, NodeEndpoints{
		Pods: func() []v1.Pod { return []v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "web"}}} },
		RunningPods: func(context.Context) ([]v1.Pod, error) {
			if down.Load() {
				return nil, errors.New("runtime down")
			}
			return []v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "running"}}}, nil
		},
		Config:          func() *kubeletconfig.KubeletConfiguration { return &kubeletconfig.KubeletConfiguration{Port: 10250} },
		Gatherer:        reg,
		Summary:         http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"node":{}}`)) }),
		ResourceMetrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("resource_scrape_error 0\n")) }),
	})
	admin := e.client(t, "admin")
	base := "https://" + e.addr
	for path, name := range map[string]string{"/pods": "web", "/runningpods/": "running"} {
		code, body := get(t, admin, base+path)
		var l v1.PodList
		if err := json.Unmarshal([]byte(body), &l); code != 200 || err != nil || l.Kind != "PodList" || len(l.Items) != 1 || l.Items[0].Name != name {
			t.Errorf("%s: %d %s; want a PodList of %s", path, code, body, name)
		}
	}
	var cz struct {
		KubeletConfig kubeletconfig.KubeletConfiguration `json:"kubeletconfig"`
	}
	if code, body := get(t, admin, base+"/configz"); code != 200 || json.Unmarshal([]byte(body), &cz) != nil || cz.KubeletConfig.Port != 10250 {
		t.Errorf("/configz: %d %s; want the configuration under kubeletconfig", code, body)
	}
	if code, body := get(t, admin, base+"/metrics"); code != 200 || !strings.Contains(body, "wasmlet_other_total 1") || !strings.Contains(body, `prober_probe_total{pod="web"} 3`) {
		t.Errorf("/metrics: %d %s; want every metric", code, body)
	}
	if code, body := get(t, admin, base+"/metrics/probes"); code != 200 || strings.Contains(body, "wasmlet_other_total") || !strings.Contains(body, `prober_probe_total{pod="web"} 3`) {
		t.Errorf("/metrics/probes: %d %s; want the prober's only", code, body)
	}
	if code, body := get(t, admin, base+"/stats/summary"); code != 200 || body != `{"node":{}}` {
		t.Errorf("/stats/summary: %d %s", code, body)
	}
	// nodes/metrics lets a reader scrape, not list pods or read stats.
	reader := e.client(t, "metrics")
	if code, body := get(t, reader, base+"/metrics/resource"); code != 200 || body != "resource_scrape_error 0\n" {
		t.Errorf("/metrics/resource as a metrics reader: %d %s", code, body)
	}
	for path, subs := range map[string]string{"/pods": "[pods proxy]", "/stats/summary": "[stats]", "/configz": "[configz proxy]"} {
		if code, body := get(t, reader, base+path); code != 403 || !strings.Contains(body, subs) {
			t.Errorf("%s as a metrics reader: %d %s; want 403 naming %s", path, code, body, subs)
		}
	}
	down.Store(true)
	if code, body := get(t, admin, base+"/runningpods/"); code != 500 || !strings.Contains(body, "runtime down") {
		t.Errorf("/runningpods/ with the runtime down: %d %s", code, body)
	}
}
