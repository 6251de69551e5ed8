package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/internal/metrictest"
)

// TestAgent_Plugins runs the agent with a plugin directory: pluginhost's
// ok.wasm as an admission plugin (it denies requests containing "!") and as
// a hook, and before them two admission plugins in monitor mode, ok.wasm
// and trap.wasm under failurePolicy Fail. A pod whose image has a "!" is
// rejected naming the enforcing plugin (the monitoring one's denial is
// counted and does not stop the chain), the other runs (the monitoring
// plugin's failure does not block it), the hook is called, /plugins lists
// all four.
func TestAgent_Plugins(t *testing.T) {
	h := newHarness(t)
	plugins := filepath.Join(h.dir, "plugins")
	writePlugin(t, plugins, "bang", "ok.wasm", "kinds: [admission]\n")
	writePlugin(t, plugins, "env", "ok.wasm", "kinds: [hook]\n")
	writePlugin(t, plugins, "watch", "ok.wasm", "kinds: [admission]\nmode: monitor\norder: -1\n")
	writePlugin(t, plugins, "watch-trap", "trap.wasm", "kinds: [admission]\nmode: monitor\nfailurePolicy: Fail\norder: -1\n")
	h.write(t, "good", "wasmlet.local/busybox:1.0")
	h.write(t, "bad", "wasmlet.local/busybox:bang!")
	a, stop := h.start(t, func(c *Config) { c.PluginDir = plugins })
	defer stop()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var good, bad *v1.Pod
		for _, p := range a.Pods() {
			switch p.Name {
			case "good-n1":
				good = &p
			case "bad-n1":
				bad = &p
			}
		}
		if good != nil && bad != nil && good.Status.Phase == v1.PodRunning && bad.Status.Phase == v1.PodFailed {
			if bad.Status.Reason != "Bang" || !strings.Contains(bad.Status.Message, "bang") {
				t.Fatalf("rejection: reason %q message %q", bad.Status.Reason, bad.Status.Message)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods: good %+v, bad %+v", good, bad)
		}
		time.Sleep(20 * time.Millisecond)
	}
	st := a.plugins.ext.Status()
	if len(st) != 4 || st[0].Name != "bang" || st[0].Calls < 2 || st[1].Name != "env" || st[1].Calls < 2 ||
		st[2].Name != "watch-trap" || st[2].Mode != abi.ModeMonitor || st[3].Name != "watch" || st[3].Mode != abi.ModeMonitor {
		t.Fatalf("/plugins: %+v", st)
	}
	if got := metrictest.Counters(t, a.gatherer, "wasmlet_admission_monitored_denials_total"); got["watch/Bang"] != 1 {
		t.Errorf("wasmlet_admission_monitored_denials_total %v, want watch/Bang 1", got)
	}
}

// TestAgent_PluginLoadingAdmitsNothing checks that there is no fail-open
// window at start: a Fail-policy admission plugin that takes a while to load
// (its _initialize spins for about a second) denies a pod, and the pod is
// never admitted — never Running — before the plugin has loaded and said
// no. Were the plugin directory loaded in the background, the pod would run
// on the fake runtime in milliseconds.
func TestAgent_PluginLoadingAdmitsNothing(t *testing.T) {
	h := newHarness(t)
	plugins := filepath.Join(h.dir, "plugins")
	// A generous timeout: _initialize gets max(timeout, 10 s), and a loaded
	// machine must not make the load fail.
	writePlugin(t, plugins, "slow", "slowinit.wasm", "kinds: [admission]\nfailurePolicy: Fail\npermissions:\n  timeout: 2m\n")
	h.write(t, "bad", "wasmlet.local/busybox:bang!")
	a, stop := h.start(t, func(c *Config) { c.PluginDir = plugins })
	defer stop()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var bad *v1.Pod
		for _, p := range a.Pods() {
			if p.Name == "bad-n1" {
				bad = &p
			}
		}
		if bad != nil && bad.Status.Phase == v1.PodRunning {
			t.Fatalf("pod admitted and running while the Fail-policy plugin was loading: %+v", bad.Status)
		}
		if bad != nil && bad.Status.Phase == v1.PodFailed {
			if bad.Status.Reason != "Bang" {
				t.Fatalf("rejection: reason %q message %q, want the plugin's Bang", bad.Status.Reason, bad.Status.Message)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod bad: %+v", bad)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// writePlugin writes pluginhost's testdata/wat/<wasm> into dir as
// <name>.wasm with a manifest: name, version, abi, sha256 and extra (YAML).
func writePlugin(t *testing.T, dir, name, wasm, extra string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("..", "internal", "pluginhost", "testdata", "wat", wasm))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if err := os.WriteFile(filepath.Join(dir, name+".wasm"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	mf := fmt.Sprintf("name: %s\nversion: 1.0.0\nabi: v1\nsha256: %s\n%s", name, hex.EncodeToString(sum[:]), extra)
	if err := os.WriteFile(filepath.Join(dir, name+abi.ManifestSuffix), []byte(mf), 0o644); err != nil {
		t.Fatal(err)
	}
}
