package v1alpha1

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestWasmletConfiguration_Validate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*WasmletConfiguration) // applied to defaults()
		want []string                    // "<field.ErrorType> <field>" of each error, in order
	}{
		{"defaults", func(*WasmletConfiguration) {}, nil},
		{"zero ports", func(c *WasmletConfiguration) { c.ReadOnlyPort, c.Port = ptr.To(0), ptr.To(0) }, nil},
		{"a cluster node with certificates", func(c *WasmletConfiguration) {
			c.KubeConfig, c.BootstrapKubeConfig, c.RotateCertificates, c.ServerTLSBootstrap = "/k", "/b", ptr.To(true), true
			c.TLSCertFile, c.TLSPrivateKeyFile = "/c", "/k"
			c.ClusterDNS = []string{"10.96.0.10", "fd00::a"}
		}, nil},
		{"allowed node labels and taints", func(c *WasmletConfiguration) {
			c.NodeLabels = map[string]string{"pool": "gpu", "node.kubernetes.io/tier": "a", "x.kubelet.kubernetes.io/y": "b", "topology.kubernetes.io/zone": "z", "example.com/k": ""}
			c.RegisterWithTaints = []v1.Taint{{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoExecute}}
			c.NodeIP = "10.0.0.5,fd00::5"
		}, nil},
		{"labels NodeRestriction refuses", func(c *WasmletConfiguration) {
			c.NodeLabels = map[string]string{"node-role.kubernetes.io/worker": "", "k8s.io/x": "y", "bad key": "v", "ok": "bad value!"}
		}, []string{"FieldValueInvalid nodeLabels[bad key]", "FieldValueForbidden nodeLabels[k8s.io/x]", "FieldValueForbidden nodeLabels[node-role.kubernetes.io/worker]", "FieldValueInvalid nodeLabels[ok]"}},
		{"taints", func(c *WasmletConfiguration) {
			c.RegisterWithTaints = []v1.Taint{{Key: "a b", Effect: v1.TaintEffectNoSchedule}, {Key: "k", Effect: "Never"}}
		}, []string{"FieldValueInvalid registerWithTaints[0].key", "FieldValueNotSupported registerWithTaints[1].effect"}},
		{"node IPs", func(c *WasmletConfiguration) { c.NodeIP = "10.0.0.1,10.0.0.2" }, []string{"FieldValueInvalid nodeIP"}},
		{"node IP not an address", func(c *WasmletConfiguration) { c.NodeIP = "host" }, []string{"FieldValueInvalid nodeIP"}},
		{"image GC thresholds", func(c *WasmletConfiguration) {
			c.ImageGCHighThresholdPercent, c.ImageGCLowThresholdPercent = ptr.To[int32](101), ptr.To[int32](90)
		}, []string{"FieldValueInvalid imageGCHighThresholdPercent"}},
		{"image GC low above high", func(c *WasmletConfiguration) {
			c.ImageGCHighThresholdPercent, c.ImageGCLowThresholdPercent = ptr.To[int32](50), ptr.To[int32](60)
		}, []string{"FieldValueInvalid imageGCLowThresholdPercent"}},
		{"image GC ages", func(c *WasmletConfiguration) { c.ImageMaximumGCAge = dur(time.Minute) }, []string{"FieldValueInvalid imageMaximumGCAge"}},
		{"no node name", func(c *WasmletConfiguration) { c.NodeName = "" }, []string{"FieldValueRequired nodeName"}},
		{"no root", func(c *WasmletConfiguration) { c.RootDir = "" }, []string{"FieldValueRequired rootDir"}},
		{"periods", func(c *WasmletConfiguration) {
			c.FileCheckFrequency, c.SyncFrequency, c.NodeStatusReportFrequency = dur(-time.Second), dur(0), dur(-1)
		}, []string{"FieldValueInvalid fileCheckFrequency", "FieldValueInvalid syncFrequency", "FieldValueInvalid nodeStatusReportFrequency"}},
		{"credential providers", func(c *WasmletConfiguration) {
			c.ImageCredentialProviderConfig, c.ImageCredentialProviderBinDir = "/p.yaml", "/bin"
		}, nil},
		{"credential provider config without bin dir", func(c *WasmletConfiguration) { c.ImageCredentialProviderConfig = "/p.yaml" },
			[]string{"FieldValueRequired imageCredentialProviderBinDir"}},
		{"plugin resolve interval", func(c *WasmletConfiguration) { c.PluginResolveInterval = dur(0) }, []string{"FieldValueInvalid pluginResolveInterval"}},
		{"negative timeouts", func(c *WasmletConfiguration) {
			c.PluginIdleTimeout = ptr.To(dur(-time.Second))
			c.Authentication.Webhook.CacheTTL = dur(-time.Second)
			c.Authorization.Webhook.CacheAuthorizedTTL = dur(-time.Second)
			c.Authorization.Webhook.CacheUnauthorizedTTL = dur(-time.Second)
		}, []string{"FieldValueInvalid pluginIdleTimeout", "FieldValueInvalid authentication.webhook.cacheTTL",
			"FieldValueInvalid authorization.webhook.cacheAuthorizedTTL", "FieldValueInvalid authorization.webhook.cacheUnauthorizedTTL"}},
		{"counts", func(c *WasmletConfiguration) {
			c.MaxPods, c.ContainerLogMaxFiles, c.KubeAPIQPS, c.KubeAPIBurst = 0, 1, -1, 0
		}, []string{"FieldValueInvalid maxPods", "FieldValueInvalid containerLogMaxFiles", "FieldValueInvalid kubeAPIQPS", "FieldValueInvalid kubeAPIBurst"}},
		{"ports", func(c *WasmletConfiguration) {
			c.ReadOnlyPort, c.Port, c.HealthzPort = ptr.To(-1), ptr.To(65536), ptr.To(70000)
		},
			[]string{"FieldValueInvalid readOnlyPort", "FieldValueInvalid port", "FieldValueInvalid healthzPort"}},
		{"log size not a quantity", func(c *WasmletConfiguration) { c.ContainerLogMaxSize = "big" }, []string{"FieldValueInvalid containerLogMaxSize"}},
		{"log size zero", func(c *WasmletConfiguration) { c.ContainerLogMaxSize = "0" }, []string{"FieldValueInvalid containerLogMaxSize"}},
		{"cluster DNS", func(c *WasmletConfiguration) { c.ClusterDNS = []string{"10.96.0.10", "dns.local"} }, []string{"FieldValueInvalid clusterDNS[1]"}},
		{"cgroup driver", func(c *WasmletConfiguration) { c.CgroupDriver = "cgroupv2" }, []string{"FieldValueNotSupported cgroupDriver"}},
		{"log level", func(c *WasmletConfiguration) { c.LogLevel = "loud" }, []string{"FieldValueNotSupported logLevel"}},
		{"authorization mode", func(c *WasmletConfiguration) { c.Authorization.Mode = "RBAC" }, []string{"FieldValueNotSupported authorization.mode"}},
		{"key without certificate", func(c *WasmletConfiguration) { c.TLSPrivateKeyFile = "/k" }, []string{"FieldValueRequired tlsCertFile"}},
		{"certificate without key", func(c *WasmletConfiguration) { c.TLSCertFile = "/c" }, []string{"FieldValueRequired tlsPrivateKeyFile"}},
		{"certificates without kubeconfig", func(c *WasmletConfiguration) {
			c.BootstrapKubeConfig, c.RotateCertificates, c.ServerTLSBootstrap = "/b", ptr.To(true), true
		}, []string{"FieldValueInvalid bootstrapKubeconfig", "FieldValueInvalid rotateCertificates", "FieldValueInvalid serverTLSBootstrap"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := defaults()
			tt.edit(&c)
			errs := c.Validate()
			var got []string
			for _, e := range errs {
				got = append(got, string(e.Type)+" "+e.Field)
			}
			if strings.Join(got, "; ") != strings.Join(tt.want, "; ") {
				t.Errorf("errors %v\nwant %v\n(%v)", got, tt.want, errs.ToAggregate())
			}
			// The message names the field as the file does.
			for _, e := range errs {
				if !strings.HasPrefix(e.Error(), e.Field+": ") {
					t.Errorf("%q does not start with its field %q", e.Error(), e.Field)
				}
			}
		})
	}
}

// TestWasmletConfiguration_Validate_message: a bad value's error says the
// value and why.
func TestWasmletConfiguration_Validate_message(t *testing.T) {
	c := defaults()
	c.SyncFrequency = metav1.Duration{Duration: -time.Second}
	if got, want := c.Validate().ToAggregate().Error(), `syncFrequency: Invalid value: "-1s": must be positive`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
