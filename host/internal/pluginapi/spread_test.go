package pluginapi

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"

	pluginsv1 "github.com/wasmlet/wasmlet/host/apis/plugins/v1alpha1"
	"github.com/wasmlet/wasmlet/host/internal/pluginhost"
	"github.com/wasmlet/wasmlet/internal/syncbuf"
)

// TestDelay: a node's turn is fixed by its and the plugin's names, falls
// inside the window, and a fleet's turns cover the window.
func TestDelay(t *testing.T) {
	const spread = 10 * time.Minute
	if d := Delay("node-a", "policy", 0); d != 0 {
		t.Fatalf("no spread: delay %s", d)
	}
	if Delay("node-a", "policy", spread) != Delay("node-a", "policy", spread) {
		t.Fatal("the same node and plugin got two delays")
	}
	if Delay("node-a", "policy", spread) == Delay("node-a", "other", spread) &&
		Delay("node-b", "policy", spread) == Delay("node-b", "other", spread) {
		t.Fatal("two plugins share every node's turn")
	}
	var tenths [10]int
	for i := 0; i < 1000; i++ {
		d := Delay(fmt.Sprintf("node-%03d", i), "policy", spread)
		if d < 0 || d >= spread {
			t.Fatalf("node-%03d: delay %s outside [0, %s)", i, d, spread)
		}
		tenths[d*10/spread]++
	}
	for i, n := range tenths {
		// 100 expected in each; a hash this skewed would pace nothing.
		if n < 50 || n > 150 {
			t.Fatalf("tenth %d of the window holds %d of 1000 nodes: %v", i, n, tenths)
		}
	}
}

// TestFollower_materialize_spread: with spec.rollout.spread, a node
// already running takes a change up at its turn and enforces the previous
// manifest meanwhile (its report says until when); a change made while it
// waits keeps the first one's turn; a plugin new to the node waits too;
// a node's first pass, a removal and a plugin without a spread act at once;
// a negative spread is refused naming the field.
func TestFollower_materialize_spread(t *testing.T) {
	x := newFixture(t)
	logs := &syncbuf.Buffer{}
	x.f.cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: logs})
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	x.f.cfg.Now = func() time.Time { return now }
	const spread = 10 * time.Minute
	delay := Delay("node-a", "policy", spread)
	if delay < 2*time.Second {
		t.Fatalf("the test needs node-a's turn past the window's first seconds, got %s", delay)
	}
	path := filepath.Join(x.dir, "policy.plugin.yaml")
	read := func() string { b, _ := os.ReadFile(path); return string(b) }
	gen := func(g int64, tag string) *pluginsv1.WasmletPlugin {
		p := plugin("policy", "registry.example/p/policy:"+tag, nil)
		p.Generation = g
		p.Spec.Rollout = &pluginsv1.Rollout{Spread: metav1.Duration{Duration: spread}}
		return p
	}
	status := func(name string) pluginsv1.PluginStatus {
		for _, ps := range x.f.Status().Plugins {
			if ps.Name == name && ps.Source == pluginsv1.SourceAPI {
				return ps
			}
		}
		return pluginsv1.PluginStatus{}
	}
	setInfos := func() {
		// The Manager lists what is in the directory.
		x.mu.Lock()
		defer x.mu.Unlock()
		x.infos = nil
		for _, name := range x.files(t) {
			if strings.HasSuffix(name, ".plugin.yaml") {
				x.infos = append(x.infos, infoFor(filepath.Join(x.dir, name)))
			}
		}
	}

	// The first pass (the node has just started): at once.
	if !x.f.materialize([]pluginsv1.WasmletPlugin{*gen(1, "v1")}, nil) || !strings.Contains(read(), "policy:v1") {
		t.Fatalf("first pass: manifest %q, want v1 written at once", read())
	}
	setInfos()

	// A change: the node keeps v1 until its turn.
	changed := now
	if x.f.materialize([]pluginsv1.WasmletPlugin{*gen(2, "v2")}, nil) {
		t.Fatal("a change before the node's turn changed the directory")
	}
	if !strings.Contains(read(), "policy:v1") {
		t.Fatalf("before the turn: manifest %q, want v1 kept", read())
	}
	ps := status("policy")
	if ps.WaitingUntil == nil || ps.WaitingUntil.Time.Before(changed.Add(delay)) || ps.WaitingUntil.Time.After(changed.Add(delay+time.Second)) {
		t.Fatalf("report while waiting: %+v, want waitingUntil at %s", ps, changed.Add(delay))
	}
	if ps.ObservedGeneration != 1 {
		t.Fatalf("report while waiting: observedGeneration %d, want 1 (v1 still enforced)", ps.ObservedGeneration)
	}
	if !strings.Contains(logs.String(), "waits for this node's turn") || !strings.Contains(logs.String(), "wasmletplugin=policy") {
		t.Fatalf("log does not say the change waits:\n%s", logs.String())
	}

	// Another change a second before the turn: the turn stays.
	now = changed.Add(delay - time.Second)
	x.f.materialize([]pluginsv1.WasmletPlugin{*gen(3, "v3")}, nil)
	if !strings.Contains(read(), "policy:v1") {
		t.Fatalf("a second before the turn: manifest %q, want v1 kept", read())
	}
	now = changed.Add(delay)
	if !x.f.materialize([]pluginsv1.WasmletPlugin{*gen(3, "v3")}, nil) || !strings.Contains(read(), "policy:v3") {
		t.Fatalf("at the turn: manifest %q, want v3", read())
	}
	setInfos()
	if ps := status("policy"); ps.WaitingUntil != nil || ps.ObservedGeneration != 3 {
		t.Fatalf("report after the turn: %+v", ps)
	}

	// The next change counts from when it is seen, not from the last one.
	now = now.Add(time.Hour)
	x.f.materialize([]pluginsv1.WasmletPlugin{*gen(4, "v4")}, nil)
	if !strings.Contains(read(), "policy:v3") {
		t.Fatalf("a new change: manifest %q, want v3 kept until the turn", read())
	}

	// A plugin new to the node waits for its own turn, reported as such;
	// one without a spread is written at once.
	fresh := plugin("fresh", "registry.example/p/fresh:v1", nil)
	fresh.Spec.Rollout = &pluginsv1.Rollout{Spread: metav1.Duration{Duration: spread}}
	plain := plugin("plain", "registry.example/p/plain:v1", nil)
	x.f.materialize([]pluginsv1.WasmletPlugin{*fresh, *gen(4, "v4"), *plain}, nil)
	if got := strings.Join(x.files(t), " "); got != "plain.plugin.yaml policy.plugin.yaml" {
		t.Fatalf("files %s, want plain written and fresh waiting", got)
	}
	setInfos()
	if ps := status("fresh"); ps.WaitingUntil == nil || ps.Enforced {
		t.Fatalf("report of a plugin waiting to come: %+v", ps)
	}

	// Removed while waiting: gone at once, and nothing waits any more.
	x.f.materialize([]pluginsv1.WasmletPlugin{*plain}, nil)
	if got := strings.Join(x.files(t), " "); got != "plain.plugin.yaml" {
		t.Fatalf("after removal: files %s", got)
	}
	setInfos()
	if len(x.f.pending) != 0 || status("fresh").Name != "" || status("policy").Name != "" {
		t.Fatalf("after removal: pending %v, report %+v", x.f.pending, x.f.Status().Plugins)
	}

	// A negative spread is refused, naming the field.
	bad := plugin("bad", "registry.example/p/bad:v1", nil)
	bad.Spec.Rollout = &pluginsv1.Rollout{Spread: metav1.Duration{Duration: -time.Second}}
	x.f.materialize([]pluginsv1.WasmletPlugin{*plain, *bad}, nil)
	if why := x.f.refused["bad"]; !strings.Contains(why, "spec.rollout.spread") {
		t.Fatalf("refusal %q: want it to name spec.rollout.spread", why)
	}
}

// TestFollower_Run_spread: Run wakes at the node's turn by itself and
// reports the wait before it, then the new generation.
func TestFollower_Run_spread(t *testing.T) {
	x := newFixture(t)
	// The turn falls inside a short window; the recheck is long, so only
	// the turn's own wake-up can take the change up in time.
	x.f.cfg.Recheck = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- x.f.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// A plugin name whose turn in a 2 s spread is neither at once nor at
	// the window's end.
	const spread = 2 * time.Second
	name := ""
	for i := 0; name == ""; i++ {
		if d := Delay("node-a", fmt.Sprintf("policy-%d", i), spread); d > 500*time.Millisecond && d < 1900*time.Millisecond {
			name = fmt.Sprintf("policy-%d", i)
		}
	}
	res := x.client.Resource(pluginsv1.WasmletPlugins)
	p := plugin(name, "registry.example/p/policy:v1", nil)
	p.Spec.Rollout = &pluginsv1.Rollout{Spread: metav1.Duration{Duration: spread}}
	if _, err := res.Create(ctx, unstr(t, p), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(x.dir, name+".plugin.yaml")
	waitFor(t, "the first manifest", func() bool { b, _ := os.ReadFile(path); return strings.Contains(string(b), "policy:v1") })
	x.mu.Lock()
	x.infos = []pluginhost.Info{infoFor(path)}
	x.mu.Unlock()
	p.Spec.Image, p.Generation = "registry.example/p/policy:v2", 2
	if _, err := res.Update(ctx, unstr(t, p), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the manifest to name v2 at the node's turn", func() bool {
		b, _ := os.ReadFile(path)
		return strings.Contains(string(b), "policy:v2")
	})
	waited := false
	for _, a := range reportPatches(x.client) {
		if pa, ok := a.(k8stesting.PatchAction); ok && strings.Contains(string(pa.GetPatch()), "waitingUntil") {
			waited = true
		}
	}
	if !waited {
		t.Fatal("no report said the change waited for the node's turn")
	}
}

// infoFor is the Manager's entry of a loaded plugin file.
func infoFor(path string) pluginhost.Info {
	return pluginhost.Info{Path: path, State: pluginhost.StateLoaded, Name: stem(path), Version: "1.0.0"}
}
