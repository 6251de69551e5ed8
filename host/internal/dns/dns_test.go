package dns

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func resolvConf(t *testing.T, text string) string {
	p := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func pod(policy v1.DNSPolicy, hostNet bool) *v1.Pod {
	p := &v1.Pod{}
	p.Namespace = "ns1"
	p.Spec.DNSPolicy, p.Spec.HostNetwork = policy, hostNet
	return p
}

func TestForPod(t *testing.T) {
	host := resolvConf(t, "# comment\nnameserver 10.0.0.2\nsearch old.example\nsearch example.com. .\noptions ndots:2 edns0\noptions ndots:3\nnameserver 10.0.0.3\n")
	cluster := New(Config{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", ResolvConf: host})
	standalone := New(Config{ClusterDomain: "cluster.local", ResolvConf: host})
	one := "1"
	for _, tc := range []struct {
		name                      string
		c                         *Configurer
		pod                       *v1.Pod
		servers, searches, option string
		warn                      bool
	}{
		{"cluster first", cluster, pod(v1.DNSClusterFirst, false), "10.96.0.10", "ns1.svc.cluster.local svc.cluster.local cluster.local example.com", "ndots:5", false},
		{"cluster first on the host network is Default", cluster, pod(v1.DNSClusterFirst, true), "10.0.0.2 10.0.0.3", "example.com", "ndots:3 edns0", false},
		{"with host net", cluster, pod(v1.DNSClusterFirstWithHostNet, true), "10.96.0.10", "ns1.svc.cluster.local svc.cluster.local cluster.local example.com", "ndots:5", false},
		{"default", cluster, pod(v1.DNSDefault, false), "10.0.0.2 10.0.0.3", "example.com", "ndots:3 edns0", false},
		{"no cluster DNS falls back", standalone, pod(v1.DNSClusterFirst, false), "10.0.0.2 10.0.0.3", "example.com", "ndots:3 edns0", true},
		{"no resolv.conf", New(Config{}), pod(v1.DNSDefault, false), "127.0.0.1", ".", "", false},
		{"none with the pod's config", cluster, func() *v1.Pod {
			p := pod(v1.DNSNone, false)
			p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.example"}, Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: &one}}}
			return p
		}(), "1.1.1.1", "a.example", "ndots:1", false},
		{"the pod's config merged, limits kept", cluster, func() *v1.Pod {
			p := pod(v1.DNSClusterFirst, false)
			p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "2.2.2.2", "3.3.3.3"}, Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: &one}, {Name: "rotate"}}}
			return p
		}(), "10.96.0.10 1.1.1.1 2.2.2.2", "ns1.svc.cluster.local svc.cluster.local cluster.local example.com", "ndots:1 rotate", true},
	} {
		cfg, warn, err := tc.c.ForPod(tc.pod)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := strings.Join(cfg.Servers, " "); got != tc.servers {
			t.Errorf("%s: servers %q, want %q", tc.name, got, tc.servers)
		}
		if got := strings.Join(cfg.Searches, " "); got != tc.searches {
			t.Errorf("%s: searches %q, want %q", tc.name, got, tc.searches)
		}
		if got := strings.Join(cfg.Options, " "); got != tc.option {
			t.Errorf("%s: options %q, want %q", tc.name, got, tc.option)
		}
		if (warn != "") != tc.warn {
			t.Errorf("%s: warning %q, want one: %v", tc.name, warn, tc.warn)
		}
	}
	if _, _, err := New(Config{ResolvConf: "/does/not/exist"}).ForPod(pod(v1.DNSDefault, false)); err == nil {
		t.Error("missing resolv.conf: no error")
	}
}

func TestFitSearch(t *testing.T) {
	var many []string
	for i := 0; i < 40; i++ {
		many = append(many, strings.Repeat("x", 60)+string(rune('a'+i%26)))
	}
	got, cut := fitSearch(append([]string{strings.Repeat("y", 300)}, many...))
	if !cut || len(got) > maxSearchPaths || len(strings.Join(got, " ")) > maxSearchChars || slices.Contains(got, strings.Repeat("y", 300)) {
		t.Errorf("fitSearch: %d paths, %d chars, cut %v", len(got), len(strings.Join(got, " ")), cut)
	}
	if got, cut := fitSearch([]string{"a", "b"}); cut || len(got) != 2 {
		t.Errorf("fitSearch of a short list: %v %v", got, cut)
	}
}

// The host's resolv.conf is read once while unchanged, each pod gets its
// own copy, and a changed file is read again.
func TestForPod_hostFileCached(t *testing.T) {
	host := resolvConf(t, "nameserver 10.0.0.2\nsearch a.example\n")
	c := New(Config{ResolvConf: host})
	first, _, err := c.ForPod(pod(v1.DNSDefault, false))
	if err != nil {
		t.Fatal(err)
	}
	first.Servers[0], first.Searches[0] = "mutated", "mutated"
	second, _, _ := c.ForPod(pod(v1.DNSDefault, false))
	if second.Servers[0] != "10.0.0.2" || second.Searches[0] != "a.example" {
		t.Errorf("a pod's config changed the next one's: %v %v", second.Servers, second.Searches)
	}
	if err := os.WriteFile(host, []byte("nameserver 10.9.9.9\nnameserver 10.9.9.8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	third, _, _ := c.ForPod(pod(v1.DNSDefault, false))
	if strings.Join(third.Servers, " ") != "10.9.9.9 10.9.9.8" {
		t.Errorf("changed resolv.conf not read again: %v", third.Servers)
	}
}
