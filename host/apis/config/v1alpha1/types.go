// Package v1alpha1 is the node agent's configuration, version
// wasmlet.io/v1alpha1: the WasmletConfiguration type, in the manner of the
// kubelet's KubeletConfiguration. It is both the `wasmlet run --config` file
// (YAML or JSON, camelCase fields, durations as Go durations: "20s") and the
// target of `wasmlet run`'s flags, so a setting is written once: a field
// with its JSON name here, its default in SetDefaults, its flag in AddFlags
// and its checks in Validate.
//
// The flags and the file fill the same struct: LoadFile decodes the file,
// the flags given on the command line are then parsed over it, SetDefaults
// fills what neither set and Validate checks the result. A value field left
// at its zero value takes its default (so "0s" for a period means the
// default period); a field whose zero value means something other than its
// default (a port of 0 disables its server, an idle timeout of 0 keeps
// plugins loaded, cgroupsPerQOS false) is a pointer, nil until set.
package v1alpha1

import (
	v1 "k8s.io/api/core/v1"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The configuration's kind and apiVersion, as a file states them.
const (
	Kind       = "WasmletConfiguration"
	APIVersion = "wasmlet.io/v1alpha1"
)

// WasmletConfiguration is the node agent's configuration. The comment of a
// field names its flag and its default.
type WasmletConfiguration struct {
	// Kind is Kind; a file must state it. APIVersion, when a file states
	// it, is APIVersion. SetDefaults sets both.
	metav1.TypeMeta `json:",inline"`

	// NodeName is this node's name (--node-name); static pods are named
	// "<pod>-<node>". Default: the host name. Either way it is lower-cased.
	NodeName string `json:"nodeName,omitempty"`
	// StaticPodPath is a directory (or one file) of static pod manifests,
	// the file source (--pod-manifest-path); empty disables the source.
	StaticPodPath string `json:"staticPodPath,omitempty"`
	// FileCheckFrequency is how often the file source re-reads its
	// directory besides watching it (--file-check-frequency, 20s).
	FileCheckFrequency metav1.Duration `json:"fileCheckFrequency,omitempty"`
	// PodObjectsDir, on a standalone node, is a directory of ConfigMap and
	// Secret manifests that static pods' volumes and env may reference
	// (--pod-objects-dir); ignored with KubeConfig, where they come from
	// the API server.
	PodObjectsDir string `json:"podObjectsDir,omitempty"`
	// ClusterDomain is the cluster's DNS domain, e.g. cluster.local
	// (--cluster-domain): pods with a subdomain get
	// <host>.<subdomain>.<ns>.svc.<domain> in /etc/hosts.
	ClusterDomain string `json:"clusterDomain,omitempty"`
	// ClusterDNS are the IPs of the cluster DNS servers given to
	// ClusterFirst pods (--cluster-dns, comma-separated); without them such
	// pods get the host's resolver.
	ClusterDNS []string `json:"clusterDNS,omitempty"`
	// ResolvConf is the host's resolver file that Default pods copy and
	// ClusterFirst pods take search paths from (--resolv-conf,
	// /etc/resolv.conf); "" gives Default pods 127.0.0.1, as the kubelet's
	// --resolv-conf="".
	ResolvConf *string `json:"resolvConf,omitempty"`
	// PluginDir is the directory of .wasm plugins and their manifests
	// (--plugin-dir); empty loads none.
	PluginDir string `json:"pluginDir,omitempty"`
	// PluginIdleTimeout: a plugin not called for this long gives back its
	// instances and compiled code and is reloaded from the compilation
	// cache on its next call (--plugin-idle-timeout, 10s); 0 keeps every
	// plugin loaded.
	PluginIdleTimeout *metav1.Duration `json:"pluginIdleTimeout,omitempty"`
	// PluginResolveInterval is how often the tag of a plugin in a
	// registry (a manifest with image:) is resolved again; a new digest is
	// pulled, verified and then loaded (--plugin-resolve-interval, 5m).
	PluginResolveInterval metav1.Duration `json:"pluginResolveInterval,omitempty"`
	// PluginVerificationPolicy is the node's signature policy for plugins
	// in a registry (--plugin-verification-policy); empty: only what each
	// manifest's verification asks.
	PluginVerificationPolicy string `json:"pluginVerificationPolicy,omitempty"`
	// PluginRegistryConfig is a docker config.json with the credentials
	// for plugin pulls (--plugin-registry-config); empty: the agent's
	// ~/.docker/config.json, $DOCKER_CONFIG.
	PluginRegistryConfig string `json:"pluginRegistryConfig,omitempty"`
	// PluginRegistryCA is a PEM file of certificate authorities trusted
	// for plugin registries besides the system's (--plugin-registry-ca).
	PluginRegistryCA string `json:"pluginRegistryCA,omitempty"`
	// ImageCredentialProviderConfig is a CredentialProviderConfig
	// (kubelet.config.k8s.io/v1) of exec credential provider plugins run
	// for image pulls, as the kubelet's (--image-credential-provider-config).
	ImageCredentialProviderConfig string `json:"imageCredentialProviderConfig,omitempty"`
	// ImageCredentialProviderBinDir holds the credential providers'
	// executables (--image-credential-provider-bin-dir); required with
	// ImageCredentialProviderConfig.
	ImageCredentialProviderBinDir string `json:"imageCredentialProviderBinDir,omitempty"`
	// ImagePullDockerConfig is a docker config.json whose credentials
	// every image pull may use, after the pod's pull secrets and the
	// credential providers' (--image-pull-docker-config); meant for the
	// static pods of a node without an API server. The kubelet has no
	// such flag: it reads the config.json of fixed paths.
	ImagePullDockerConfig string `json:"imagePullDockerConfig,omitempty"`
	// ImageRegistryCA is a PEM file of certificate authorities the
	// embedded WASI runtime trusts for image registries besides the
	// system's (--image-registry-ca); a CRI runtime has its own setting.
	ImageRegistryCA string `json:"imageRegistryCA,omitempty"`
	// ContainerRuntimeEndpoint is the CRI endpoint, e.g.
	// unix:///run/containerd/containerd.sock (--container-runtime-endpoint);
	// empty runs the embedded WASI runtime in-process.
	ContainerRuntimeEndpoint string `json:"containerRuntimeEndpoint,omitempty"`
	// ImageServiceEndpoint is the CRI image service endpoint
	// (--image-service-endpoint); empty means ContainerRuntimeEndpoint.
	ImageServiceEndpoint string `json:"imageServiceEndpoint,omitempty"`
	// CgroupsPerQOS puts each pod of a CRI runtime under a cgroup of its
	// own in the kubelet's kubepods/<qos>/pod<uid> hierarchy, with the
	// pod's limits (--cgroups-per-qos, true). The embedded WASI runtime
	// has no cgroups.
	CgroupsPerQOS *bool `json:"cgroupsPerQOS,omitempty"`
	// CgroupDriver is the runtime's cgroup driver, cgroupfs or systemd
	// (--cgroup-driver, cgroupfs).
	CgroupDriver string `json:"cgroupDriver,omitempty"`
	// CgroupRoot is the cgroup the kubepods hierarchy is made under
	// (--cgroup-root, /).
	CgroupRoot string `json:"cgroupRoot,omitempty"`
	// RuntimeRequestTimeout bounds each CRI call
	// (--runtime-request-timeout, 2m).
	RuntimeRequestTimeout metav1.Duration `json:"runtimeRequestTimeout,omitempty"`
	// RootDir holds the agent's state: pod directories, plugin cache, the
	// embedded runtime (--root-dir, /var/lib/wasmlet).
	RootDir string `json:"rootDir,omitempty"`
	// PodLogsDir is where container logs go, in the kubelet's layout
	// <dir>/<namespace>_<pod>_<uid>/<container>/<restartCount>.log
	// (--pod-logs-dir, /var/log/pods).
	PodLogsDir string `json:"podLogsDir,omitempty"`
	// SyncFrequency is the period of the resync of every pod
	// (--sync-frequency, 1m).
	SyncFrequency metav1.Duration `json:"syncFrequency,omitempty"`
	// HousekeepingInterval is the period of the cleanup of orphaned pods,
	// containers and directories (--housekeeping-interval, 2s).
	HousekeepingInterval metav1.Duration `json:"housekeepingInterval,omitempty"`
	// ContainerGCPeriod is the least time between two removals of dead
	// containers, sandboxes and pod directories, the kubelet's container
	// GC period (--container-gc-period, 1m).
	ContainerGCPeriod metav1.Duration `json:"containerGCPeriod,omitempty"`
	// PLEGRelistPeriod is the period of the runtime relist
	// (--pleg-relist-period, 1s).
	PLEGRelistPeriod metav1.Duration `json:"plegRelistPeriod,omitempty"`
	// VolumeStatsAggPeriod is how long a pod's volume usage (a walk of
	// each volume's directory) is reused by the stats summary and the
	// local-storage eviction (--volume-stats-agg-period, 1m).
	VolumeStatsAggPeriod metav1.Duration `json:"volumeStatsAggPeriod,omitempty"`
	// MaxPods is the most pods this node admits (--max-pods, 110).
	MaxPods int `json:"maxPods,omitempty"`
	// Address is the read-only server's listen address
	// (--address, 127.0.0.1).
	Address string `json:"address,omitempty"`
	// ReadOnlyPort serves /healthz, /pods, /metrics and /plugins
	// (--read-only-port, 10255); 0 disables the server.
	ReadOnlyPort *int `json:"readOnlyPort,omitempty"`
	// HealthzPort serves /healthz alone, as the kubelet's healthz server
	// (--healthz-port, 10248); 0 disables it.
	HealthzPort *int `json:"healthzPort,omitempty"`
	// HealthzBindAddress is the healthz server's listen address
	// (--healthz-bind-address, 127.0.0.1).
	HealthzBindAddress string `json:"healthzBindAddress,omitempty"`
	// ContainerLogSymlinkDir is where each container's log gets a symbolic
	// link named as the kubelet names it
	// (<pod>_<namespace>_<container>-<id>.log), for log collectors that
	// read /var/log/containers (--container-log-symlink-dir,
	// /var/log/containers); the kubelet's is fixed there. "none" makes no
	// links.
	ContainerLogSymlinkDir string `json:"containerLogSymlinkDir,omitempty"`
	// ContainerLogMaxSize is the size, a quantity such as 10Mi, over which
	// a running container's log is rotated (--container-log-max-size,
	// 10Mi).
	ContainerLogMaxSize string `json:"containerLogMaxSize,omitempty"`
	// ContainerLogMaxFiles is how many files a container's log may span,
	// the live one included, at least 2 (--container-log-max-files, 5).
	ContainerLogMaxFiles int `json:"containerLogMaxFiles,omitempty"`
	// LogLevel is the agent's log level: trace, debug, info, warn or
	// error (--log-level, info).
	LogLevel string `json:"logLevel,omitempty"`
	// LogJSON writes the logs as JSON lines (--log-json).
	LogJSON bool `json:"logJSON,omitempty"`

	// KubeConfig is a kubeconfig with the node's credentials
	// (--kubeconfig): with it the agent joins the cluster (API pod source,
	// Node and Lease, pod status, mirror pods, events); empty runs
	// standalone.
	KubeConfig string `json:"kubeconfig,omitempty"`
	// BootstrapKubeConfig is a kubeconfig with a bootstrap token
	// (--bootstrap-kubeconfig): when KubeConfig holds no valid client
	// certificate, the node requests one with it, stores it in CertDir and
	// writes KubeConfig pointing at it (TLS bootstrap). It needs
	// KubeConfig.
	BootstrapKubeConfig string `json:"bootstrapKubeconfig,omitempty"`
	// CertDir holds the node's client and serving certificates
	// (--cert-dir, <rootDir>/pki).
	CertDir string `json:"certDir,omitempty"`
	// RotateCertificates renews the client certificate through a CSR
	// before it expires (--rotate-certificates; default true with
	// BootstrapKubeConfig, else false). It needs KubeConfig.
	RotateCertificates *bool `json:"rotateCertificates,omitempty"`
	// ServerTLSBootstrap requests the kubelet API's serving certificate
	// through a kubernetes.io/kubelet-serving CSR and renews it before it
	// expires (--rotate-server-certificates). It needs KubeConfig.
	ServerTLSBootstrap bool `json:"serverTLSBootstrap,omitempty"`
	// KubeAPIQPS and KubeAPIBurst bound the request rate to the API server
	// (--kube-api-qps 50, --kube-api-burst 100, the kubelet's).
	KubeAPIQPS   int `json:"kubeAPIQPS,omitempty"`
	KubeAPIBurst int `json:"kubeAPIBurst,omitempty"`
	// NodeStatusUpdateFrequency is how often the node status is computed
	// and posted if it changed (--node-status-update-frequency, 10s).
	NodeStatusUpdateFrequency metav1.Duration `json:"nodeStatusUpdateFrequency,omitempty"`
	// NodeStatusReportFrequency is how often an unchanged node status is
	// posted anyway (--node-status-report-frequency, 5m); the Lease is the
	// heartbeat.
	NodeStatusReportFrequency metav1.Duration `json:"nodeStatusReportFrequency,omitempty"`

	// NodeLabels are labels the node registers with (--node-labels,
	// key=value,...). As the kubelet, labels in the kubernetes.io and
	// k8s.io namespaces are refused unless the NodeRestriction admission
	// plugin lets a node set them: kubelet.kubernetes.io/ and
	// node.kubernetes.io/ (and their subdomains) and the well-known set
	// (hostname, os, arch, instance type, zone, region).
	NodeLabels map[string]string `json:"nodeLabels,omitempty"`
	// RegisterWithTaints are the taints the node registers with
	// (--register-with-taints, key=value:Effect,...); set when the Node is
	// created, as the kubelet does.
	RegisterWithTaints []v1.Taint `json:"registerWithTaints,omitempty"`
	// RegisterNode creates the Node object (--register-node, true); false
	// reports the status of a Node someone else created.
	RegisterNode *bool `json:"registerNode,omitempty"`
	// ProviderID is the node's spec.providerID, the cloud provider's
	// identity of the machine (--provider-id).
	ProviderID string `json:"providerID,omitempty"`
	// NodeIP is the node's InternalIP, or a comma-separated IPv4 and IPv6
	// pair for a dual-stack node (--node-ip); an unspecified address
	// (0.0.0.0, ::) picks the first address of the host of that family.
	// Empty: the host's first global address.
	NodeIP string `json:"nodeIP,omitempty"`

	// KubeReserved and SystemReserved are resources kept from pods for the
	// node agent and for the system (--kube-reserved, --system-reserved:
	// cpu=100m,memory=500Mi,ephemeral-storage=1Gi,pid=1000); subtracted
	// from capacity in status.allocatable, which admission fits pods in.
	KubeReserved   map[string]string `json:"kubeReserved,omitempty"`
	SystemReserved map[string]string `json:"systemReserved,omitempty"`
	// EvictionHard are the hard eviction thresholds, signal to quantity or
	// percentage of capacity (--eviction-hard,
	// memory.available<100Mi,nodefs.available<10%,...; the kubelet's
	// default when unset); memory.available and nodefs.available are
	// subtracted from allocatable memory and ephemeral storage, as the
	// kubelet's node allocatable does.
	EvictionHard map[string]string `json:"evictionHard,omitempty"`
	// EvictionSoft are the soft eviction thresholds, in EvictionHard's
	// syntax (--eviction-soft): a pod is evicted once one has held for its
	// grace period.
	EvictionSoft map[string]string `json:"evictionSoft,omitempty"`
	// EvictionSoftGracePeriod maps each soft threshold's signal to how long
	// it must hold before pods are evicted (--eviction-soft-grace-period,
	// memory.available=1m30s); every soft threshold needs one.
	EvictionSoftGracePeriod map[string]string `json:"evictionSoftGracePeriod,omitempty"`
	// EvictionMaxPodGracePeriod is the most seconds a pod evicted for a
	// soft threshold is given to stop (--eviction-max-pod-grace-period,
	// 0); a hard threshold gives 1 s.
	EvictionMaxPodGracePeriod int `json:"evictionMaxPodGracePeriod,omitempty"`
	// EvictionMinimumReclaim maps a signal to how much more than its
	// threshold must be free before the pressure ends
	// (--eviction-minimum-reclaim, nodefs.available=500Mi).
	EvictionMinimumReclaim map[string]string `json:"evictionMinimumReclaim,omitempty"`
	// EvictionPressureTransitionPeriod is how long a pressure condition
	// stays True after its threshold was last met
	// (--eviction-pressure-transition-period, 5m).
	EvictionPressureTransitionPeriod metav1.Duration `json:"evictionPressureTransitionPeriod,omitempty"`
	// KernelMemcgNotification has the kernel tell when memory.available
	// crosses its threshold (cgroup v1 memory.usage_in_bytes notification
	// through cgroup.event_control) instead of waiting for the next period
	// (--kernel-memcg-notification, false).
	KernelMemcgNotification bool `json:"kernelMemcgNotification,omitempty"`

	// ImageGCHighThresholdPercent is the image filesystem's usage, in
	// percent, at or above which image garbage collection runs
	// (--image-gc-high-threshold, 85); 100 with no imageMaximumGCAge
	// turns it off.
	ImageGCHighThresholdPercent *int32 `json:"imageGCHighThresholdPercent,omitempty"`
	// ImageGCLowThresholdPercent is the usage, in percent, image garbage
	// collection frees down to (--image-gc-low-threshold, 80).
	ImageGCLowThresholdPercent *int32 `json:"imageGCLowThresholdPercent,omitempty"`
	// ImageMinimumGCAge is how long an unused image is kept after it was
	// first seen (--minimum-image-gc-age, 2m).
	ImageMinimumGCAge metav1.Duration `json:"imageMinimumGCAge,omitempty"`
	// ImageMaximumGCAge removes an image unused for this long whatever the
	// disk usage (--image-maximum-gc-age); 0 never does.
	ImageMaximumGCAge metav1.Duration `json:"imageMaximumGCAge,omitempty"`
	// ImageGCPeriod is the period of image garbage collection
	// (--image-gc-period, 5m, the kubelet's fixed period).
	ImageGCPeriod metav1.Duration `json:"imageGCPeriod,omitempty"`

	// SecureAddress is the kubelet API's listen address
	// (--secure-address); empty means all addresses.
	SecureAddress string `json:"secureAddress,omitempty"`
	// Port is the kubelet API's port (--port, 10250): TLS, served when
	// clients can be authenticated (with KubeConfig, a client CA or
	// anonymous access); 0 disables it.
	Port *int `json:"port,omitempty"`
	// TLSCertFile and TLSPrivateKeyFile are the kubelet API's serving
	// certificate and its key (--tls-cert-file, --tls-private-key-file),
	// given together; empty means a self-signed one under CertDir.
	TLSCertFile       string `json:"tlsCertFile,omitempty"`
	TLSPrivateKeyFile string `json:"tlsPrivateKeyFile,omitempty"`
	// Authentication is the kubelet API's authentication, the
	// KubeletConfiguration's block: x509.clientCAFile (--client-ca-file),
	// webhook.enabled (bearer tokens through TokenReview, default true;
	// in effect with KubeConfig), webhook.cacheTTL, anonymous.enabled
	// (--anonymous-auth, false). A zero cache TTL means the kubelet's (2m).
	Authentication kubeletconfig.KubeletAuthentication `json:"authentication"`
	// Authorization is the kubelet API's authorization, the
	// KubeletConfiguration's block: mode (--authorization-mode; Webhook
	// with KubeConfig, else AlwaysAllow), webhook.cacheAuthorizedTTL and
	// webhook.cacheUnauthorizedTTL (zero means the kubelet's: 5m, 30s).
	Authorization kubeletconfig.KubeletAuthorization `json:"authorization"`
}
