package agent

import (
	"testing"
	"time"

	kubeletconfig "k8s.io/kubelet/config/v1beta1"

	"github.com/wasmlet/wasmlet/host/apis/config/v1alpha1"
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
