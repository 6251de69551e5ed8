package v1alpha1

import (
	"net"
	"strconv"

	"github.com/hashicorp/go-hclog"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
)

// Validate checks a defaulted configuration (see SetDefaults); each error
// names its field by its path in the file, e.g. "syncFrequency" or
// "authentication.webhook.cacheTTL".
func (c *WasmletConfiguration) Validate() field.ErrorList {
	var errs field.ErrorList
	if c.NodeName == "" {
		errs = append(errs, field.Required(field.NewPath("nodeName"), "the host name could not be read"))
	}
	if c.RootDir == "" {
		errs = append(errs, field.Required(field.NewPath("rootDir"), ""))
	}
	for _, d := range []struct {
		path string
		d    metav1.Duration
	}{
		{"fileCheckFrequency", c.FileCheckFrequency}, {"runtimeRequestTimeout", c.RuntimeRequestTimeout},
		{"syncFrequency", c.SyncFrequency}, {"housekeepingInterval", c.HousekeepingInterval},
		{"containerGCPeriod", c.ContainerGCPeriod}, {"plegRelistPeriod", c.PLEGRelistPeriod},
		{"volumeStatsAggPeriod", c.VolumeStatsAggPeriod}, {"pluginResolveInterval", c.PluginResolveInterval},
		{"nodeStatusUpdateFrequency", c.NodeStatusUpdateFrequency}, {"nodeStatusReportFrequency", c.NodeStatusReportFrequency},
	} {
		if d.d.Duration <= 0 {
			errs = append(errs, field.Invalid(field.NewPath(d.path), d.d.Duration.String(), "must be positive"))
		}
	}
	if (c.ImageCredentialProviderConfig == "") != (c.ImageCredentialProviderBinDir == "") {
		errs = append(errs, field.Required(field.NewPath("imageCredentialProviderBinDir"), "imageCredentialProviderConfig and imageCredentialProviderBinDir go together"))
	}
	webhook := field.NewPath("authentication", "webhook")
	authzWebhook := field.NewPath("authorization", "webhook")
	for _, d := range []struct {
		path *field.Path
		d    *metav1.Duration
	}{
		{field.NewPath("pluginIdleTimeout"), c.PluginIdleTimeout},
		{webhook.Child("cacheTTL"), &c.Authentication.Webhook.CacheTTL},
		{authzWebhook.Child("cacheAuthorizedTTL"), &c.Authorization.Webhook.CacheAuthorizedTTL},
		{authzWebhook.Child("cacheUnauthorizedTTL"), &c.Authorization.Webhook.CacheUnauthorizedTTL},
	} {
		if d.d != nil && d.d.Duration < 0 {
			errs = append(errs, field.Invalid(d.path, d.d.Duration.String(), "must not be negative"))
		}
	}
	for _, n := range []struct {
		path     string
		v, least int
	}{
		{"maxPods", c.MaxPods, 1}, {"containerLogMaxFiles", c.ContainerLogMaxFiles, 2},
		{"kubeAPIQPS", c.KubeAPIQPS, 1}, {"kubeAPIBurst", c.KubeAPIBurst, 1},
	} {
		if n.v < n.least {
			errs = append(errs, field.Invalid(field.NewPath(n.path), n.v, "must be at least "+strconv.Itoa(n.least)))
		}
	}
	for _, p := range []struct {
		path string
		port *int
	}{{"readOnlyPort", c.ReadOnlyPort}, {"port", c.Port}, {"healthzPort", c.HealthzPort}} {
		if p.port != nil && (*p.port < 0 || *p.port > 65535) {
			errs = append(errs, field.Invalid(field.NewPath(p.path), *p.port, "is not a port (0 to 65535; 0 disables the server)"))
		}
	}
	if q, err := resource.ParseQuantity(c.ContainerLogMaxSize); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("containerLogMaxSize"), c.ContainerLogMaxSize, "is not a quantity such as 10Mi"))
	} else if q.Sign() <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("containerLogMaxSize"), c.ContainerLogMaxSize, "must be positive"))
	}
	for i, ip := range c.ClusterDNS {
		if net.ParseIP(ip) == nil {
			errs = append(errs, field.Invalid(field.NewPath("clusterDNS").Index(i), ip, "is not an IP address"))
		}
	}
	if c.CgroupDriver != "cgroupfs" && c.CgroupDriver != "systemd" {
		errs = append(errs, field.NotSupported(field.NewPath("cgroupDriver"), c.CgroupDriver, []string{"cgroupfs", "systemd"}))
	}
	if hclog.LevelFromString(c.LogLevel) == hclog.NoLevel {
		errs = append(errs, field.NotSupported(field.NewPath("logLevel"), c.LogLevel, []string{"trace", "debug", "info", "warn", "error"}))
	}
	switch m := c.Authorization.Mode; m {
	case kubeletconfig.KubeletAuthorizationModeWebhook, kubeletconfig.KubeletAuthorizationModeAlwaysAllow:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("authorization", "mode"), m,
			[]kubeletconfig.KubeletAuthorizationMode{kubeletconfig.KubeletAuthorizationModeWebhook, kubeletconfig.KubeletAuthorizationModeAlwaysAllow}))
	}
	if c.TLSCertFile == "" && c.TLSPrivateKeyFile != "" {
		errs = append(errs, field.Required(field.NewPath("tlsCertFile"), "tlsPrivateKeyFile is its key: the two go together"))
	}
	if c.TLSCertFile != "" && c.TLSPrivateKeyFile == "" {
		errs = append(errs, field.Required(field.NewPath("tlsPrivateKeyFile"), "the key of tlsCertFile: the two go together"))
	}
	if c.KubeConfig == "" {
		const needs = "needs kubeconfig (with bootstrapKubeconfig, the file it writes)"
		if c.BootstrapKubeConfig != "" {
			errs = append(errs, field.Invalid(field.NewPath("bootstrapKubeconfig"), c.BootstrapKubeConfig, needs))
		}
		if c.RotateCertificates != nil && *c.RotateCertificates {
			errs = append(errs, field.Invalid(field.NewPath("rotateCertificates"), true, needs))
		}
		if c.ServerTLSBootstrap {
			errs = append(errs, field.Invalid(field.NewPath("serverTLSBootstrap"), true, needs))
		}
	}
	return errs
}
