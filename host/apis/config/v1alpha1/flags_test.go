package v1alpha1

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestWasmletConfiguration_AddFlags(t *testing.T) {
	tests := []struct {
		name    string
		start   WasmletConfiguration // what the file set
		args    []string
		want    func(*WasmletConfiguration) // applied to start
		wantErr string
	}{
		{"no flags change nothing", WasmletConfiguration{MaxPods: 7, ReadOnlyPort: ptr.To(0)}, nil, func(*WasmletConfiguration) {}, ""},
		{"values", WasmletConfiguration{}, []string{"--node-name=n", "--sync-frequency=3s", "--max-pods=9", "--container-log-max-size=1Mi", "--log-json",
			"--client-ca-file=/ca", "--authorization-mode=Webhook", "--rotate-server-certificates", "--kube-api-qps=5"},
			func(c *WasmletConfiguration) {
				c.NodeName, c.SyncFrequency, c.MaxPods, c.ContainerLogMaxSize, c.LogJSON = "n", dur(3*time.Second), 9, "1Mi", true
				c.Authentication.X509.ClientCAFile, c.Authorization.Mode, c.ServerTLSBootstrap, c.KubeAPIQPS = "/ca", "Webhook", true, 5
			}, ""},
		{"pointers set to zero", WasmletConfiguration{}, []string{"--read-only-port=0", "--port=0", "--healthz-port=0", "--plugin-idle-timeout=0s", "--resolv-conf=",
			"--cgroups-per-qos=false", "--rotate-certificates=false", "--anonymous-auth=false"},
			func(c *WasmletConfiguration) {
				c.ReadOnlyPort, c.Port, c.HealthzPort, c.PluginIdleTimeout, c.ResolvConf = ptr.To(0), ptr.To(0), ptr.To(0), &metav1.Duration{}, ptr.To("")
				c.CgroupsPerQOS, c.RotateCertificates, c.Authentication.Anonymous.Enabled = ptr.To(false), ptr.To(false), ptr.To(false)
			}, ""},
		{"bool pointers without a value", WasmletConfiguration{}, []string{"--cgroups-per-qos", "--anonymous-auth", "--rotate-certificates"},
			func(c *WasmletConfiguration) {
				c.CgroupsPerQOS, c.Authentication.Anonymous.Enabled, c.RotateCertificates = ptr.To(true), ptr.To(true), ptr.To(true)
			}, ""},
		{"flags over the file's values", WasmletConfiguration{RootDir: "/file", ReadOnlyPort: ptr.To(1), ClusterDNS: []string{"10.0.0.1"}},
			[]string{"--root-dir=/flag", "--read-only-port=2", "--cluster-dns=10.0.0.2, 10.0.0.3"},
			func(c *WasmletConfiguration) {
				c.RootDir, c.ReadOnlyPort, c.ClusterDNS = "/flag", ptr.To(2), []string{"10.0.0.2", "10.0.0.3"}
			}, ""},
		{"node registration and reservations", WasmletConfiguration{NodeLabels: map[string]string{"from": "file"}},
			[]string{"--node-labels=pool=gpu, node.kubernetes.io/tier=a", "--register-with-taints=dedicated=gpu:NoSchedule,spot:PreferNoSchedule",
				"--register-node=false", "--provider-id=p://1", "--node-ip=10.0.0.5,fd00::5",
				"--kube-reserved=cpu=100m,memory=200Mi", "--system-reserved=pid=1000", "--eviction-hard=memory.available<5%,nodefs.available<1Gi",
				"--image-gc-high-threshold=60", "--image-gc-low-threshold=0", "--minimum-image-gc-age=1s", "--image-maximum-gc-age=1h", "--image-gc-period=2s",
				"--eviction-soft=memory.available<1Gi", "--eviction-soft-grace-period=memory.available=1m30s", "--eviction-max-pod-grace-period=30",
				"--eviction-minimum-reclaim=nodefs.available=500Mi", "--eviction-pressure-transition-period=10s", "--kernel-memcg-notification"},
			func(c *WasmletConfiguration) {
				c.NodeLabels = map[string]string{"pool": "gpu", "node.kubernetes.io/tier": "a"}
				c.RegisterWithTaints = []v1.Taint{{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}, {Key: "spot", Effect: v1.TaintEffectPreferNoSchedule}}
				c.RegisterNode, c.ProviderID, c.NodeIP = ptr.To(false), "p://1", "10.0.0.5,fd00::5"
				c.KubeReserved, c.SystemReserved = map[string]string{"cpu": "100m", "memory": "200Mi"}, map[string]string{"pid": "1000"}
				c.EvictionHard = map[string]string{"memory.available": "5%", "nodefs.available": "1Gi"}
				c.ImageGCHighThresholdPercent, c.ImageGCLowThresholdPercent = ptr.To[int32](60), ptr.To[int32](0)
				c.ImageMinimumGCAge, c.ImageMaximumGCAge, c.ImageGCPeriod = dur(time.Second), dur(time.Hour), dur(2*time.Second)
				c.EvictionSoft, c.EvictionSoftGracePeriod = map[string]string{"memory.available": "1Gi"}, map[string]string{"memory.available": "1m30s"}
				c.EvictionMaxPodGracePeriod, c.EvictionMinimumReclaim = 30, map[string]string{"nodefs.available": "500Mi"}
				c.EvictionPressureTransitionPeriod, c.KernelMemcgNotification = dur(10*time.Second), true
			}, ""},
		{"a label without a value", WasmletConfiguration{}, []string{"--node-labels=pool"}, nil, `"pool" is not key=value`},
		{"a taint without an effect", WasmletConfiguration{}, []string{"--register-with-taints=a=b"}, nil, `taint "a=b": want key=value:Effect`},
		{"a bad number", WasmletConfiguration{}, []string{"--read-only-port=x"}, nil, `invalid value "x" for flag -read-only-port`},
		{"a bad duration", WasmletConfiguration{}, []string{"--plugin-idle-timeout=soon"}, nil, `invalid value "soon" for flag -plugin-idle-timeout`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.start
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			got.AddFlags(fs)
			err := fs.Parse(tt.args)
			if checkError(t, err, tt.wantErr) {
				return
			}
			want := tt.start
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got\n%s\nwant\n%s", asJSON(got), asJSON(want))
			}
		})
	}
}

// TestWasmletConfiguration_AddFlags_usage: the usage shows each flag's
// default, none for the defaults that follow from other fields.
func TestWasmletConfiguration_AddFlags_usage(t *testing.T) {
	var c WasmletConfiguration
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	c.AddFlags(fs)
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	usage := b.String()
	for _, want := range []string{
		"-sync-frequency duration\n    \tperiod of the resync of every pod (default 1m0s)\n",
		"-read-only-port port\n    \tport of the read-only server (/healthz, /pods, /metrics); 0 disables it (default 10255)\n",
		"-plugin-idle-timeout duration\n",
		"0 keeps plugins loaded (default 10s)\n",
		"with the pod's limits (default true)\n  -client-ca-file string",
		`-root-dir string` + "\n    \tthe agent's state: pod directories, plugin cache, the embedded runtime (default \"/var/lib/wasmlet\")\n",
		"-container-log-max-size size\n",
		"-rotate-certificates\n    \trenew the client certificate through a CSR before it expires (default true with --bootstrap-kubeconfig)\n",
		"-anonymous-auth\n    \tlet unauthenticated kubelet API requests through as system:anonymous\n",
		"-eviction-hard signal<quantity|percent,...\n    \thard eviction thresholds, signal<quantity|percent,...; memory.available and nodefs.available are kept from allocatable (default imagefs.available<15%,imagefs.inodesFree<5%,memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%)\n",
		"-node-name string\n    \tthis node's name; static pods are named <pod>-<node-name> (default: the host name)\n",
	} {
		if !strings.Contains(usage, want) {
			t.Errorf("usage lacks %q:\n%s", want, usage)
		}
	}
	if c.RootDir != "" || c.ReadOnlyPort != nil {
		t.Errorf("AddFlags set fields: %+v", c)
	}
}
