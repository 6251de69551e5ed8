package pluginapi

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/wasmlet/wasmlet/abi"
	pluginsv1 "github.com/wasmlet/wasmlet/host/apis/plugins/v1alpha1"
	"github.com/wasmlet/wasmlet/host/internal/pluginhost"
	"github.com/wasmlet/wasmlet/internal/syncbuf"
)

func newClient(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	s := runtime.NewScheme()
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(s, map[schema.GroupVersionResource]string{
		pluginsv1.WasmletPlugins: "WasmletPluginList",
		pluginsv1.WasmletNodes:   "WasmletNodeList",
	}, objs...)
}

func unstr(t *testing.T, p *pluginsv1.WasmletPlugin) *unstructured.Unstructured {
	t.Helper()
	p.APIVersion, p.Kind = pluginsv1.SchemeGroupVersion.String(), "WasmletPlugin"
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func plugin(name, image string, sel map[string]string) *pluginsv1.WasmletPlugin {
	p := &pluginsv1.WasmletPlugin{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1}, Spec: pluginsv1.WasmletPluginSpec{Image: image}}
	if sel != nil {
		p.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: sel}
	}
	return p
}

// fixture is a Follower on a fake client whose Manager is a list of Infos
// the test sets.
type fixture struct {
	f      *Follower
	client *dynamicfake.FakeDynamicClient
	dir    string

	mu     sync.Mutex
	labels map[string]string
	infos  []pluginhost.Info
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	x := &fixture{client: newClient(objs...), dir: filepath.Join(t.TempDir(), "plugins-api"), labels: map[string]string{"pool": "edge"}}
	f, err := New(Config{
		Client: x.client, NodeName: "node-a", Dir: x.dir,
		Labels: func() (map[string]string, bool) {
			x.mu.Lock()
			defer x.mu.Unlock()
			return x.labels, x.labels != nil
		},
		Plugins: func() []pluginhost.Info {
			x.mu.Lock()
			defer x.mu.Unlock()
			return append([]pluginhost.Info(nil), x.infos...)
		},
		Recheck: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	x.f = f
	return x
}

func (x *fixture) files(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(x.dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// TestFollower_materialize: the plugins whose selector matches the node's
// labels are written as reference manifests (trusted root beside), the
// others are not; a plugin deleted or no longer matching is removed; one
// the node refuses keeps its previous manifest; no temporary file stays.
func TestFollower_materialize(t *testing.T) {
	x := newFixture(t)
	edge := plugin("edge-policy", "registry.example/p/policy:v1", map[string]string{"pool": "edge"})
	edge.Spec.Mode = abi.ModeMonitor
	edge.Spec.Config = map[string]string{"deny": "privileged"}
	edge.Spec.Verification = &pluginsv1.Verification{Keys: []string{"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"},
		Keyless: []abi.KeylessIdentity{{Issuer: "https://issuer.example", Subject: "ci@example.com"}}, TrustedRoot: `{"mediaType":"x"}`}
	every := plugin("everywhere", "registry.example/p/every@sha256:"+strings.Repeat("a", 64), nil)
	other := plugin("core-only", "registry.example/p/core:v1", map[string]string{"pool": "core"})
	expr := plugin("expr", "registry.example/p/expr:v1", nil)
	expr.Spec.NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: metav1.LabelSelectorOpIn, Values: []string{"edge", "core"}}}}
	all := []pluginsv1.WasmletPlugin{*edge, *every, *other, *expr}

	if !x.f.materialize(all, map[string]string{"pool": "edge"}) {
		t.Fatal("materialize reported no change on an empty directory")
	}
	want := []string{"edge-policy.plugin.yaml", "edge-policy.trusted_root.json", "everywhere.plugin.yaml", "expr.plugin.yaml"}
	if got := x.files(t); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("files %v, want %v", got, want)
	}
	b, _ := os.ReadFile(filepath.Join(x.dir, "edge-policy.plugin.yaml"))
	var m abi.Manifest
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		t.Fatalf("written manifest does not parse strictly: %v\n%s", err, b)
	}
	if err := m.Validate(); err != nil || !m.Reference() {
		t.Fatalf("written manifest: %v, reference %v\n%s", err, m.Reference(), b)
	}
	if m.Name != "edge-policy" || m.Image != edge.Spec.Image || m.Mode != abi.ModeMonitor || m.Config["deny"] != "privileged" ||
		m.Verification.TrustedRoot != "edge-policy.trusted_root.json" || len(m.Verification.Keys) != 1 || len(m.Verification.Keyless) != 1 {
		t.Fatalf("written manifest %+v", m)
	}
	if g := generation(x.dir, "edge-policy"); g != 1 {
		t.Fatalf("generation %d, want 1", g)
	}
	if x.f.materialize(all, map[string]string{"pool": "edge"}) {
		t.Fatal("materialize reported a change with nothing changed")
	}

	// The node moves to pool core: edge-policy goes, core-only comes.
	x.f.materialize(all, map[string]string{"pool": "core"})
	want = []string{"core-only.plugin.yaml", "everywhere.plugin.yaml", "expr.plugin.yaml"}
	if got := x.files(t); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("after relabel: files %v, want %v", got, want)
	}

	// A new generation the node refuses (monitor needs an admission-only
	// plugin — here an invalid failure policy stands in for any spec
	// error) keeps the manifest written before; the refusal names it.
	bad := *every
	bad.Generation = 2
	bad.Spec.FailurePolicy = "Sometimes"
	before, _ := os.ReadFile(filepath.Join(x.dir, "everywhere.plugin.yaml"))
	x.f.materialize([]pluginsv1.WasmletPlugin{*other, bad, *expr}, map[string]string{"pool": "core"})
	after, _ := os.ReadFile(filepath.Join(x.dir, "everywhere.plugin.yaml"))
	if string(before) != string(after) {
		t.Fatalf("refused generation rewrote the manifest:\n%s", after)
	}
	if why := x.f.refused["everywhere"]; !strings.Contains(why, "WasmletPlugin everywhere") || !strings.Contains(why, "failurePolicy") {
		t.Fatalf("refusal %q: want it to name the WasmletPlugin and the field", why)
	}

	// Deleted: removed.
	x.f.materialize([]pluginsv1.WasmletPlugin{*other}, map[string]string{"pool": "core"})
	if got := x.files(t); strings.Join(got, " ") != "core-only.plugin.yaml" {
		t.Fatalf("after deletes: files %v", got)
	}
}

// TestFollower_Run: through the informer, a WasmletPlugin created,
// changed and deleted in the API moves the directory; nothing is written
// while the node's labels are unknown.
func TestFollower_Run(t *testing.T) {
	x := newFixture(t)
	x.labels = nil
	changes := make(chan struct{}, 100)
	x.f.cfg.OnChange = func() { changes <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- x.f.Run(ctx) }()
	defer func() { cancel(); <-done }()

	res := x.client.Resource(pluginsv1.WasmletPlugins)
	p := plugin("policy", "registry.example/p/policy:v1", map[string]string{"pool": "edge"})
	if _, err := res.Create(ctx, unstr(t, p), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(x.dir, "policy.plugin.yaml")
	// Synced, labels unknown: a few rechecks write nothing.
	waitFor(t, "the informer to sync", func() bool { return x.f.informer.HasSynced() })
	waitFor(t, "a report", func() bool { return len(reportPatches(x.client)) > 0 })
	if _, err := os.Stat(path); err == nil {
		t.Fatal("manifest written while the node's labels were unknown")
	}
	x.mu.Lock()
	x.labels = map[string]string{"pool": "edge"}
	x.mu.Unlock()
	waitFor(t, "the manifest", func() bool { _, err := os.Stat(path); return err == nil })
	// OnChange follows the write: wait for it rather than read the
	// channel the instant the file appears.
	waitFor(t, "OnChange after the manifest was written", func() bool { return len(changes) > 0 })
	p.Spec.Image = "registry.example/p/policy:v2"
	p.Generation = 2
	if _, err := res.Update(ctx, unstr(t, p), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the manifest to name v2", func() bool {
		b, _ := os.ReadFile(path)
		return strings.Contains(string(b), "policy:v2")
	})
	if err := res.Delete(ctx, "policy", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the manifest to go", func() bool { _, err := os.Stat(path); return os.IsNotExist(err) })
}

// TestFollower_report: the WasmletNode is created once and its status
// patched only when the report changes; entries name their source, the
// WasmletPlugin's generation and errors (a refused new version, a
// WasmletPlugin refused before it reached the directory).
func TestFollower_report(t *testing.T) {
	x := newFixture(t)
	ctx := context.Background()
	x.f.materialize([]pluginsv1.WasmletPlugin{*plugin("policy", "registry.example/p/policy:v1", nil)}, nil)
	x.infos = []pluginhost.Info{
		{Path: filepath.Join(x.dir, "policy.plugin.yaml"), State: pluginhost.StateLoaded, Name: "policy", Version: "1.0.0",
			Mode: abi.ModeEnforce, Image: "registry.example/p/policy:v1", Digest: "sha256:1111"},
		{Path: "/etc/wasmlet/plugins/local.plugin.yaml", State: pluginhost.StateLoaded, Name: "local", Version: "0.1", Mode: abi.ModeEnforce},
	}
	for i := 0; i < 3; i++ {
		if err := x.f.report(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := countActions(x.client, "create"); n != 1 {
		t.Fatalf("%d creates, want 1", n)
	}
	if n := len(reportPatches(x.client)); n != 1 {
		t.Fatalf("%d status patches for one report, want 1", n)
	}
	st := getStatus(t, x)
	if st.Enforced != 2 || len(st.Plugins) != 2 || st.UpdateTime == nil {
		t.Fatalf("status %+v", st)
	}
	if a := st.Plugins[1]; a.Name != "policy" || a.Source != pluginsv1.SourceAPI || a.Digest != "sha256:1111" || a.ObservedGeneration != 1 || !a.Enforced {
		t.Fatalf("api entry %+v", a)
	}
	if d := st.Plugins[0]; d.Name != "local" || d.Source != pluginsv1.SourceDirectory {
		t.Fatalf("directory entry %+v", d)
	}

	// A refused new version: the old one still enforced, the error shown.
	x.mu.Lock()
	x.infos[0].Error = `plugin "policy": verify registry.example/p/policy:v2: no signature`
	x.mu.Unlock()
	x.f.mu.Lock()
	x.f.refused["ghost"] = "WasmletPlugin ghost: spec.nodeSelector: bad"
	x.f.mu.Unlock()
	if err := x.f.report(ctx); err != nil {
		t.Fatal(err)
	}
	if err := x.f.report(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(reportPatches(x.client)); n != 2 {
		t.Fatalf("%d status patches after one change, want 2", n)
	}
	st = getStatus(t, x)
	if len(st.Plugins) != 3 || st.Plugins[0].Name != "ghost" || st.Plugins[0].Enforced || !strings.Contains(st.Plugins[2].Error, "no signature") || !st.Plugins[2].Enforced {
		t.Fatalf("status after refusals %+v", st.Plugins)
	}

	// Everything gone: the list is emptied, not left as it was.
	x.mu.Lock()
	x.infos = nil
	x.mu.Unlock()
	x.f.mu.Lock()
	x.f.refused = map[string]string{}
	x.f.mu.Unlock()
	if err := x.f.report(ctx); err != nil {
		t.Fatal(err)
	}
	if st = getStatus(t, x); len(st.Plugins) != 0 || st.Enforced != 0 {
		t.Fatalf("status after all went: %+v", st)
	}
}

// A Follower started against an existing, up-to-date WasmletNode (an
// agent restart) writes nothing.
func TestFollower_report_restart(t *testing.T) {
	x := newFixture(t)
	x.infos = []pluginhost.Info{{Path: "/etc/wasmlet/plugins/local.plugin.yaml", State: pluginhost.StateLoaded, Name: "local", Version: "0.1"}}
	if err := x.f.report(context.Background()); err != nil {
		t.Fatal(err)
	}
	obj, err := x.client.Resource(pluginsv1.WasmletNodes).Get(context.Background(), "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	y := newFixture(t, obj)
	y.infos = x.infos
	if err := y.f.report(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := countActions(y.client, "create") + len(reportPatches(y.client)); n != 0 {
		t.Fatalf("restart against an up-to-date report wrote %d times", n)
	}
}

func getStatus(t *testing.T, x *fixture) pluginsv1.WasmletNodeStatus {
	t.Helper()
	u, err := x.client.Resource(pluginsv1.WasmletNodes).Get(context.Background(), "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var n pluginsv1.WasmletNode
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &n); err != nil {
		t.Fatal(err)
	}
	return n.Status
}

func countActions(c *dynamicfake.FakeDynamicClient, verb string) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == verb && a.GetResource() == pluginsv1.WasmletNodes {
			n++
		}
	}
	return n
}

func reportPatches(c *dynamicfake.FakeDynamicClient) []k8stesting.Action {
	var out []k8stesting.Action
	for _, a := range c.Actions() {
		if a.GetVerb() == "patch" && a.GetResource() == pluginsv1.WasmletNodes && a.GetSubresource() == "status" {
			out = append(out, a)
		}
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFollower_Run_noCRDs: in a cluster without the CRDs the informer's
// list fails; the follower logs it, tries again (client-go's back-off) and
// writes nothing into the directory, and once the resource answers it
// syncs.
func TestFollower_Run_noCRDs(t *testing.T) {
	x := newFixture(t)
	var logs syncbuf.Buffer
	x.f.cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})
	var mu sync.Mutex
	lists, missing := 0, true
	x.client.PrependReactor("list", "wasmletplugins", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		lists++
		if missing {
			return true, nil, apierrors.NewNotFound(pluginsv1.WasmletPlugins.GroupResource(), "")
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- x.f.Run(ctx) }()
	defer func() { cancel(); <-done }()

	waitFor(t, "two failed lists", func() bool { mu.Lock(); defer mu.Unlock(); return lists >= 2 })
	if got := logs.String(); !strings.Contains(got, "WasmletPlugins cannot be listed or watched") || !strings.Contains(got, "not found") {
		t.Fatalf("log after failed lists:\n%s\nwant the list error named", got)
	}
	if x.f.informer.HasSynced() {
		t.Fatal("the informer synced while the resource was missing")
	}
	if ents, _ := os.ReadDir(x.dir); len(ents) != 0 {
		t.Fatalf("the directory holds %d files while nothing was listed", len(ents))
	}
	mu.Lock()
	missing = false
	mu.Unlock()
	waitFor(t, "the informer to sync once the resource answers", func() bool { return x.f.informer.HasSynced() })
}
