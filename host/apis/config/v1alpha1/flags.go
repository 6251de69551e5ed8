package v1alpha1

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AddFlags binds the command-line flags of `wasmlet run` to c's fields: a
// flag given sets its field, a flag not given leaves it as it is (unset, or
// what the file said). Parse the flags over a loaded file to let them
// override it; SetDefaults afterwards fills the rest. The usage shows each
// flag's default.
func (c *WasmletConfiguration) AddFlags(fs *flag.FlagSet) {
	c.addFlags(fs)
	var d WasmletConfiguration
	d.setFixedDefaults()
	shown := flag.NewFlagSet("defaults", flag.ContinueOnError)
	d.addFlags(shown)
	shown.VisitAll(func(f *flag.Flag) { fs.Lookup(f.Name).DefValue = f.Value.String() })
}

func (c *WasmletConfiguration) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.NodeName, "node-name", c.NodeName, "this node's name; static pods are named <pod>-<node-name> (default: the host name)")
	fs.StringVar(&c.StaticPodPath, "pod-manifest-path", c.StaticPodPath, "directory of static pod manifests (the file source); empty disables it")
	fs.DurationVar(&c.FileCheckFrequency.Duration, "file-check-frequency", c.FileCheckFrequency.Duration, "period of the full re-read of the static pod directory, besides its watch")
	fs.StringVar(&c.PodObjectsDir, "pod-objects-dir", c.PodObjectsDir, "standalone only: directory of ConfigMap and Secret manifests (YAML/JSON) that static pods' volumes and env may reference")
	fs.StringVar(&c.ClusterDomain, "cluster-domain", c.ClusterDomain, "the cluster's DNS domain (e.g. cluster.local), for pods' FQDNs in /etc/hosts")
	fs.Func("cluster-dns", "comma-separated IPs of the cluster DNS servers, given to ClusterFirst pods (default: none, such pods get the host's resolver)", func(v string) error {
		c.ClusterDNS = nil
		for _, ip := range strings.Split(v, ",") {
			if ip = strings.TrimSpace(ip); ip != "" {
				c.ClusterDNS = append(c.ClusterDNS, ip)
			}
		}
		return nil
	})
	fs.Var(optional(&c.ResolvConf, parseString, formatString), "resolv-conf", "the host's resolver `file` that Default pods copy; empty gives them 127.0.0.1")
	fs.StringVar(&c.PluginDir, "plugin-dir", c.PluginDir, "directory of .wasm plugins and their manifests; empty loads none")
	fs.Var(optional(&c.PluginIdleTimeout, parseDuration, formatDuration), "plugin-idle-timeout", "a plugin not called for this `duration` gives back its memory and is reloaded from the compilation cache on its next call; 0 keeps plugins loaded")
	fs.DurationVar(&c.PluginResolveInterval.Duration, "plugin-resolve-interval", c.PluginResolveInterval.Duration, "how often the tag of a plugin in a registry (image: in its manifest) is resolved again; a new digest is pulled, verified, then loaded")
	fs.StringVar(&c.PluginVerificationPolicy, "plugin-verification-policy", c.PluginVerificationPolicy, "`file` of the node's signature policy for plugins in a registry")
	fs.StringVar(&c.PluginRegistryConfig, "plugin-registry-config", c.PluginRegistryConfig, "docker config.json `file` with the credentials for plugin pulls (default: ~/.docker/config.json)")
	fs.StringVar(&c.PluginRegistryCA, "plugin-registry-ca", c.PluginRegistryCA, "PEM `file` of CAs trusted for plugin registries besides the system's")
	fs.StringVar(&c.ImageCredentialProviderConfig, "image-credential-provider-config", c.ImageCredentialProviderConfig, "CredentialProviderConfig `file` (kubelet.config.k8s.io/v1) of the exec credential provider plugins run for image pulls")
	fs.StringVar(&c.ImageCredentialProviderBinDir, "image-credential-provider-bin-dir", c.ImageCredentialProviderBinDir, "`directory` of the credential provider executables, each named as its provider")
	fs.StringVar(&c.ImagePullDockerConfig, "image-pull-docker-config", c.ImagePullDockerConfig, "docker config.json `file` whose credentials image pulls may use after the pod's pull secrets and the credential providers' (for static pods without an API server)")
	fs.StringVar(&c.ImageRegistryCA, "image-registry-ca", c.ImageRegistryCA, "PEM `file` of CAs the embedded WASI runtime trusts for image registries besides the system's")
	fs.StringVar(&c.ContainerRuntimeEndpoint, "container-runtime-endpoint", c.ContainerRuntimeEndpoint, "CRI endpoint, e.g. unix:///run/containerd/containerd.sock; empty runs the embedded WASI runtime")
	fs.StringVar(&c.ImageServiceEndpoint, "image-service-endpoint", c.ImageServiceEndpoint, "CRI image service endpoint (default: the runtime endpoint)")
	fs.Var(optional(&c.CgroupsPerQOS, strconv.ParseBool, strconv.FormatBool), "cgroups-per-qos", "run each pod of a CRI runtime under its own cgroup in the kubelet's kubepods/<qos>/pod<uid> hierarchy, with the pod's limits")
	fs.StringVar(&c.CgroupDriver, "cgroup-driver", c.CgroupDriver, "cgroup driver of the runtime: cgroupfs or systemd")
	fs.StringVar(&c.CgroupRoot, "cgroup-root", c.CgroupRoot, "the cgroup the kubepods hierarchy is made under")
	fs.DurationVar(&c.RuntimeRequestTimeout.Duration, "runtime-request-timeout", c.RuntimeRequestTimeout.Duration, "timeout of each CRI call")
	fs.StringVar(&c.RootDir, "root-dir", c.RootDir, "the agent's state: pod directories, plugin cache, the embedded runtime")
	fs.StringVar(&c.PodLogsDir, "pod-logs-dir", c.PodLogsDir, "container logs, as <dir>/<namespace>_<pod>_<uid>/<container>/<restart>.log")
	fs.DurationVar(&c.SyncFrequency.Duration, "sync-frequency", c.SyncFrequency.Duration, "period of the resync of every pod")
	fs.DurationVar(&c.HousekeepingInterval.Duration, "housekeeping-interval", c.HousekeepingInterval.Duration, "period of the cleanup of orphaned pods, containers and directories")
	fs.DurationVar(&c.ContainerGCPeriod.Duration, "container-gc-period", c.ContainerGCPeriod.Duration, "least time between two removals of dead containers, sandboxes and pod directories")
	fs.DurationVar(&c.PLEGRelistPeriod.Duration, "pleg-relist-period", c.PLEGRelistPeriod.Duration, "period of the runtime relist")
	fs.DurationVar(&c.VolumeStatsAggPeriod.Duration, "volume-stats-agg-period", c.VolumeStatsAggPeriod.Duration, "how long a pod's volume usage (a walk of each volume) is reused by the stats summary and local-storage eviction")
	fs.IntVar(&c.MaxPods, "max-pods", c.MaxPods, "the most pods this node admits")
	fs.StringVar(&c.Address, "address", c.Address, "listen address of the read-only server")
	fs.Var(optional(&c.ReadOnlyPort, strconv.Atoi, strconv.Itoa), "read-only-port", "`port` of the read-only server (/healthz, /pods, /metrics); 0 disables it")
	fs.Var(optional(&c.HealthzPort, strconv.Atoi, strconv.Itoa), "healthz-port", "`port` of the healthz server (/healthz alone); 0 disables it")
	fs.StringVar(&c.HealthzBindAddress, "healthz-bind-address", c.HealthzBindAddress, "listen address of the healthz server")
	fs.StringVar(&c.ContainerLogSymlinkDir, "container-log-symlink-dir", c.ContainerLogSymlinkDir, "directory of the containers' log symlinks, named as the kubelet names them (none: no links)")
	fs.StringVar(&c.ContainerLogMaxSize, "container-log-max-size", c.ContainerLogMaxSize, "`size` (a quantity: 10Mi) over which a running container's log is rotated")
	fs.IntVar(&c.ContainerLogMaxFiles, "container-log-max-files", c.ContainerLogMaxFiles, "most files a container's log spans, the live one included (at least 2)")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "log level: trace, debug, info, warn, error")
	fs.BoolVar(&c.LogJSON, "log-json", c.LogJSON, "write logs as JSON lines")
	fs.StringVar(&c.KubeConfig, "kubeconfig", c.KubeConfig, "kubeconfig with this node's credentials: join the cluster (API pod source, Node + Lease, pod status, mirror pods, events); empty runs standalone")
	fs.StringVar(&c.BootstrapKubeConfig, "bootstrap-kubeconfig", c.BootstrapKubeConfig, "kubeconfig with a bootstrap token: when --kubeconfig holds no valid client certificate, request one (CSR), store it in --cert-dir and write --kubeconfig pointing at it")
	fs.StringVar(&c.CertDir, "cert-dir", c.CertDir, "directory of the node's client and serving certificates (default <root-dir>/pki)")
	fs.Var(optional(&c.RotateCertificates, strconv.ParseBool, strconv.FormatBool), "rotate-certificates", "renew the client certificate through a CSR before it expires (default true with --bootstrap-kubeconfig)")
	fs.BoolVar(&c.ServerTLSBootstrap, "rotate-server-certificates", c.ServerTLSBootstrap, "request the kubelet API's serving certificate through a kubernetes.io/kubelet-serving CSR and renew it before it expires")
	fs.IntVar(&c.KubeAPIQPS, "kube-api-qps", c.KubeAPIQPS, "queries per second to the API server; with --kubeconfig")
	fs.IntVar(&c.KubeAPIBurst, "kube-api-burst", c.KubeAPIBurst, "burst of queries to the API server; with --kubeconfig")
	fs.DurationVar(&c.NodeStatusUpdateFrequency.Duration, "node-status-update-frequency", c.NodeStatusUpdateFrequency.Duration, "period of the node status computation (posted when changed); with --kubeconfig")
	fs.DurationVar(&c.NodeStatusReportFrequency.Duration, "node-status-report-frequency", c.NodeStatusReportFrequency.Duration, "period at which an unchanged node status is posted anyway; with --kubeconfig")
	fs.Var(&mapValue{m: &c.NodeLabels, sep: "="}, "node-labels", "labels the node registers with, `key=value,...` (kubernetes.io/ and k8s.io/ ones only in the kubelet's allowed set)")
	fs.Var(&taintsValue{t: &c.RegisterWithTaints}, "register-with-taints", "taints the node registers with, `key=value:Effect,...`")
	fs.Var(optional(&c.RegisterNode, strconv.ParseBool, strconv.FormatBool), "register-node", "create the Node object; false reports the status of a Node made by someone else; with --kubeconfig")
	fs.StringVar(&c.ProviderID, "provider-id", c.ProviderID, "the node's spec.providerID, the cloud provider's identity of the machine")
	fs.StringVar(&c.NodeIP, "node-ip", c.NodeIP, "the node's InternalIP, or an IPv4,IPv6 `pair` for a dual-stack node (0.0.0.0 or :: picks the host's first of that family)")
	fs.Var(&mapValue{m: &c.KubeReserved, sep: "="}, "kube-reserved", "resources kept from pods for the node agent, `cpu=100m,memory=500Mi,ephemeral-storage=1Gi,pid=1000`")
	fs.Var(&mapValue{m: &c.SystemReserved, sep: "="}, "system-reserved", "resources kept from pods for the system, `cpu=100m,memory=500Mi,...`")
	fs.Var(&mapValue{m: &c.EvictionHard, sep: "<"}, "eviction-hard", "hard eviction thresholds, `signal<quantity|percent,...`; memory.available and nodefs.available are kept from allocatable")
	fs.Var(&mapValue{m: &c.EvictionSoft, sep: "<"}, "eviction-soft", "soft eviction thresholds, `signal<quantity|percent,...`, acted on once held for their grace period")
	fs.Var(&mapValue{m: &c.EvictionSoftGracePeriod, sep: "="}, "eviction-soft-grace-period", "how long each soft eviction threshold must hold, `signal=duration,...`")
	fs.IntVar(&c.EvictionMaxPodGracePeriod, "eviction-max-pod-grace-period", c.EvictionMaxPodGracePeriod, "most `seconds` a pod evicted for a soft threshold is given to stop")
	fs.Var(&mapValue{m: &c.EvictionMinimumReclaim, sep: "="}, "eviction-minimum-reclaim", "how much beyond its threshold must be free before a pressure ends, `signal=quantity|percent,...`")
	fs.DurationVar(&c.EvictionPressureTransitionPeriod.Duration, "eviction-pressure-transition-period", c.EvictionPressureTransitionPeriod.Duration, "how long a pressure condition stays True after its threshold was last met")
	fs.BoolVar(&c.KernelMemcgNotification, "kernel-memcg-notification", c.KernelMemcgNotification, "have the kernel notify when memory.available crosses its threshold (cgroup v1 memcg threshold notification)")
	fs.Var(optional(&c.ImageGCHighThresholdPercent, parseInt32, formatInt32), "image-gc-high-threshold", "image filesystem usage `percent` at which image garbage collection runs (100 with no --image-maximum-gc-age: never)")
	fs.Var(optional(&c.ImageGCLowThresholdPercent, parseInt32, formatInt32), "image-gc-low-threshold", "image filesystem usage `percent` image garbage collection frees down to")
	fs.DurationVar(&c.ImageMinimumGCAge.Duration, "minimum-image-gc-age", c.ImageMinimumGCAge.Duration, "least age of an unused image before it may be garbage collected")
	fs.DurationVar(&c.ImageMaximumGCAge.Duration, "image-maximum-gc-age", c.ImageMaximumGCAge.Duration, "an image unused for this long is removed whatever the disk usage; 0 never")
	fs.DurationVar(&c.ImageGCPeriod.Duration, "image-gc-period", c.ImageGCPeriod.Duration, "period of image garbage collection")
	fs.StringVar(&c.SecureAddress, "secure-address", c.SecureAddress, "listen address of the kubelet API (default: all addresses)")
	fs.Var(optional(&c.Port, strconv.Atoi, strconv.Itoa), "port", "`port` of the kubelet API (TLS: /containerLogs, /healthz), served with --kubeconfig or --client-ca-file; 0 disables it")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", c.TLSCertFile, "the kubelet API's serving certificate (default: self-signed under <root-dir>/pki)")
	fs.StringVar(&c.TLSPrivateKeyFile, "tls-private-key-file", c.TLSPrivateKeyFile, "the key of --tls-cert-file")
	fs.StringVar(&c.Authentication.X509.ClientCAFile, "client-ca-file", c.Authentication.X509.ClientCAFile, "CA bundle that authenticates the kubelet API's clients by x509 certificate")
	fs.Var(optional(&c.Authentication.Anonymous.Enabled, strconv.ParseBool, strconv.FormatBool), "anonymous-auth", "let unauthenticated kubelet API requests through as system:anonymous")
	fs.StringVar((*string)(&c.Authorization.Mode), "authorization-mode", string(c.Authorization.Mode), "kubelet API authorization: Webhook (SubjectAccessReview; default with --kubeconfig) or AlwaysAllow (default standalone)")
}

// optionalValue is the flag.Value of a pointer field: Set points the field
// at the value parsed; String formats it, or the zero value while the field
// is nil.
type optionalValue[T any] struct {
	p      **T
	parse  func(string) (T, error)
	format func(T) string
}

func optional[T any](p **T, parse func(string) (T, error), format func(T) string) *optionalValue[T] {
	return &optionalValue[T]{p: p, parse: parse, format: format}
}

// String implements flag.Value.
func (o *optionalValue[T]) String() string {
	if o.p == nil || *o.p == nil {
		var zero T
		if o.format == nil {
			// The flag package's zero Value, against which the usage
			// leaves a zero default out.
			return fmt.Sprint(zero)
		}
		return o.format(zero)
	}
	return o.format(**o.p)
}

// Set implements flag.Value.
func (o *optionalValue[T]) Set(s string) error {
	v, err := o.parse(s)
	if err != nil {
		return err
	}
	*o.p = &v
	return nil
}

// IsBoolFlag lets a bool field's flag go without a value, as flag.BoolVar's.
func (o *optionalValue[T]) IsBoolFlag() bool {
	_, ok := any(*new(T)).(bool)
	return ok
}

func parseString(s string) (string, error) { return s, nil }

func formatString(s string) string { return s }

func parseDuration(s string) (metav1.Duration, error) {
	d, err := time.ParseDuration(s)
	return metav1.Duration{Duration: d}, err
}

// formatDuration formats d as time.Duration does ("1m0s"): the String of
// *metav1.Duration is its protobuf text.
func formatDuration(d metav1.Duration) string { return d.Duration.String() }

func parseInt32(s string) (int32, error) {
	v, err := strconv.ParseInt(s, 10, 32)
	return int32(v), err
}

func formatInt32(v int32) string { return strconv.FormatInt(int64(v), 10) }

// mapValue is the flag.Value of a map field given as key<sep>value pairs
// separated by commas (the kubelet's --node-labels, --kube-reserved with
// "=", --eviction-hard with "<"). A flag given replaces the map.
type mapValue struct {
	m   *map[string]string
	sep string
}

// String implements flag.Value: the pairs sorted by key.
func (v *mapValue) String() string {
	if v.m == nil || len(*v.m) == 0 {
		return ""
	}
	var pairs []string
	for _, k := range slices.Sorted(maps.Keys(*v.m)) {
		pairs = append(pairs, k+v.sep+(*v.m)[k])
	}
	return strings.Join(pairs, ",")
}

// Set implements flag.Value.
func (v *mapValue) Set(s string) error {
	m := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		k, val, ok := strings.Cut(pair, v.sep)
		if !ok {
			return fmt.Errorf("%q is not key%svalue", pair, v.sep)
		}
		m[strings.TrimSpace(k)] = strings.TrimSpace(val)
	}
	*v.m = m
	return nil
}

// taintsValue is the flag.Value of RegisterWithTaints:
// key=value:Effect or key:Effect, separated by commas.
type taintsValue struct{ t *[]v1.Taint }

// String implements flag.Value.
func (v *taintsValue) String() string {
	if v.t == nil {
		return ""
	}
	var out []string
	for _, t := range *v.t {
		out = append(out, t.ToString())
	}
	return strings.Join(out, ",")
}

// Set implements flag.Value; Validate checks the keys, values and effects.
func (v *taintsValue) Set(s string) error {
	var taints []v1.Taint
	for _, spec := range strings.Split(s, ",") {
		if spec = strings.TrimSpace(spec); spec == "" {
			continue
		}
		kv, effect, ok := strings.Cut(spec, ":")
		if !ok {
			return fmt.Errorf("taint %q: want key=value:Effect or key:Effect", spec)
		}
		k, val, _ := strings.Cut(kv, "=")
		taints = append(taints, v1.Taint{Key: k, Value: val, Effect: v1.TaintEffect(effect)})
	}
	*v.t = taints
	return nil
}
