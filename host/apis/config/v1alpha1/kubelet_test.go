package v1alpha1

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

// everyShared is a defaulted configuration with every setting it shares
// with KubeletConfiguration set to a value other than its zero value.
func everyShared() WasmletConfiguration {
	c := defaults()
	c.StaticPodPath, c.ClusterDomain, c.ClusterDNS = "/etc/wasmlet/manifests", "cluster.local", []string{"10.96.0.10"}
	c.ContainerRuntimeEndpoint, c.ImageServiceEndpoint = "unix:///run/containerd/containerd.sock", "unix:///run/img.sock"
	c.TLSCertFile, c.TLSPrivateKeyFile, c.ServerTLSBootstrap, c.RotateCertificates = "/c.pem", "/k.pem", true, ptr.To(true)
	c.Authentication.X509.ClientCAFile = "/ca.pem"
	c.Authentication.Webhook.CacheTTL = dur(time.Minute)
	c.Authorization.Webhook.CacheAuthorizedTTL = dur(time.Minute)
	c.ProviderID, c.RegisterWithTaints = "aws:///eu-west-1a/i-0abc", []v1.Taint{{Key: "pool", Value: "gpu", Effect: v1.TaintEffectNoSchedule}}
	c.KubeReserved, c.SystemReserved = map[string]string{"cpu": "100m"}, map[string]string{"memory": "500Mi"}
	c.ImageMaximumGCAge = dur(time.Hour)
	c.EvictionSoft, c.EvictionSoftGracePeriod = map[string]string{"memory.available": "1Gi"}, map[string]string{"memory.available": "1m30s"}
	c.EvictionMaxPodGracePeriod, c.EvictionMinimumReclaim = 30, map[string]string{"nodefs.available": "500Mi"}
	c.KernelMemcgNotification = true
	return c
}

// configz decodes k as a /configz reader does: {"kubeletconfig": …} into
// the kubelet's own type, here refusing a field that type has not.
func configz(t *testing.T, k *kubeletconfig.KubeletConfiguration) (kubeletconfig.KubeletConfiguration, map[string]any) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"kubeletconfig": k})
	if err != nil {
		t.Fatal(err)
	}
	var typed struct {
		KubeletConfig kubeletconfig.KubeletConfiguration `json:"kubeletconfig"`
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&typed); err != nil {
		t.Fatalf("%s does not decode as a KubeletConfiguration: %v", b, err)
	}
	var raw struct {
		KubeletConfig map[string]any `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	return typed.KubeletConfig, raw.KubeletConfig
}

// jsonNames are the JSON names of t's fields.
func jsonNames(t reflect.Type) map[string]bool {
	names := map[string]bool{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names[name] = true
		}
	}
	return names
}

// TestWasmletConfiguration_KubeletConfiguration_everyShared: every field
// whose JSON name KubeletConfiguration has too comes across under it.
func TestWasmletConfiguration_KubeletConfiguration_everyShared(t *testing.T) {
	c := everyShared()
	_, raw := configz(t, c.KubeletConfiguration())
	kubelet := jsonNames(reflect.TypeFor[kubeletconfig.KubeletConfiguration]())
	for name := range jsonNames(reflect.TypeFor[WasmletConfiguration]()) {
		if kubelet[name] && raw[name] == nil {
			t.Errorf("%s: not in /configz; convert it in KubeletConfiguration (and set it in everyShared)", name)
		}
	}
	for _, name := range []string{"nodeName", "rootDir", "pluginDir", "housekeepingInterval", "containerGCPeriod", "plegRelistPeriod", "imageGCPeriod", "nodeLabels", "nodeIP"} {
		if raw[name] != nil {
			t.Errorf("%s: in /configz, which has no such field", name)
		}
	}
}

func TestWasmletConfiguration_KubeletConfiguration(t *testing.T) {
	tests := []struct {
		name string
		in   func(*WasmletConfiguration) // applied to everyShared()
		want func(*kubeletconfig.KubeletConfiguration)
	}{
		{"every shared setting", func(*WasmletConfiguration) {}, func(*kubeletconfig.KubeletConfiguration) {}},
		{"ports 0 are disabled servers", func(c *WasmletConfiguration) { c.ReadOnlyPort, c.Port, c.HealthzPort = ptr.To(0), ptr.To(0), ptr.To(0) },
			func(k *kubeletconfig.KubeletConfiguration) {
				k.ReadOnlyPort, k.Port, k.HealthzPort = 0, 0, ptr.To[int32](0)
			}},
		{"the kubelet API's address", func(c *WasmletConfiguration) { c.SecureAddress, c.Address = "192.0.2.1", "127.0.0.2" },
			func(k *kubeletconfig.KubeletConfiguration) { k.Address = "192.0.2.1" }},
		{"JSON logs", func(c *WasmletConfiguration) { c.LogJSON = true },
			func(k *kubeletconfig.KubeletConfiguration) { k.Logging.Format = "json" }},
		{"no cgroups per QoS, an empty resolver file",
			func(c *WasmletConfiguration) { c.CgroupsPerQOS, c.ResolvConf = ptr.To(false), ptr.To("") },
			func(k *kubeletconfig.KubeletConfiguration) {
				k.CgroupsPerQOS, k.ResolverConfig = ptr.To(false), ptr.To("")
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := everyShared()
			tt.in(&c)
			want := kubeletconfig.KubeletConfiguration{
				StaticPodPath: "/etc/wasmlet/manifests", PodLogsDir: "/var/log/pods",
				SyncFrequency: dur(time.Minute), FileCheckFrequency: dur(20 * time.Second),
				Address: "0.0.0.0", Port: 10250, ReadOnlyPort: 10255,
				TLSCertFile: "/c.pem", TLSPrivateKeyFile: "/k.pem", RotateCertificates: true, ServerTLSBootstrap: true,
				Authentication: kubeletconfig.KubeletAuthentication{
					X509:      kubeletconfig.KubeletX509Authentication{ClientCAFile: "/ca.pem"},
					Webhook:   kubeletconfig.KubeletWebhookAuthentication{Enabled: ptr.To(true), CacheTTL: dur(time.Minute)},
					Anonymous: kubeletconfig.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
				},
				Authorization: kubeletconfig.KubeletAuthorization{Mode: kubeletconfig.KubeletAuthorizationModeAlwaysAllow,
					Webhook: kubeletconfig.KubeletWebhookAuthorization{CacheAuthorizedTTL: dur(time.Minute)}},
				HealthzPort: ptr.To[int32](10248), HealthzBindAddress: "127.0.0.1",
				ClusterDomain: "cluster.local", ClusterDNS: []string{"10.96.0.10"},
				NodeStatusUpdateFrequency: dur(10 * time.Second), NodeStatusReportFrequency: dur(5 * time.Minute),
				VolumeStatsAggPeriod: dur(time.Minute), CgroupRoot: "/", CgroupsPerQOS: ptr.To(true), CgroupDriver: "cgroupfs",
				RuntimeRequestTimeout: dur(2 * time.Minute), MaxPods: 110, ResolverConfig: ptr.To("/etc/resolv.conf"),
				KubeAPIQPS: ptr.To[int32](50), KubeAPIBurst: 100, ContainerLogMaxSize: "10Mi", ContainerLogMaxFiles: ptr.To[int32](5),
				ContainerRuntimeEndpoint: "unix:///run/containerd/containerd.sock", ImageServiceEndpoint: "unix:///run/img.sock",
				RegisterWithTaints: []v1.Taint{{Key: "pool", Value: "gpu", Effect: v1.TaintEffectNoSchedule}}, RegisterNode: ptr.To(true),
				ProviderID: "aws:///eu-west-1a/i-0abc", KubeReserved: map[string]string{"cpu": "100m"}, SystemReserved: map[string]string{"memory": "500Mi"},
				EvictionHard:                map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%", "imagefs.inodesFree": "5%"},
				ImageGCHighThresholdPercent: ptr.To[int32](85), ImageGCLowThresholdPercent: ptr.To[int32](80),
				ImageMinimumGCAge: dur(2 * time.Minute), ImageMaximumGCAge: dur(time.Hour),
				EvictionPressureTransitionPeriod: dur(5 * time.Minute),
				EvictionSoft:                     map[string]string{"memory.available": "1Gi"}, EvictionSoftGracePeriod: map[string]string{"memory.available": "1m30s"},
				EvictionMaxPodGracePeriod: 30, EvictionMinimumReclaim: map[string]string{"nodefs.available": "500Mi"}, KernelMemcgNotification: true,
			}
			want.Kind, want.APIVersion, want.Logging.Format = "KubeletConfiguration", "kubelet.config.k8s.io/v1beta1", "text"
			tt.want(&want)
			// Compared as JSON: decoding fills the logging options'
			// internals, which a literal leaves nil.
			got, _ := configz(t, c.KubeletConfiguration())
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			if string(g) != string(w) {
				t.Errorf("got\n%s\nwant\n%s", g, w)
			}
		})
	}
}
