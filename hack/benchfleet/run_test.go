package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
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
	if len(tsc) != 1 || tsc[0].TopologyKey != "kubernetes.io/hostname" || tsc[0].LabelSelector.MatchLabels[runLabel] != "wasmlet-r1" ||
		tsc[0].NodeTaintsPolicy == nil || *tsc[0].NodeTaintsPolicy != v1.NodeInclusionPolicyHonor {
		t.Errorf("topology spread %+v", tsc)
	}
}

// TestCreateDeletePods: the pods are created and deleted one by one
// through the API, each create's time recorded; a pod already gone is no
// error, a refused delete is, naming the pod.
func TestCreateDeletePods(t *testing.T) {
	client := fake.NewSimpleClientset()
	b := &bench{cfg: &Config{CreateRate: 1000}, client: client}
	ctx := context.Background()
	sent, err := b.createPods(ctx, "wasmlet-r1", KindWasmlet, 12)
	if err != nil || len(sent) != 12 {
		t.Fatalf("createPods: %d sent, %v", len(sent), err)
	}
	l, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if len(l.Items) != 12 {
		t.Fatalf("%d pods in the API, want 12", len(l.Items))
	}
	for _, p := range l.Items {
		if _, ok := sent[p.Name]; !ok {
			t.Errorf("pod %s has no create time", p.Name)
		}
	}
	// One pod gone already: not an error.
	if err := client.CoreV1().Pods("default").Delete(ctx, l.Items[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := b.deletePods(ctx, sent); err != nil {
		t.Fatalf("deletePods: %v", err)
	}
	if l, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); len(l.Items) != 0 {
		t.Fatalf("%d pods left", len(l.Items))
	}
	client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("refused")
	})
	if err := b.deletePods(ctx, map[string]time.Time{"p-1": {}}); err == nil || !strings.Contains(err.Error(), "pod p-1: refused") {
		t.Fatalf("a refused delete: %v", err)
	}
}
