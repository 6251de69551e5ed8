package v1alpha1

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

// defaults is what SetDefaults makes of an empty configuration on node n1,
// written out.
func defaults() WasmletConfiguration {
	c := WasmletConfiguration{
		TypeMeta: metav1.TypeMeta{Kind: "WasmletConfiguration", APIVersion: "wasmlet.io/v1alpha1"},
		NodeName: "n1", FileCheckFrequency: dur(20 * time.Second), ResolvConf: ptr.To("/etc/resolv.conf"),
		PluginIdleTimeout: ptr.To(dur(10 * time.Second)), PluginResolveInterval: dur(5 * time.Minute), CgroupsPerQOS: ptr.To(true), CgroupDriver: "cgroupfs", CgroupRoot: "/",
		RuntimeRequestTimeout: dur(2 * time.Minute), RootDir: "/var/lib/wasmlet", PodLogsDir: "/var/log/pods",
		SyncFrequency: dur(time.Minute), HousekeepingInterval: dur(2 * time.Second), ContainerGCPeriod: dur(time.Minute),
		PLEGRelistPeriod: dur(time.Second), VolumeStatsAggPeriod: dur(time.Minute), MaxPods: 110, Address: "127.0.0.1",
		ReadOnlyPort: ptr.To(10255), HealthzPort: ptr.To(10248), HealthzBindAddress: "127.0.0.1", ContainerLogSymlinkDir: "/var/log/containers", ContainerLogMaxSize: "10Mi", ContainerLogMaxFiles: 5, LogLevel: "info",
		CertDir: "/var/lib/wasmlet/pki", RotateCertificates: ptr.To(false), KubeAPIQPS: 50, KubeAPIBurst: 100,
		NodeStatusUpdateFrequency: dur(10 * time.Second), NodeStatusReportFrequency: dur(5 * time.Minute), Port: ptr.To(10250),
	}
	c.Authentication.Webhook.Enabled = ptr.To(true)
	c.Authentication.Anonymous.Enabled = ptr.To(false)
	c.Authorization.Mode = kubeletconfig.KubeletAuthorizationModeAlwaysAllow
	c.RegisterNode = ptr.To(true)
	c.EvictionHard = map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%", "imagefs.inodesFree": "5%"}
	c.ImageGCHighThresholdPercent, c.ImageGCLowThresholdPercent = ptr.To[int32](85), ptr.To[int32](80)
	c.ImageMinimumGCAge, c.ImageGCPeriod = dur(2*time.Minute), dur(5*time.Minute)
	c.EvictionPressureTransitionPeriod = dur(5 * time.Minute)
	return c
}

func TestWasmletConfiguration_SetDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   WasmletConfiguration
		want func(*WasmletConfiguration) // applied to defaults()
	}{
		{"empty", WasmletConfiguration{NodeName: "n1"}, func(*WasmletConfiguration) {}},
		{"node name lower-cased", WasmletConfiguration{NodeName: "Node-A"}, func(c *WasmletConfiguration) { c.NodeName = "node-a" }},
		{"zero values that mean something are kept",
			WasmletConfiguration{NodeName: "n1", ReadOnlyPort: ptr.To(0), Port: ptr.To(0), HealthzPort: ptr.To(0), PluginIdleTimeout: &metav1.Duration{},
				CgroupsPerQOS: ptr.To(false), ResolvConf: ptr.To(""), RotateCertificates: ptr.To(false)},
			func(c *WasmletConfiguration) {
				c.ReadOnlyPort, c.Port, c.HealthzPort, c.PluginIdleTimeout = ptr.To(0), ptr.To(0), ptr.To(0), &metav1.Duration{}
				c.CgroupsPerQOS, c.ResolvConf = ptr.To(false), ptr.To("")
			}},
		{"values set are kept",
			WasmletConfiguration{NodeName: "n1", SyncFrequency: dur(time.Second), MaxPods: 7, LogLevel: "debug", CgroupDriver: "systemd", ContainerLogMaxSize: "1Mi"},
			func(c *WasmletConfiguration) {
				c.SyncFrequency, c.MaxPods, c.LogLevel, c.CgroupDriver, c.ContainerLogMaxSize = dur(time.Second), 7, "debug", "systemd", "1Mi"
			}},
		{"the certificate directory follows the root", WasmletConfiguration{NodeName: "n1", RootDir: "/r"},
			func(c *WasmletConfiguration) { c.RootDir, c.CertDir = "/r", "/r/pki" }},
		{"a certificate directory set is kept", WasmletConfiguration{NodeName: "n1", RootDir: "/r", CertDir: "/pki"},
			func(c *WasmletConfiguration) { c.RootDir, c.CertDir = "/r", "/pki" }},
		{"bootstrapping rotates", WasmletConfiguration{NodeName: "n1", KubeConfig: "/k", BootstrapKubeConfig: "/b"},
			func(c *WasmletConfiguration) {
				c.KubeConfig, c.BootstrapKubeConfig, c.RotateCertificates = "/k", "/b", ptr.To(true)
				c.Authorization.Mode = kubeletconfig.KubeletAuthorizationModeWebhook
			}},
		{"a cluster node authorizes by webhook", WasmletConfiguration{NodeName: "n1", KubeConfig: "/k"},
			func(c *WasmletConfiguration) {
				c.KubeConfig, c.Authorization.Mode = "/k", kubeletconfig.KubeletAuthorizationModeWebhook
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := defaults()
			tt.want(&want)
			got := tt.in
			got.SetDefaults()
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got\n%s\nwant\n%s", asJSON(got), asJSON(want))
			}
			again := got
			again.SetDefaults()
			if !reflect.DeepEqual(again, got) {
				t.Errorf("not idempotent: again\n%s", asJSON(again))
			}
		})
	}
}

func TestWasmletConfiguration_SetDefaults_hostName(t *testing.T) {
	h, err := os.Hostname()
	if err != nil {
		t.Skip(err)
	}
	var c WasmletConfiguration
	c.SetDefaults()
	if c.NodeName != strings.ToLower(h) {
		t.Errorf("NodeName %q, want the host name %q lower-cased", c.NodeName, h)
	}
}
