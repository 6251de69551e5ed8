package main

import (
	"strings"
	"testing"
)

func TestCountRegistryRequests(t *testing.T) {
	log := `127.0.0.1 - - [29/Nov/2026:01:16:22 +0000] "GET /v2/ HTTP/2.0" 401 87 "" "wasmlet"
time="2026-11-29T01:16:22Z" level=info msg="response completed" http.request.method=GET
127.0.0.1 - - [29/Nov/2026:01:16:22 +0000] "HEAD /v2/bench/no-privileged/manifests/v1 HTTP/2.0" 200 0 "" "wasmlet"
127.0.0.1 - - [29/Nov/2026:01:16:23 +0000] "GET /v2/bench/no-privileged/blobs/sha256:ab HTTP/2.0" 200 9 "" "wasmlet"
127.0.0.1 - - [29/Nov/2026:01:16:23 +0000] "GET /debug/vars HTTP/1.1" 200 9 "" "curl"
`
	if got := CountRegistryRequests([]byte(log)); got != 3 {
		t.Errorf("CountRegistryRequests = %d, want 3 (the /v2/ access lines)", got)
	}
}

func TestConfig_check(t *testing.T) {
	ok := Config{Cluster: "c", Base: "b", Nodes: 5, PodsPerNode: 2, Rounds: 1, StartRate: 5, CreateRate: 20,
		Fleets: []string{KindWasmlet, KindKubemark}, PodModule: "idle.wasm", Kubemark: "kubemark"}
	for _, c := range []struct {
		name   string
		change func(c *Config)
		want   string
	}{
		{"valid", func(c *Config) {}, ""},
		{"no cluster", func(c *Config) { c.Cluster = "" }, "-cluster"},
		{"no nodes", func(c *Config) { c.Nodes = 0 }, "-nodes 0"},
		{"unknown fleet", func(c *Config) { c.Fleets = []string{"kubelet"} }, `unknown fleet "kubelet"`},
		{"wasmlet without a module", func(c *Config) { c.PodModule = "" }, "-pod-module"},
		{"kubemark without its binary", func(c *Config) { c.Kubemark = "" }, "-kubemark"},
		{"plugin without digest", func(c *Config) { c.Plugin = "p.yaml"; c.PluginName = "p" }, "-plugin needs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := ok
			c.change(&cfg)
			err := cfg.check()
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("check() = %v, want an error with %q", err, c.want)
			}
		})
	}
}

func TestBenchPod(t *testing.T) {
	p := benchPod("wasmlet-r1", KindWasmlet, 7)
	if p.Name != "wasmlet-r1-0007" || p.Labels[runLabel] != "wasmlet-r1" || p.Spec.NodeSelector[FleetLabel] != KindWasmlet {
		t.Errorf("pod %s labels %v nodeSelector %v", p.Name, p.Labels, p.Spec.NodeSelector)
	}
	tsc := p.Spec.TopologySpreadConstraints
	if len(tsc) != 1 || tsc[0].TopologyKey != "kubernetes.io/hostname" || tsc[0].LabelSelector.MatchLabels[runLabel] != "wasmlet-r1" {
		t.Errorf("topology spread %+v", tsc)
	}
}
