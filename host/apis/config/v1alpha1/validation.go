package v1alpha1

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	kubeletapis "k8s.io/kubelet/pkg/apis"
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
	errs = append(errs, c.validateRegistration()...)
	errs = append(errs, c.validateImageGC()...)
	if c.EvictionMaxPodGracePeriod < 0 {
		errs = append(errs, field.Invalid(field.NewPath("evictionMaxPodGracePeriod"), c.EvictionMaxPodGracePeriod, "must not be negative"))
	}
	if c.EvictionPressureTransitionPeriod.Duration < 0 {
		errs = append(errs, field.Invalid(field.NewPath("evictionPressureTransitionPeriod"), c.EvictionPressureTransitionPeriod.Duration.String(), "must not be negative"))
	}
	return errs
}

// validateRegistration checks the node's labels as the kubelet checks
// --node-labels (a label the NodeRestriction admission plugin would refuse
// the node is refused here, naming it), its taints, and --node-ip.
func (c *WasmletConfiguration) validateRegistration() field.ErrorList {
	var errs field.ErrorList
	labels := field.NewPath("nodeLabels")
	for _, k := range slices.Sorted(maps.Keys(c.NodeLabels)) {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(labels.Key(k), k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(c.NodeLabels[k]) {
			errs = append(errs, field.Invalid(labels.Key(k), c.NodeLabels[k], msg))
		}
		if isKubernetesLabel(k) && !kubeletapis.IsKubeletLabel(k) {
			errs = append(errs, field.Forbidden(labels.Key(k), fmt.Sprintf(
				"label %q is in the 'kubernetes.io' or 'k8s.io' namespace, which a node may only set with an allowed prefix (%s) or from the allowed set (%s); the NodeRestriction admission plugin would refuse it",
				k, strings.Join(kubeletapis.KubeletLabelNamespaces(), ", "), strings.Join(kubeletapis.KubeletLabels(), ", "))))
		}
	}
	taints := field.NewPath("registerWithTaints")
	for i, t := range c.RegisterWithTaints {
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(taints.Index(i).Child("key"), t.Key, msg))
		}
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(taints.Index(i).Child("value"), t.Value, msg))
		}
		switch t.Effect {
		case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.NotSupported(taints.Index(i).Child("effect"), t.Effect,
				[]v1.TaintEffect{v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute}))
		}
	}
	if c.NodeIP != "" {
		ips := strings.Split(c.NodeIP, ",")
		var v4, v6 int
		for _, s := range ips {
			ip := net.ParseIP(strings.TrimSpace(s))
			switch {
			case ip == nil:
				errs = append(errs, field.Invalid(field.NewPath("nodeIP"), c.NodeIP, fmt.Sprintf("%q is not an IP address", s)))
			case ip.To4() != nil:
				v4++
			default:
				v6++
			}
		}
		if len(ips) > 2 || v4 > 1 || v6 > 1 {
			errs = append(errs, field.Invalid(field.NewPath("nodeIP"), c.NodeIP, "must be one IP, or one IPv4 and one IPv6 for a dual-stack node"))
		}
	}
	return errs
}

// isKubernetesLabel reports whether key is in the kubernetes.io or k8s.io
// namespace or a subdomain of one.
func isKubernetesLabel(key string) bool {
	ns, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	return ns == "kubernetes.io" || strings.HasSuffix(ns, ".kubernetes.io") || ns == "k8s.io" || strings.HasSuffix(ns, ".k8s.io")
}

// validateImageGC checks the image garbage collection's thresholds and
// ages as the kubelet does.
func (c *WasmletConfiguration) validateImageGC() field.ErrorList {
	var errs field.ErrorList
	high, low := *c.ImageGCHighThresholdPercent, *c.ImageGCLowThresholdPercent
	for _, p := range []struct {
		path string
		v    int32
	}{{"imageGCHighThresholdPercent", high}, {"imageGCLowThresholdPercent", low}} {
		if p.v < 0 || p.v > 100 {
			errs = append(errs, field.Invalid(field.NewPath(p.path), p.v, "must be between 0 and 100"))
		}
	}
	if low > high {
		errs = append(errs, field.Invalid(field.NewPath("imageGCLowThresholdPercent"), low, fmt.Sprintf("must not be above imageGCHighThresholdPercent (%d)", high)))
	}
	if c.ImageMinimumGCAge.Duration < 0 {
		errs = append(errs, field.Invalid(field.NewPath("imageMinimumGCAge"), c.ImageMinimumGCAge.Duration.String(), "must not be negative"))
	}
	if m := c.ImageMaximumGCAge.Duration; m < 0 || (m > 0 && m <= c.ImageMinimumGCAge.Duration) {
		errs = append(errs, field.Invalid(field.NewPath("imageMaximumGCAge"), m.String(), "must be 0 (never) or above imageMinimumGCAge"))
	}
	if c.ImageGCPeriod.Duration <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("imageGCPeriod"), c.ImageGCPeriod.Duration.String(), "must be positive"))
	}
	return errs
}
