package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"reflect"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/wasmlet/wasmlet/host/agent"
)

func init() {
	register("run", command{
		summary: "run the node agent (flags, or --config FILE with kind WasmletConfiguration)",
		run:     runRun,
	})
}

// The config file's kind and apiVersion.
const (
	configKind       = "WasmletConfiguration"
	configAPIVersion = "wasmlet.io/v1alpha1"
)

// fileConfig is the `wasmlet run --config` file, in the spirit of the
// kubelet's KubeletConfiguration: YAML or JSON, camelCase fields, durations
// as Go durations ("20s"). Fields left out keep their defaults; flags given
// on the command line override the file. Unknown fields are an error.
type fileConfig struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion,omitempty"`

	NodeName                 string           `json:"nodeName,omitempty"`
	StaticPodPath            *string          `json:"staticPodPath,omitempty"`
	FileCheckFrequency       *metav1.Duration `json:"fileCheckFrequency,omitempty"`
	PodObjectsDir            *string          `json:"podObjectsDir,omitempty"`
	ClusterDomain            *string          `json:"clusterDomain,omitempty"`
	ClusterDNS               []string         `json:"clusterDNS,omitempty"`
	ResolvConf               *string          `json:"resolvConf,omitempty"`
	PluginDir                *string          `json:"pluginDir,omitempty"`
	PluginIdleTimeout        *metav1.Duration `json:"pluginIdleTimeout,omitempty"`
	ContainerRuntimeEndpoint *string          `json:"containerRuntimeEndpoint,omitempty"`
	ImageServiceEndpoint     *string          `json:"imageServiceEndpoint,omitempty"`
	CgroupsPerQOS            *bool            `json:"cgroupsPerQOS,omitempty"`
	CgroupDriver             *string          `json:"cgroupDriver,omitempty"`
	CgroupRoot               *string          `json:"cgroupRoot,omitempty"`
	RuntimeRequestTimeout    *metav1.Duration `json:"runtimeRequestTimeout,omitempty"`
	RootDir                  *string          `json:"rootDir,omitempty"`
	PodLogsDir               *string          `json:"podLogsDir,omitempty"`
	SyncFrequency            *metav1.Duration `json:"syncFrequency,omitempty"`
	HousekeepingInterval     *metav1.Duration `json:"housekeepingInterval,omitempty"`
	ContainerGCPeriod        *metav1.Duration `json:"containerGCPeriod,omitempty"`
	PLEGRelistPeriod         *metav1.Duration `json:"plegRelistPeriod,omitempty"`
	VolumeStatsAggPeriod     *metav1.Duration `json:"volumeStatsAggPeriod,omitempty"`
	MaxPods                  *int             `json:"maxPods,omitempty"`
	Address                  *string          `json:"address,omitempty"`
	ReadOnlyPort             *int             `json:"readOnlyPort,omitempty"`
	ContainerLogMaxSize      *string          `json:"containerLogMaxSize,omitempty"`
	ContainerLogMaxFiles     *int             `json:"containerLogMaxFiles,omitempty"`
	LogLevel                 *string          `json:"logLevel,omitempty"`
	LogJSON                  *bool            `json:"logJSON,omitempty"`

	KubeConfig *string `json:"kubeconfig,omitempty"`
	// RotateCertificates and ServerTLSBootstrap are the
	// KubeletConfiguration's names of --rotate-certificates and
	// --rotate-server-certificates.
	RotateCertificates *bool   `json:"rotateCertificates,omitempty"`
	ServerTLSBootstrap *bool   `json:"serverTLSBootstrap,omitempty"`
	SecureAddress      *string `json:"secureAddress,omitempty"`
	Port               *int    `json:"port,omitempty"`
	TLSCertFile        *string `json:"tlsCertFile,omitempty"`
	TLSPrivateKeyFile  *string `json:"tlsPrivateKeyFile,omitempty"`
	ClientCAFile       *string `json:"clientCAFile,omitempty"`
	AnonymousAuth      *bool   `json:"anonymousAuth,omitempty"`
	AuthorizationMode  *string `json:"authorizationMode,omitempty"`
	// Authentication and Authorization are the kubelet API's settings in
	// the KubeletConfiguration's shape (the flat clientCAFile,
	// anonymousAuth and authorizationMode are the same settings; a block
	// and its flat field may not both be given).
	Authentication            *fileAuthentication `json:"authentication,omitempty"`
	Authorization             *fileAuthorization  `json:"authorization,omitempty"`
	NodeStatusUpdateFrequency *metav1.Duration    `json:"nodeStatusUpdateFrequency,omitempty"`
	NodeStatusReportFrequency *metav1.Duration    `json:"nodeStatusReportFrequency,omitempty"`
}

// fileAuthentication is KubeletConfiguration's authentication block.
type fileAuthentication struct {
	X509 *struct {
		ClientCAFile *string `json:"clientCAFile,omitempty"`
	} `json:"x509,omitempty"`
	Webhook *struct {
		Enabled  *bool            `json:"enabled,omitempty"`
		CacheTTL *metav1.Duration `json:"cacheTTL,omitempty"`
	} `json:"webhook,omitempty"`
	Anonymous *struct {
		Enabled *bool `json:"enabled,omitempty"`
	} `json:"anonymous,omitempty"`
}

// fileAuthorization is KubeletConfiguration's authorization block.
type fileAuthorization struct {
	Mode    *string `json:"mode,omitempty"`
	Webhook *struct {
		CacheAuthorizedTTL   *metav1.Duration `json:"cacheAuthorizedTTL,omitempty"`
		CacheUnauthorizedTTL *metav1.Duration `json:"cacheUnauthorizedTTL,omitempty"`
	} `json:"webhook,omitempty"`
}

// applyAuth sets cfg from the authentication and authorization blocks; a
// setting given both there and in its flat field is an error naming both.
func (f *fileConfig) applyAuth(cfg *agent.Config) error {
	both := func(block, flat string, v any) error {
		if !reflect.ValueOf(v).IsNil() {
			return fmt.Errorf("%s and %s are the same setting: give one", block, flat)
		}
		return nil
	}
	if a := f.Authentication; a != nil {
		if a.X509 != nil && a.X509.ClientCAFile != nil {
			if err := both("authentication.x509.clientCAFile", "clientCAFile", f.ClientCAFile); err != nil {
				return err
			}
			cfg.ClientCAFile = *a.X509.ClientCAFile
		}
		if a.Anonymous != nil && a.Anonymous.Enabled != nil {
			if err := both("authentication.anonymous.enabled", "anonymousAuth", f.AnonymousAuth); err != nil {
				return err
			}
			cfg.AnonymousAuth = *a.Anonymous.Enabled
		}
		if w := a.Webhook; w != nil {
			if w.Enabled != nil {
				cfg.NoTokenReview = !*w.Enabled
			}
			setDuration(&cfg.TokenCacheTTL, w.CacheTTL)
		}
	}
	if a := f.Authorization; a != nil {
		if a.Mode != nil {
			if err := both("authorization.mode", "authorizationMode", f.AuthorizationMode); err != nil {
				return err
			}
			cfg.AuthorizationMode = *a.Mode
		}
		if w := a.Webhook; w != nil {
			setDuration(&cfg.AuthorizedCacheTTL, w.CacheAuthorizedTTL)
			setDuration(&cfg.UnauthorizedCacheTTL, w.CacheUnauthorizedTTL)
		}
	}
	return nil
}

// sizeFlag is a size in bytes given as a Kubernetes quantity ("10Mi").
type sizeFlag int64

// String implements flag.Value.
func (s *sizeFlag) String() string {
	if s == nil {
		return ""
	}
	return resource.NewQuantity(int64(*s), resource.BinarySI).String()
}

// Set implements flag.Value.
func (s *sizeFlag) Set(v string) error {
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return fmt.Errorf("%q is not a quantity such as 10Mi: %w", v, err)
	}
	*s = sizeFlag(q.Value())
	return nil
}

// logOptions are the settings of `wasmlet run` that are not agent.Config's.
type logOptions struct {
	Level string
	JSON  bool
}

// runFlags binds the flags of `wasmlet run` to c and lo, with their current
// values as defaults.
func runFlags(c *agent.Config, lo *logOptions, configFile *string) *flag.FlagSet {
	fs := flag.NewFlagSet("wasmlet run", flag.ContinueOnError)
	fs.StringVar(configFile, "config", *configFile, "config file (YAML or JSON, kind "+configKind+"); flags given override it")
	fs.StringVar(&c.NodeName, "node-name", c.NodeName, "this node's name; static pods are named <pod>-<node-name> (default: the host name)")
	fs.StringVar(&c.StaticPodPath, "pod-manifest-path", c.StaticPodPath, "directory of static pod manifests (the file source); empty disables it")
	fs.DurationVar(&c.FileCheckFrequency, "file-check-frequency", c.FileCheckFrequency, "period of the full re-read of the static pod directory, besides its watch")
	fs.StringVar(&c.PodObjectsDir, "pod-objects-dir", c.PodObjectsDir, "standalone only: directory of ConfigMap and Secret manifests (YAML/JSON) that static pods' volumes and env may reference")
	fs.StringVar(&c.ClusterDomain, "cluster-domain", c.ClusterDomain, "the cluster's DNS domain (e.g. cluster.local), for pods' FQDNs in /etc/hosts")
	fs.Func("cluster-dns", "comma-separated IPs of the cluster DNS servers, given to ClusterFirst pods (default: none, such pods get the host's resolver)", func(v string) error {
		c.ClusterDNS = nil
		for _, ip := range strings.Split(v, ",") {
			if ip = strings.TrimSpace(ip); ip != "" {
				if net.ParseIP(ip) == nil {
					return fmt.Errorf("%q is not an IP address", ip)
				}
				c.ClusterDNS = append(c.ClusterDNS, ip)
			}
		}
		return nil
	})
	fs.StringVar(&c.ResolvConf, "resolv-conf", c.ResolvConf, "the host's resolver file that Default pods copy; empty gives them 127.0.0.1")
	fs.StringVar(&c.PluginDir, "plugin-dir", c.PluginDir, "directory of .wasm plugins and their manifests; empty loads none")
	fs.DurationVar(&c.PluginIdleTimeout, "plugin-idle-timeout", c.PluginIdleTimeout, "a plugin not called for this long gives back its memory and is reloaded from the compilation cache on its next call; 0 keeps plugins loaded")
	fs.StringVar(&c.RuntimeEndpoint, "container-runtime-endpoint", c.RuntimeEndpoint, "CRI endpoint, e.g. unix:///run/containerd/containerd.sock; empty runs the embedded WASI runtime")
	fs.StringVar(&c.ImageEndpoint, "image-service-endpoint", c.ImageEndpoint, "CRI image service endpoint (default: the runtime endpoint)")
	fs.BoolVar(&c.CgroupsPerQOS, "cgroups-per-qos", c.CgroupsPerQOS, "run each pod of a CRI runtime under its own cgroup in the kubelet's kubepods/<qos>/pod<uid> hierarchy, with the pod's limits")
	fs.StringVar(&c.CgroupDriver, "cgroup-driver", c.CgroupDriver, "cgroup driver of the runtime: cgroupfs or systemd")
	fs.StringVar(&c.CgroupRoot, "cgroup-root", c.CgroupRoot, "the cgroup the kubepods hierarchy is made under")
	fs.DurationVar(&c.RuntimeRequestTimeout, "runtime-request-timeout", c.RuntimeRequestTimeout, "timeout of each CRI call")
	fs.StringVar(&c.RootDir, "root-dir", c.RootDir, "the agent's state: pod directories, plugin cache, the embedded runtime")
	fs.StringVar(&c.PodLogsDir, "pod-logs-dir", c.PodLogsDir, "container logs, as <dir>/<namespace>_<pod>_<uid>/<container>/<restart>.log")
	fs.DurationVar(&c.SyncFrequency, "sync-frequency", c.SyncFrequency, "period of the resync of every pod")
	fs.DurationVar(&c.HousekeepingInterval, "housekeeping-interval", c.HousekeepingInterval, "period of the cleanup of orphaned pods, containers and directories")
	fs.DurationVar(&c.ContainerGCPeriod, "container-gc-period", c.ContainerGCPeriod, "least time between two removals of dead containers, sandboxes and pod directories")
	fs.DurationVar(&c.PLEGRelistPeriod, "pleg-relist-period", c.PLEGRelistPeriod, "period of the runtime relist")
	fs.DurationVar(&c.VolumeStatsAggPeriod, "volume-stats-agg-period", c.VolumeStatsAggPeriod, "how long a pod's volume usage (a walk of each volume) is reused by the stats summary and local-storage eviction")
	fs.IntVar(&c.MaxPods, "max-pods", c.MaxPods, "the most pods this node admits")
	fs.StringVar(&c.Address, "address", c.Address, "listen address of the read-only server")
	fs.IntVar(&c.ReadOnlyPort, "read-only-port", c.ReadOnlyPort, "port of the read-only server (/healthz, /pods, /metrics); 0 disables it")
	fs.Var((*sizeFlag)(&c.ContainerLogMaxSize), "container-log-max-size", "size (a quantity: 10Mi) over which a running container's log is rotated")
	fs.IntVar(&c.ContainerLogMaxFiles, "container-log-max-files", c.ContainerLogMaxFiles, "most files a container's log spans, the live one included (at least 2)")
	fs.StringVar(&c.KubeConfig, "kubeconfig", c.KubeConfig, "kubeconfig with this node's credentials: join the cluster (API pod source, Node + Lease, pod status, mirror pods, events); empty runs standalone")
	fs.StringVar(&c.BootstrapKubeConfig, "bootstrap-kubeconfig", c.BootstrapKubeConfig, "kubeconfig with a bootstrap token: when --kubeconfig holds no valid client certificate, request one (CSR), store it in --cert-dir and write --kubeconfig pointing at it")
	fs.StringVar(&c.CertDir, "cert-dir", c.CertDir, "directory of the node's client and serving certificates (default <root-dir>/pki)")
	fs.BoolVar(&c.RotateCertificates, "rotate-certificates", c.RotateCertificates, "renew the client certificate through a CSR before it expires (default true with --bootstrap-kubeconfig)")
	fs.BoolVar(&c.RotateServerCertificates, "rotate-server-certificates", c.RotateServerCertificates, "request the kubelet API's serving certificate through a kubernetes.io/kubelet-serving CSR and renew it before it expires")
	fs.StringVar(&c.SecureAddress, "secure-address", c.SecureAddress, "listen address of the kubelet API (default: all addresses)")
	fs.IntVar(&c.Port, "port", c.Port, "port of the kubelet API (TLS: /containerLogs, /healthz), served with --kubeconfig or --client-ca-file; 0 disables it")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", c.TLSCertFile, "the kubelet API's serving certificate (default: self-signed under <root-dir>/pki)")
	fs.StringVar(&c.TLSPrivateKeyFile, "tls-private-key-file", c.TLSPrivateKeyFile, "the key of --tls-cert-file")
	fs.StringVar(&c.ClientCAFile, "client-ca-file", c.ClientCAFile, "CA bundle that authenticates the kubelet API's clients by x509 certificate")
	fs.BoolVar(&c.AnonymousAuth, "anonymous-auth", c.AnonymousAuth, "let unauthenticated kubelet API requests through as system:anonymous")
	fs.StringVar(&c.AuthorizationMode, "authorization-mode", c.AuthorizationMode, "kubelet API authorization: Webhook (SubjectAccessReview; default with --kubeconfig) or AlwaysAllow (default standalone)")
	fs.DurationVar(&c.NodeStatusUpdateFrequency, "node-status-update-frequency", c.NodeStatusUpdateFrequency, "period of the node status computation (posted when changed); with --kubeconfig")
	fs.DurationVar(&c.NodeStatusReportFrequency, "node-status-report-frequency", c.NodeStatusReportFrequency, "period at which an unchanged node status is posted anyway; with --kubeconfig")
	fs.StringVar(&lo.Level, "log-level", lo.Level, "log level: trace, debug, info, warn, error")
	fs.BoolVar(&lo.JSON, "log-json", lo.JSON, "write logs as JSON lines")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: wasmlet run [flags]\n\nRuns the node agent until SIGTERM or SIGINT.\n\nflags:\n")
		fs.PrintDefaults()
	}
	return fs
}

// loadRunConfig turns the arguments of `wasmlet run` into the agent's
// Config: agent.Defaults, then the --config file, then the flags given.
func loadRunConfig(args []string, stderr io.Writer) (agent.Config, logOptions, error) {
	cfg, lo, file := agent.Defaults(), logOptions{Level: "info"}, ""
	fs := runFlags(&cfg, &lo, &file)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return cfg, lo, err
	}
	if fs.NArg() > 0 {
		return cfg, lo, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if file != "" {
		cfg, lo = agent.Defaults(), logOptions{Level: "info"}
		if err := applyConfigFile(file, &cfg, &lo); err != nil {
			return cfg, lo, err
		}
		// Parse again over the file's values: only the flags given change
		// them.
		fs = runFlags(&cfg, &lo, &file)
		fs.SetOutput(stderr)
		if err := fs.Parse(args); err != nil {
			return cfg, lo, err
		}
	}
	// Bootstrapping renews the certificate it got unless told not to.
	rotateGiven := false
	fs.Visit(func(f *flag.Flag) { rotateGiven = rotateGiven || f.Name == "rotate-certificates" })
	if cfg.BootstrapKubeConfig != "" && !rotateGiven && (file == "" || !fileGives(file, "rotateCertificates")) {
		cfg.RotateCertificates = true
	}
	if cfg.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return cfg, lo, fmt.Errorf("node name: %w", err)
		}
		cfg.NodeName = h
	}
	cfg.NodeName = strings.ToLower(cfg.NodeName)
	return cfg, lo, validateRunConfig(cfg, lo)
}

// fileGives reports whether the config file at path (already read without
// error by applyConfigFile) sets the top-level field key.
func fileGives(path, key string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var m map[string]any
	if yaml.Unmarshal(b, &m) != nil {
		return false
	}
	_, ok := m[key]
	return ok
}

// applyConfigFile reads a WasmletConfiguration file over cfg and lo.
func applyConfigFile(path string, cfg *agent.Config, lo *logOptions) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	var f fileConfig
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	if f.Kind != configKind {
		return fmt.Errorf("config file %s: kind is %q, want %q", path, f.Kind, configKind)
	}
	if f.APIVersion != "" && f.APIVersion != configAPIVersion {
		return fmt.Errorf("config file %s: apiVersion is %q, want %q", path, f.APIVersion, configAPIVersion)
	}
	if f.NodeName != "" {
		cfg.NodeName = f.NodeName
	}
	setString(&cfg.StaticPodPath, f.StaticPodPath)
	setString(&cfg.PluginDir, f.PluginDir)
	setString(&cfg.PodObjectsDir, f.PodObjectsDir)
	setString(&cfg.ClusterDomain, f.ClusterDomain)
	setString(&cfg.ResolvConf, f.ResolvConf)
	if f.ClusterDNS != nil {
		cfg.ClusterDNS = f.ClusterDNS
	}
	setString(&cfg.RuntimeEndpoint, f.ContainerRuntimeEndpoint)
	setString(&cfg.ImageEndpoint, f.ImageServiceEndpoint)
	setString(&cfg.CgroupDriver, f.CgroupDriver)
	setString(&cfg.CgroupRoot, f.CgroupRoot)
	if f.CgroupsPerQOS != nil {
		cfg.CgroupsPerQOS = *f.CgroupsPerQOS
	}
	setString(&cfg.RootDir, f.RootDir)
	setString(&cfg.PodLogsDir, f.PodLogsDir)
	setString(&cfg.Address, f.Address)
	setString(&lo.Level, f.LogLevel)
	setString(&cfg.KubeConfig, f.KubeConfig)
	if f.RotateCertificates != nil {
		cfg.RotateCertificates = *f.RotateCertificates
	}
	if f.ServerTLSBootstrap != nil {
		cfg.RotateServerCertificates = *f.ServerTLSBootstrap
	}
	setString(&cfg.SecureAddress, f.SecureAddress)
	setString(&cfg.TLSCertFile, f.TLSCertFile)
	setString(&cfg.TLSPrivateKeyFile, f.TLSPrivateKeyFile)
	setString(&cfg.ClientCAFile, f.ClientCAFile)
	setString(&cfg.AuthorizationMode, f.AuthorizationMode)
	if f.Port != nil {
		cfg.Port = *f.Port
	}
	if f.AnonymousAuth != nil {
		cfg.AnonymousAuth = *f.AnonymousAuth
	}
	setDuration(&cfg.NodeStatusUpdateFrequency, f.NodeStatusUpdateFrequency)
	setDuration(&cfg.NodeStatusReportFrequency, f.NodeStatusReportFrequency)
	setDuration(&cfg.FileCheckFrequency, f.FileCheckFrequency)
	setDuration(&cfg.RuntimeRequestTimeout, f.RuntimeRequestTimeout)
	setDuration(&cfg.SyncFrequency, f.SyncFrequency)
	setDuration(&cfg.HousekeepingInterval, f.HousekeepingInterval)
	setDuration(&cfg.ContainerGCPeriod, f.ContainerGCPeriod)
	setDuration(&cfg.PLEGRelistPeriod, f.PLEGRelistPeriod)
	setDuration(&cfg.VolumeStatsAggPeriod, f.VolumeStatsAggPeriod)
	setDuration(&cfg.PluginIdleTimeout, f.PluginIdleTimeout)
	if f.MaxPods != nil {
		cfg.MaxPods = *f.MaxPods
	}
	if f.ReadOnlyPort != nil {
		cfg.ReadOnlyPort = *f.ReadOnlyPort
	}
	if f.ContainerLogMaxSize != nil {
		if err := (*sizeFlag)(&cfg.ContainerLogMaxSize).Set(*f.ContainerLogMaxSize); err != nil {
			return fmt.Errorf("containerLogMaxSize: %w", err)
		}
	}
	if f.ContainerLogMaxFiles != nil {
		cfg.ContainerLogMaxFiles = *f.ContainerLogMaxFiles
	}
	if f.LogJSON != nil {
		lo.JSON = *f.LogJSON
	}
	return f.applyAuth(cfg)
}

func setString(dst *string, v *string) {
	if v != nil {
		*dst = *v
	}
}

func setDuration(dst *time.Duration, v *metav1.Duration) {
	if v != nil {
		*dst = v.Duration
	}
}

// validateRunConfig rejects values the agent would misuse.
func validateRunConfig(c agent.Config, lo logOptions) error {
	var errs []error
	for name, d := range map[string]time.Duration{
		"file-check-frequency": c.FileCheckFrequency, "runtime-request-timeout": c.RuntimeRequestTimeout,
		"sync-frequency": c.SyncFrequency, "housekeeping-interval": c.HousekeepingInterval, "container-gc-period": c.ContainerGCPeriod,
		"pleg-relist-period": c.PLEGRelistPeriod, "volume-stats-agg-period": c.VolumeStatsAggPeriod,
		"node-status-update-frequency": c.NodeStatusUpdateFrequency, "node-status-report-frequency": c.NodeStatusReportFrequency,
	} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, not %v", name, d))
		}
	}
	for name, d := range map[string]time.Duration{
		"authentication.webhook.cacheTTL": c.TokenCacheTTL, "authorization.webhook.cacheAuthorizedTTL": c.AuthorizedCacheTTL,
		"authorization.webhook.cacheUnauthorizedTTL": c.UnauthorizedCacheTTL,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative, not %v", name, d))
		}
	}
	if c.PluginIdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("plugin-idle-timeout must not be negative, not %v", c.PluginIdleTimeout))
	}
	if c.MaxPods <= 0 {
		errs = append(errs, fmt.Errorf("max-pods must be positive, not %d", c.MaxPods))
	}
	if c.ContainerLogMaxSize <= 0 {
		errs = append(errs, fmt.Errorf("container-log-max-size must be positive, not %d", c.ContainerLogMaxSize))
	}
	if c.ContainerLogMaxFiles < 2 {
		errs = append(errs, fmt.Errorf("container-log-max-files must be at least 2, not %d", c.ContainerLogMaxFiles))
	}
	if c.ReadOnlyPort < 0 || c.ReadOnlyPort > 65535 {
		errs = append(errs, fmt.Errorf("read-only-port %d is not a port", c.ReadOnlyPort))
	}
	if c.Port < 0 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("port %d is not a port", c.Port))
	}
	switch c.AuthorizationMode {
	case "", "Webhook", "AlwaysAllow":
	default:
		errs = append(errs, fmt.Errorf("authorization-mode %q is not Webhook or AlwaysAllow", c.AuthorizationMode))
	}
	if (c.TLSCertFile == "") != (c.TLSPrivateKeyFile == "") {
		errs = append(errs, errors.New("tls-cert-file and tls-private-key-file go together"))
	}
	if hclog.LevelFromString(lo.Level) == hclog.NoLevel {
		errs = append(errs, fmt.Errorf("log-level %q is not one of trace, debug, info, warn, error", lo.Level))
	}
	if c.RootDir == "" {
		errs = append(errs, errors.New("root-dir is empty"))
	}
	if c.KubeConfig == "" {
		for _, o := range []struct {
			name string
			on   bool
		}{{"bootstrap-kubeconfig", c.BootstrapKubeConfig != ""}, {"rotate-certificates", c.RotateCertificates}, {"rotate-server-certificates", c.RotateServerCertificates}} {
			if o.on {
				errs = append(errs, fmt.Errorf("%s needs --kubeconfig (with --bootstrap-kubeconfig, the file it writes)", o.name))
			}
		}
	}
	return errors.Join(errs...)
}

// runRun is `wasmlet run`: the agent until SIGTERM or SIGINT.
func runRun(args []string, _, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		// After the first signal, a second one kills the process at once.
		<-ctx.Done()
		stop()
	}()
	return runAgent(ctx, args, stderr)
}

// runAgent runs `wasmlet run` until ctx is done; it returns the exit code.
func runAgent(ctx context.Context, args []string, stderr io.Writer) int {
	cfg, lo, err := loadRunConfig(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "wasmlet run: %v\n", err)
		return 2
	}
	log := hclog.New(&hclog.LoggerOptions{
		Name: "wasmlet", Level: hclog.LevelFromString(lo.Level), JSONFormat: lo.JSON, Output: stderr,
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.Logger, cfg.Registerer = log, reg
	a, err := agent.NewContext(ctx, cfg)
	if errors.Is(err, context.Canceled) {
		log.Info("stopped before the agent was built", "reason", err)
		return 0
	}
	if err != nil {
		log.Error("cannot create the agent", "error", err)
		return 1
	}
	log.Info("starting", "node", cfg.NodeName, "pod_manifest_path", cfg.StaticPodPath, "runtime_endpoint", cfg.RuntimeEndpoint,
		"plugin_dir", cfg.PluginDir, "root_dir", cfg.RootDir, "read_only", fmt.Sprintf("%s:%d", cfg.Address, cfg.ReadOnlyPort))
	err = a.Run(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Error("agent failed", "error", err)
		return 1
	}
	log.Info("stopped")
	return 0
}
