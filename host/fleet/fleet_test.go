package fleet

import (
	"bytes"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pluginsv1 "github.com/wasmlet/wasmlet/host/apis/plugins/v1alpha1"
)

func TestSummarize(t *testing.T) {
	node := func(name, pool string) v1.Node {
		return v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": pool}}}
	}
	sel := func(pool string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"pool": pool}}
	}
	plugins := []pluginsv1.WasmletPlugin{
		{ObjectMeta: metav1.ObjectMeta{Name: "policy", Generation: 3}, Spec: pluginsv1.WasmletPluginSpec{Image: "r.example/p:v2", NodeSelector: sel("edge")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "gpu-only"}, Spec: pluginsv1.WasmletPluginSpec{Image: "r.example/g:v1", NodeSelector: sel("gpu")}},
	}
	nodes := []v1.Node{node("a", "edge"), node("b", "edge"), node("c", "edge"), node("d", "core"), node("e", "edge")}
	turn := metav1.NewTime(time.Date(2026, 5, 1, 12, 3, 0, 0, time.UTC))
	report := func(node string, ps ...pluginsv1.PluginStatus) pluginsv1.WasmletNode {
		return pluginsv1.WasmletNode{ObjectMeta: metav1.ObjectMeta{Name: node}, Status: pluginsv1.WasmletNodeStatus{Plugins: ps}}
	}
	reports := []pluginsv1.WasmletNode{
		report("a", pluginsv1.PluginStatus{Name: "policy", Source: pluginsv1.SourceAPI, Digest: "sha256:2222", Enforced: true}),
		report("b", pluginsv1.PluginStatus{Name: "policy", Source: pluginsv1.SourceAPI, Digest: "sha256:1111", Enforced: true, Error: "verify r.example/p:v2: no signature"}),
		// A directory plugin of the same name is not the WasmletPlugin's.
		report("c", pluginsv1.PluginStatus{Name: "policy", Source: pluginsv1.SourceDirectory, Enforced: true}),
		// Enforces generation 2's digest and waits for its turn to take 3 up.
		report("e", pluginsv1.PluginStatus{Name: "policy", Source: pluginsv1.SourceAPI, Digest: "sha256:1111", Enforced: true, WaitingUntil: &turn}),
	}
	got := Summarize(plugins, nodes, reports)
	if len(got) != 2 || got[0].Name != "gpu-only" || got[0].Selected != 0 {
		t.Fatalf("Summarize = %+v", got)
	}
	p := got[1]
	if p.Selected != 4 || p.Digests["sha256:2222"] != 1 || p.Digests["sha256:1111"] != 2 || len(p.Pending) != 1 || p.Pending[0] != "c" ||
		len(p.Waiting) != 1 || p.Waiting[0] != "e" || !p.LastTurn.Equal(turn.Time) ||
		len(p.Errors) != 1 || !strings.HasPrefix(p.Errors[0], "b: verify") {
		t.Fatalf("policy = %+v", p)
	}
	var out bytes.Buffer
	Print(&out, got)
	for _, want := range []string{"gpu-only  r.example/g:v1", "matches no node", "4 node(s) selected", "2 node(s) enforce sha256:1111",
		"1 node(s) wait for their turn in the rollout spread, the last at 2026-05-01T12:03:00Z",
		"1 node(s) enforce no version: [c]", "error on b: verify r.example/p:v2: no signature"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
