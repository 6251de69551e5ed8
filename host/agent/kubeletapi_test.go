package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/wasmlet/wasmlet/host/apis/config/v1alpha1"
	"github.com/wasmlet/wasmlet/host/internal/container"
	"github.com/wasmlet/wasmlet/host/internal/stats"
)

// TestAgent_configz: /configz holds the agent's settings under the
// kubelet's names, defaults filled, and what the agent made of them: no
// TokenReview and no kubelet API on a standalone node without a client CA.
// (That it decodes as a KubeletConfiguration is v1alpha1's test.)
func TestAgent_configz(t *testing.T) {
	cfg, err := Config{WasmletConfiguration: v1alpha1.WasmletConfiguration{
		NodeName: "n1", ClusterDomain: "cluster.local", StaticPodPath: "/etc/wasmlet/manifests",
	}}.complete()
	if err != nil {
		t.Fatal(err)
	}
	k := (&Agent{cfg: cfg}).configz()
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"kind", k.Kind, "KubeletConfiguration"},
		{"apiVersion", k.APIVersion, "kubelet.config.k8s.io/v1beta1"},
		{"staticPodPath", k.StaticPodPath, "/etc/wasmlet/manifests"},
		{"clusterDomain", k.ClusterDomain, "cluster.local"},
		{"syncFrequency", k.SyncFrequency.Duration, time.Minute},
		{"fileCheckFrequency", k.FileCheckFrequency.Duration, 20 * time.Second},
		{"address", k.Address, "0.0.0.0"},
		{"port", k.Port, int32(10250)},
		{"readOnlyPort", k.ReadOnlyPort, int32(10255)},
		{"healthzPort", *k.HealthzPort, int32(10248)},
		{"healthzBindAddress", k.HealthzBindAddress, "127.0.0.1"},
		{"podLogsDir", k.PodLogsDir, "/var/log/pods"},
		{"maxPods", k.MaxPods, int32(110)},
		{"cgroupsPerQOS", *k.CgroupsPerQOS, true},
		{"authorization.mode", k.Authorization.Mode, kubeletconfig.KubeletAuthorizationModeAlwaysAllow},
		{"authentication.webhook.enabled", *k.Authentication.Webhook.Enabled, false},
		{"enableServer", *k.EnableServer, false},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}

// noStats is a runtime with no sandboxes and no containers.
type noStats struct{}

func (noStats) Stats(context.Context) (*container.RuntimeStats, error) {
	return &container.RuntimeStats{}, nil
}
func (noStats) SandboxPID(context.Context, string) (int, error) { return 0, nil }

// TestAgent_readOnlyHandlers: the read-only port's /stats/summary is the
// stats provider's summary, and 503 while the agent's parts are not built.
func TestAgent_readOnlyHandlers(t *testing.T) {
	a := &Agent{stats: stats.New(stats.Config{NodeName: "n1", Runtime: noStats{}, RootDir: t.TempDir()})}
	summary := a.readOnlyHandlers()["/stats/summary"]
	if summary == nil {
		t.Fatal("no /stats/summary on the read-only port")
	}
	get := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		summary.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/stats/summary", nil))
		return w
	}
	if w := get(); w.Code != http.StatusServiceUnavailable {
		t.Errorf("before the parts are built: %d %s, want 503", w.Code, w.Body)
	}
	a.built.Store(true)
	w := get()
	var s statsapi.Summary
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &s) != nil || s.Node.NodeName != "n1" {
		t.Errorf("built: %d %s, want the node's summary", w.Code, w.Body)
	}
}
