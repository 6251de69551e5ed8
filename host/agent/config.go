// Package agent wires the host's parts together: Config → New → Run(ctx),
// and /healthz. It holds no logic of its own: the sync loop and its
// handlers are syncloop's, what a pod worker does is podsync's, the
// per-pod records podstate's, orphan cleanup housekeeping's, and the API
// server side cluster's (all under host/internal).
package agent

import (
	"time"

	"github.com/wasmlet/wasmlet/host/internal/logrotate"
	"github.com/wasmlet/wasmlet/host/internal/pluginhost"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
)

// Config is everything the agent needs. `wasmlet run` fills it from flags
// and an optional config file (in the spirit of KubeletConfiguration); zero
// values get the defaults of Defaults.
type Config struct {
	// NodeName is this node's name; static pods are named "<pod>-<node>".
	NodeName string
	// StaticPodPath is a directory of static pod manifests (the file source);
	// empty disables the file source.
	StaticPodPath string
	// FileCheckFrequency is how often the file source re-reads its directory
	// besides watching it.
	FileCheckFrequency time.Duration
	// PodObjectsDir, on a standalone node, is a directory of ConfigMap and
	// Secret manifests that static pods' volumes and env may reference
	// (see host/internal/objects); ignored with KubeConfig, where they
	// come from the API server.
	PodObjectsDir string
	// ClusterDomain is the cluster's DNS domain (cluster.local): pods
	// with a subdomain get <host>.<subdomain>.<ns>.svc.<domain> in
	// /etc/hosts.
	ClusterDomain string
	// ClusterDNS are the cluster DNS servers' IPs given to ClusterFirst
	// pods; without them those pods get the host's resolver (Default).
	ClusterDNS []string
	// ResolvConf is the host resolver file Default pods copy and
	// ClusterFirst pods take search paths from; empty gives Default pods
	// 127.0.0.1, as the kubelet's --resolv-conf="".
	ResolvConf string
	// VolumeResyncPeriod is how often the API-data volumes (configMap,
	// secret, downwardAPI, projected) of running pods are brought up to
	// date and their tokens refreshed.
	VolumeResyncPeriod time.Duration
	// PluginDir is the directory of .wasm plugins; empty means no plugins.
	PluginDir string
	// PluginIdleTimeout: a plugin not called for this long gives back its
	// instances and compiled code, reloaded from the compilation cache on
	// its next call; zero keeps every plugin loaded. Defaults sets 10 s.
	PluginIdleTimeout time.Duration
	// RuntimeEndpoint is the CRI endpoint (e.g. unix:///run/containerd/containerd.sock);
	// empty starts the embedded WASI runtime in-process.
	RuntimeEndpoint string
	// CgroupsPerQOS puts each pod of a CRI runtime under a cgroup of its
	// own in the kubelet's kubepods/<qos>/pod<uid> hierarchy, with the
	// pod's limits (host/internal/cgroups). Defaults sets it; a Config
	// made by hand without it leaves the cgroups to the runtime. The
	// embedded WASI runtime has no cgroups.
	CgroupsPerQOS bool
	// CgroupDriver is "cgroupfs" (the default) or "systemd", as the
	// runtime's.
	CgroupDriver string
	// CgroupRoot is the cgroup the kubepods hierarchy is made under ("/").
	CgroupRoot string
	// ImageEndpoint is the CRI image service endpoint; empty means RuntimeEndpoint.
	ImageEndpoint string
	// RuntimeRequestTimeout bounds each CRI call.
	RuntimeRequestTimeout time.Duration
	// RootDir holds the agent's state (pod directories, plugin cache, the
	// embedded runtime's socket and images).
	RootDir string
	// PodLogsDir is where container logs go, in the kubelet's layout
	// <PodLogsDir>/<namespace>_<pod>_<uid>/<container>/<restartCount>.log.
	PodLogsDir string
	// SyncFrequency is the period at which every pod is re-synced.
	SyncFrequency time.Duration
	// HousekeepingInterval is the period of orphan cleanup.
	HousekeepingInterval time.Duration
	// ContainerGCPeriod is the least time between two removals of dead
	// containers, sandboxes and pod directories (the kubelet's container
	// GC period).
	ContainerGCPeriod time.Duration
	// PLEGRelistPeriod is the period of the PLEG relist.
	PLEGRelistPeriod time.Duration
	// VolumeStatsAggPeriod is how long a pod's volume usage (a walk of
	// each volume's directory) is reused by the stats summary and the
	// local-storage eviction (the kubelet's volumeStatsAggPeriod).
	VolumeStatsAggPeriod time.Duration
	// MaxPods is the max-pods admission limit.
	MaxPods int
	// Address is the read-only server's listen address.
	Address string
	// ReadOnlyPort serves /healthz, /pods, /metrics (and /plugins); 0 disables it.
	ReadOnlyPort int
	// SecureAddress is the kubelet API's listen address (all, by default).
	SecureAddress string
	// Port is the kubelet API's port (TLS: /containerLogs, /healthz);
	// 0 disables it. It is served when clients can be authenticated: with
	// KubeConfig (TokenReview) or a ClientCAFile.
	Port int
	// TLSCertFile and TLSPrivateKeyFile are the kubelet API's serving
	// certificate; empty means a self-signed one under <RootDir>/pki.
	TLSCertFile, TLSPrivateKeyFile string
	// ClientCAFile authenticates the kubelet API's clients by x509
	// certificate (the API server's kubelet client certificate).
	ClientCAFile string
	// AnonymousAuth lets unauthenticated requests through as
	// system:anonymous (off, as the kubelet's recommended configuration).
	AnonymousAuth bool
	// AuthorizationMode is "Webhook" (SubjectAccessReview, the default
	// with KubeConfig) or "AlwaysAllow" (the default standalone).
	AuthorizationMode string
	// NoTokenReview turns the kubelet API's bearer-token (TokenReview)
	// authentication off, leaving x509 and anonymous.
	NoTokenReview bool
	// ContainerLogMaxSize is the size in bytes over which a running
	// container's log is rotated, ContainerLogMaxFiles how many files its
	// log may span (at least 2), as the kubelet's containerLogMaxSize and
	// containerLogMaxFiles.
	ContainerLogMaxSize  int64
	ContainerLogMaxFiles int
	// TokenCacheTTL, AuthorizedCacheTTL and UnauthorizedCacheTTL are how
	// long the kubelet API caches TokenReview answers and
	// SubjectAccessReview allows and denials; 0 means the kubelet's
	// defaults (2 min, 5 min, 30 s).
	TokenCacheTTL, AuthorizedCacheTTL, UnauthorizedCacheTTL time.Duration
	// KubeConfig is a kubeconfig file with the node's credentials: with it
	// the agent joins the cluster (API pod source, Node and Lease, pod status,
	// mirror pods, events); empty runs standalone.
	KubeConfig string
	// BootstrapKubeConfig is a kubeconfig with a bootstrap token: when
	// KubeConfig holds no valid client certificate, the node requests one
	// with it (a kubernetes.io/kube-apiserver-client-kubelet CSR), stores
	// it in CertDir and writes KubeConfig pointing at it (TLS bootstrap).
	BootstrapKubeConfig string
	// CertDir holds the node's client and serving certificates
	// (kubelet-client-current.pem, kubelet-server-current.pem) and the
	// self-signed serving pair; empty means <RootDir>/pki.
	CertDir string
	// RotateCertificates renews the client certificate through a CSR
	// before it expires and switches the API connections to the new one.
	RotateCertificates bool
	// RotateServerCertificates requests the kubelet API's serving
	// certificate through a kubernetes.io/kubelet-serving CSR and renews
	// it before it expires (the KubeletConfiguration's serverTLSBootstrap);
	// it needs KubeConfig.
	RotateServerCertificates bool
	// KubeAPIQPS and KubeAPIBurst bound the request rate to the API server
	// (the kubelet's kubeAPIQPS 50, kubeAPIBurst 100).
	KubeAPIQPS   float32
	KubeAPIBurst int
	// NodeStatusUpdateFrequency is how often the node status is computed
	// and posted if it changed (10 s).
	NodeStatusUpdateFrequency time.Duration
	// NodeStatusReportFrequency is how often an unchanged node status is
	// posted anyway (5 min); the Lease is the heartbeat.
	NodeStatusReportFrequency time.Duration
	// Logger receives structured logs.
	Logger hclog.Logger
	// Registerer receives the agent's metrics; nil means a fresh registry.
	Registerer prometheus.Registerer
}

// Defaults returns a Config with the kubelet's defaults where it has them.
func Defaults() Config {
	return Config{
		FileCheckFrequency:    20 * time.Second,
		RuntimeRequestTimeout: 2 * time.Minute,
		RootDir:               "/var/lib/wasmlet",
		PodLogsDir:            "/var/log/pods",
		SyncFrequency:         time.Minute,
		HousekeepingInterval:  2 * time.Second,
		ContainerGCPeriod:     time.Minute,
		PLEGRelistPeriod:      time.Second,
		VolumeStatsAggPeriod:  time.Minute,
		VolumeResyncPeriod:    10 * time.Second,
		MaxPods:               110,
		CgroupsPerQOS:         true,
		ResolvConf:            "/etc/resolv.conf",
		CgroupDriver:          "cgroupfs",
		CgroupRoot:            "/",
		Address:               "127.0.0.1",
		ReadOnlyPort:          10255,
		Port:                  10250,
		ContainerLogMaxSize:   logrotate.DefaultMaxSize,
		ContainerLogMaxFiles:  logrotate.DefaultMaxFiles,
		PluginIdleTimeout:     pluginhost.DefaultIdleTimeout,

		KubeAPIQPS:                50,
		KubeAPIBurst:              100,
		NodeStatusUpdateFrequency: 10 * time.Second,
		NodeStatusReportFrequency: 5 * time.Minute,
	}
}
