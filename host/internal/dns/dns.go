// Package dns makes a pod's resolver configuration, the CRI DNSConfig of
// its sandbox, as the kubelet's pkg/kubelet/network/dns does: by the pod's
// dnsPolicy, the cluster DNS servers and domain (--cluster-dns,
// --cluster-domain) and the host's resolv.conf (--resolv-conf), merged
// with the pod's own dnsConfig and cut to the resolver's limits.
package dns

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The resolver's limits the kubelet keeps (API validation's).
const (
	maxNameservers    = 3
	maxSearchPaths    = 32
	maxSearchChars    = 2048
	maxSearchLength   = 253
	maxResolvConfSize = 10 << 20
)

// Config is the node's DNS settings.
type Config struct {
	// ClusterDNS are the cluster DNS servers' IPs; without them a
	// ClusterFirst pod falls back to the Default policy, as under the
	// kubelet.
	ClusterDNS []string
	// ClusterDomain is the cluster's domain (cluster.local).
	ClusterDomain string
	// ResolvConf is the host resolver file the Default policy copies;
	// empty gives pods a resolver of 127.0.0.1 and no search, as the
	// kubelet's --resolv-conf="".
	ResolvConf string
}

// Configurer answers pods' DNS configs.
type Configurer struct {
	cfg Config

	mu      sync.Mutex
	host    *runtimeapi.DNSConfig // ResolvConf as last read
	hostMod time.Time             // its modification time then
	hostLen int64                 // and its size
}

// New returns a Configurer.
func New(cfg Config) *Configurer { return &Configurer{cfg: cfg} }

// hostConfig is a copy of the host's resolver config, read again only
// when the file changed (every sandbox asks; a burst of pods reads it
// once).
func (c *Configurer) hostConfig() (*runtimeapi.DNSConfig, error) {
	fi, err := os.Stat(c.cfg.ResolvConf)
	if err != nil {
		return nil, fmt.Errorf("dns: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.host == nil || !fi.ModTime().Equal(c.hostMod) || fi.Size() != c.hostLen {
		h, err := readResolvConf(c.cfg.ResolvConf)
		if err != nil {
			return nil, err
		}
		c.host, c.hostMod, c.hostLen = h, fi.ModTime(), fi.Size()
	}
	return &runtimeapi.DNSConfig{
		Servers:  slices.Clone(c.host.Servers),
		Searches: slices.Clone(c.host.Searches),
		Options:  slices.Clone(c.host.Options),
	}, nil
}

// ForPod is the pod's DNS config. warning is set when the result was cut
// to the resolver's limits or ClusterFirst fell back for want of cluster
// DNS servers (the kubelet's DNSConfigForming and MissingClusterDNS
// events); err when the host's resolv.conf cannot be read.
func (c *Configurer) ForPod(pod *v1.Pod) (cfg *runtimeapi.DNSConfig, warning string, err error) {
	cfg = &runtimeapi.DNSConfig{}
	if c.cfg.ResolvConf != "" {
		if cfg, err = c.hostConfig(); err != nil {
			return nil, "", err
		}
	}
	var warnings []string
	switch policy(pod) {
	case v1.DNSNone:
		cfg = &runtimeapi.DNSConfig{}
	case v1.DNSClusterFirst:
		if len(c.cfg.ClusterDNS) > 0 {
			cfg.Servers = append([]string(nil), c.cfg.ClusterDNS...)
			if d := c.cfg.ClusterDomain; d != "" {
				cfg.Searches = unique(append([]string{pod.Namespace + ".svc." + d, "svc." + d, d}, cfg.Searches...))
			}
			cfg.Options = []string{"ndots:5"}
			break
		}
		warnings = append(warnings, fmt.Sprintf("the node has no cluster DNS server and cannot create a pod using %q policy; falling back to %q policy", v1.DNSClusterFirst, v1.DNSDefault))
		fallthrough
	case v1.DNSDefault:
		if c.cfg.ResolvConf == "" {
			cfg.Servers, cfg.Searches = []string{"127.0.0.1"}, []string{"."}
		}
	}
	if d := pod.Spec.DNSConfig; d != nil {
		cfg.Servers = unique(append(cfg.Servers, d.Nameservers...))
		cfg.Searches = unique(append(cfg.Searches, d.Searches...))
		cfg.Options = mergeOptions(cfg.Options, d.Options)
	}
	if len(cfg.Servers) > maxNameservers {
		cfg.Servers = cfg.Servers[:maxNameservers]
		warnings = append(warnings, "nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: "+strings.Join(cfg.Servers, " "))
	}
	var cut bool
	if cfg.Searches, cut = fitSearch(cfg.Searches); cut {
		warnings = append(warnings, "search line limits were exceeded, some search paths have been omitted, the applied search line is: "+strings.Join(cfg.Searches, " "))
	}
	return cfg, strings.Join(warnings, "; "), nil
}

// policy is the effective policy: ClusterFirst (with or without host
// network), Default (also ClusterFirst on the host network) or None.
func policy(pod *v1.Pod) v1.DNSPolicy {
	switch pod.Spec.DNSPolicy {
	case v1.DNSNone:
		return v1.DNSNone
	case v1.DNSDefault:
		return v1.DNSDefault
	case v1.DNSClusterFirstWithHostNet:
		return v1.DNSClusterFirst
	case v1.DNSClusterFirst, "":
		if pod.Spec.HostNetwork {
			return v1.DNSDefault
		}
	}
	return v1.DNSClusterFirst
}

// fitSearch drops search paths past the resolver's limits: more than 32,
// longer than 253 characters, or a line longer than 2048.
func fitSearch(s []string) ([]string, bool) {
	cut := false
	if len(s) > maxSearchPaths {
		s, cut = s[:maxSearchPaths], true
	}
	out := s[:0:0]
	for _, p := range s {
		if len(p) > maxSearchLength {
			cut = true
			continue
		}
		out = append(out, p)
	}
	for len(out) > 0 && len(strings.Join(out, " ")) > maxSearchChars {
		out, cut = out[:len(out)-1], true
	}
	return out, cut
}

// readResolvConf reads nameservers (accumulating), the last search line
// and options (a later one overriding an earlier of the same name).
func readResolvConf(path string) (*runtimeapi.DNSConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dns: %w", err)
	}
	defer f.Close()
	cfg := &runtimeapi.DNSConfig{Servers: []string{}, Searches: []string{}, Options: []string{}}
	sc := bufio.NewScanner(io.LimitReader(f, maxResolvConfSize))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") || strings.HasPrefix(fields[0], ";") {
			continue
		}
		switch fields[0] {
		case "nameserver":
			if len(fields) < 2 {
				return nil, fmt.Errorf("dns: %s: a nameserver line without an address", path)
			}
			cfg.Servers = append(cfg.Servers, fields[1])
		case "search":
			cfg.Searches = []string{}
			for _, s := range fields[1:] {
				if s != "." {
					cfg.Searches = append(cfg.Searches, strings.TrimSuffix(s, "."))
				}
			}
		case "options":
			cfg.Options = mergeOptions(cfg.Options, toOptions(fields[1:]))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("dns: %s: %w", path, err)
	}
	return cfg, nil
}

func toOptions(words []string) []v1.PodDNSConfigOption {
	out := make([]v1.PodDNSConfigOption, 0, len(words))
	for _, w := range words {
		name, value, ok := strings.Cut(w, ":")
		o := v1.PodDNSConfigOption{Name: name}
		if ok {
			o.Value = &value
		}
		out = append(out, o)
	}
	return out
}

// mergeOptions overrides options by name, keeping the first position of
// each name (the kubelet's order is a map's; a stable one is kept here).
func mergeOptions(have []string, add []v1.PodDNSConfigOption) []string {
	var names []string
	values := map[string]string{}
	set := func(name, value string) {
		if _, ok := values[name]; !ok {
			names = append(names, name)
		}
		values[name] = value
	}
	for _, o := range have {
		name, value, _ := strings.Cut(o, ":")
		set(name, value)
	}
	for _, o := range add {
		v := ""
		if o.Value != nil {
			v = *o.Value
		}
		set(o.Name, v)
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		if v := values[n]; v != "" {
			out = append(out, n+":"+v)
		} else {
			out = append(out, n)
		}
	}
	return out
}

func unique(s []string) []string {
	out := make([]string, 0, len(s))
	for _, x := range s {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
