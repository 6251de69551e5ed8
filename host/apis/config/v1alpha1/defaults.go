package v1alpha1

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
)

// SetDefaults fills the fields left unset (zero, or nil for a pointer) with
// their defaults. It runs after the file and the flags, so the defaults
// that follow from other fields (NodeName, CertDir, RotateCertificates,
// Authorization.Mode) see their final values; it is idempotent.
func (c *WasmletConfiguration) SetDefaults() {
	c.setFixedDefaults()
	if c.NodeName == "" {
		// A host name that cannot be read leaves the field empty for
		// Validate to report.
		c.NodeName, _ = os.Hostname()
	}
	c.NodeName = strings.ToLower(c.NodeName)
	setDefault(&c.CertDir, filepath.Join(c.RootDir, "pki"))
	setPointer(&c.RotateCertificates, c.BootstrapKubeConfig != "")
	if c.KubeConfig != "" {
		setDefault(&c.Authorization.Mode, kubeletconfig.KubeletAuthorizationModeWebhook)
	} else {
		setDefault(&c.Authorization.Mode, kubeletconfig.KubeletAuthorizationModeAlwaysAllow)
	}
}

// setFixedDefaults fills the unset fields whose default depends on no
// other field: SetDefaults' first step, and the defaults the flags' usage
// shows.
func (c *WasmletConfiguration) setFixedDefaults() {
	c.Kind, c.APIVersion = Kind, APIVersion
	setDuration(&c.FileCheckFrequency, 20*time.Second)
	setPointer(&c.ResolvConf, "/etc/resolv.conf")
	setPointer(&c.PluginIdleTimeout, metav1.Duration{Duration: 10 * time.Second})
	setDuration(&c.PluginResolveInterval, 5*time.Minute)
	setPointer(&c.CgroupsPerQOS, true)
	setDefault(&c.CgroupDriver, "cgroupfs")
	setDefault(&c.CgroupRoot, "/")
	setDuration(&c.RuntimeRequestTimeout, 2*time.Minute)
	setDefault(&c.RootDir, "/var/lib/wasmlet")
	setDefault(&c.PodLogsDir, "/var/log/pods")
	setDuration(&c.SyncFrequency, time.Minute)
	setDuration(&c.HousekeepingInterval, 2*time.Second)
	setDuration(&c.ContainerGCPeriod, time.Minute)
	setDuration(&c.PLEGRelistPeriod, time.Second)
	setDuration(&c.VolumeStatsAggPeriod, time.Minute)
	setDefault(&c.MaxPods, 110)
	setDefault(&c.Address, "127.0.0.1")
	setPointer(&c.ReadOnlyPort, 10255)
	setPointer(&c.HealthzPort, 10248)
	setDefault(&c.HealthzBindAddress, "127.0.0.1")
	setDefault(&c.ContainerLogSymlinkDir, "/var/log/containers")
	setDefault(&c.ContainerLogMaxSize, "10Mi")
	setDefault(&c.ContainerLogMaxFiles, 5)
	setDefault(&c.LogLevel, "info")
	setDefault(&c.KubeAPIQPS, 50)
	setDefault(&c.KubeAPIBurst, 100)
	setDuration(&c.NodeStatusUpdateFrequency, 10*time.Second)
	setDuration(&c.NodeStatusReportFrequency, 5*time.Minute)
	setPointer(&c.Port, 10250)
	setPointer(&c.Authentication.Webhook.Enabled, true)
	setPointer(&c.Authentication.Anonymous.Enabled, false)
	setPointer(&c.RegisterNode, true)
	if c.EvictionHard == nil {
		c.EvictionHard = map[string]string{
			"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%",
			"imagefs.available": "15%", "imagefs.inodesFree": "5%",
		}
	}
	setDuration(&c.EvictionPressureTransitionPeriod, 5*time.Minute)
	setPointer(&c.ImageGCHighThresholdPercent, 85)
	setPointer(&c.ImageGCLowThresholdPercent, 80)
	setDuration(&c.ImageMinimumGCAge, 2*time.Minute)
	setDuration(&c.ImageGCPeriod, 5*time.Minute)
}

// setDefault sets *p to v when *p is its type's zero value.
func setDefault[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

// setDuration sets *p to d when *p is zero.
func setDuration(p *metav1.Duration, d time.Duration) { setDefault(p, metav1.Duration{Duration: d}) }

// setPointer points *p at v when *p is nil.
func setPointer[T any](p **T, v T) {
	if *p == nil {
		*p = &v
	}
}
