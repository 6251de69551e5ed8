package v1alpha1

import (
	"maps"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	kubeletconfig "k8s.io/kubelet/config/v1beta1"
)

// The kubelet's configuration type, as its /configz states it.
const (
	KubeletKind       = "KubeletConfiguration"
	KubeletAPIVersion = "kubelet.config.k8s.io/v1beta1"
)

// KubeletConfiguration is c as the kubelet's own configuration type: every
// setting the two types share, under the kubelet's name, for /configz,
// whose readers decode it as a KubeletConfiguration. Call it on a
// defaulted configuration. The settings the kubelet has not (nodeName,
// rootDir, pluginDir, the periods of the relist, housekeeping and GC,
// nodeLabels and nodeIP, which are the kubelet's flags only)
// are left out, and the kubelet's fields wasmlet has not are left unset.
//
// address is the kubelet API's (SecureAddress, "" reported as the
// kubelet's 0.0.0.0), since the kubelet has one address for its ports;
// the read-only server's Address has no field of its own there.
// logging.format is json with LogJSON, else text.
func (c *WasmletConfiguration) KubeletConfiguration() *kubeletconfig.KubeletConfiguration {
	address := c.SecureAddress
	if address == "" {
		address = "0.0.0.0"
	}
	format := "text"
	if c.LogJSON {
		format = "json"
	}
	k := &kubeletconfig.KubeletConfiguration{
		StaticPodPath:                    c.StaticPodPath,
		PodLogsDir:                       c.PodLogsDir,
		SyncFrequency:                    c.SyncFrequency,
		FileCheckFrequency:               c.FileCheckFrequency,
		Address:                          address,
		Port:                             int32(ptr.Deref(c.Port, 0)),
		ReadOnlyPort:                     int32(ptr.Deref(c.ReadOnlyPort, 0)),
		TLSCertFile:                      c.TLSCertFile,
		TLSPrivateKeyFile:                c.TLSPrivateKeyFile,
		RotateCertificates:               ptr.Deref(c.RotateCertificates, false),
		ServerTLSBootstrap:               c.ServerTLSBootstrap,
		Authentication:                   *c.Authentication.DeepCopy(),
		Authorization:                    *c.Authorization.DeepCopy(),
		HealthzPort:                      ptr.To(int32(ptr.Deref(c.HealthzPort, 0))),
		HealthzBindAddress:               c.HealthzBindAddress,
		ClusterDomain:                    c.ClusterDomain,
		ClusterDNS:                       append([]string(nil), c.ClusterDNS...),
		NodeStatusUpdateFrequency:        c.NodeStatusUpdateFrequency,
		NodeStatusReportFrequency:        c.NodeStatusReportFrequency,
		VolumeStatsAggPeriod:             c.VolumeStatsAggPeriod,
		CgroupRoot:                       c.CgroupRoot,
		CgroupsPerQOS:                    ptr.To(ptr.Deref(c.CgroupsPerQOS, false)),
		CgroupDriver:                     c.CgroupDriver,
		RuntimeRequestTimeout:            c.RuntimeRequestTimeout,
		MaxPods:                          int32(c.MaxPods),
		KubeAPIQPS:                       ptr.To(int32(c.KubeAPIQPS)),
		KubeAPIBurst:                     int32(c.KubeAPIBurst),
		ContainerLogMaxSize:              c.ContainerLogMaxSize,
		ContainerLogMaxFiles:             ptr.To(int32(c.ContainerLogMaxFiles)),
		ContainerRuntimeEndpoint:         c.ContainerRuntimeEndpoint,
		ImageServiceEndpoint:             c.ImageServiceEndpoint,
		RegisterWithTaints:               append([]v1.Taint(nil), c.RegisterWithTaints...),
		RegisterNode:                     ptr.To(ptr.Deref(c.RegisterNode, true)),
		ProviderID:                       c.ProviderID,
		KubeReserved:                     maps.Clone(c.KubeReserved),
		SystemReserved:                   maps.Clone(c.SystemReserved),
		EvictionHard:                     maps.Clone(c.EvictionHard),
		EvictionSoft:                     maps.Clone(c.EvictionSoft),
		EvictionSoftGracePeriod:          maps.Clone(c.EvictionSoftGracePeriod),
		EvictionMaxPodGracePeriod:        int32(c.EvictionMaxPodGracePeriod),
		EvictionMinimumReclaim:           maps.Clone(c.EvictionMinimumReclaim),
		EvictionPressureTransitionPeriod: c.EvictionPressureTransitionPeriod,
		KernelMemcgNotification:          c.KernelMemcgNotification,
		ImageGCHighThresholdPercent:      ptr.To(ptr.Deref(c.ImageGCHighThresholdPercent, 85)),
		ImageGCLowThresholdPercent:       ptr.To(ptr.Deref(c.ImageGCLowThresholdPercent, 80)),
		ImageMinimumGCAge:                c.ImageMinimumGCAge,
		ImageMaximumGCAge:                c.ImageMaximumGCAge,
	}
	k.Kind, k.APIVersion = KubeletKind, KubeletAPIVersion
	if c.ResolvConf != nil {
		k.ResolverConfig = ptr.To(*c.ResolvConf)
	}
	k.Logging.Format = format
	return k
}
