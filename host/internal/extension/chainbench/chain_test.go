//go:build !wasip1

// Package bench measures the admission chain of the four first-party
// policies (no-privileged, image-allowlist, require-limits, sysctl-allowlist)
// on testdata/pod4k.json, as the agent runs it — pluginhost.Manager loading the
// compiled .wasm files, host/extension's admitter in an admission.Chain —
// as four modules and as one (plugins/policy-bundle), against the same four
// checks written natively in Go. It reports p50 and
// p99 per pod besides ns/op and the process CPU time per pod.
//
//	go test -run '^$' -bench Chain -benchtime 2000x ./host/internal/extension/chainbench/
package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmlet/wasmlet/host/internal/admission"
	"github.com/wasmlet/wasmlet/host/internal/extension"
	"github.com/wasmlet/wasmlet/host/internal/pluginhost"
	"github.com/wasmlet/wasmlet/internal/wasmbuild"
)

// policies and the config under which the 4 KB pod passes all four (the
// chain's worst case: every plugin runs).
var policies = []struct {
	name   string
	order  int
	config map[string]string
}{
	{"no-privileged", 10, map[string]string{"denyHostNamespaces": "true"}},
	{"image-allowlist", 20, map[string]string{"allowed": "registry.example.com, docker.io/envoyproxy"}},
	{"require-limits", 30, map[string]string{"resources": "cpu,memory"}},
	{"sysctl-allowlist", 40, map[string]string{}},
}

func pod4k(tb testing.TB) (*v1.Pod, []byte) {
	b, err := os.ReadFile("../../../../testdata/pod4k.json")
	if err != nil {
		tb.Fatal(err)
	}
	var p v1.Pod
	if err := json.Unmarshal(b, &p); err != nil {
		tb.Fatal(err)
	}
	return &p, b
}

// policy is one plugin of a benchmark's directory: the plugins/<dir>
// policy under a name of its own.
type policy struct {
	name, dir string
	order     int
	config    map[string]string
}

// pluginsDir holds the first-party plugins' sources.
const pluginsDir = "../../../../plugins"

// loadPolicies writes the policies' compiled modules and manifests into a
// plugin directory and loads it with a Manager, as the agent does.
func loadPolicies(tb testing.TB, list []policy, deadline pluginhost.DeadlineMode) *pluginhost.Manager {
	dir := tb.TempDir()
	for _, p := range list {
		wasm, err := wasmbuild.Go(filepath.Join(pluginsDir, p.dir))
		if err != nil {
			tb.Fatal(err)
		}
		b, err := os.ReadFile(wasm)
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p.name+".wasm"), b, 0o644); err != nil {
			tb.Fatal(err)
		}
		sum := sha256.Sum256(b)
		cfg, _ := json.Marshal(p.config)
		mf := fmt.Sprintf("name: %s\nversion: 1.0.0\nabi: v1\nkinds: [admission]\nsha256: %s\norder: %d\nconfig: %s\n", p.name, hex.EncodeToString(sum[:]), p.order, cfg)
		if err := os.WriteFile(filepath.Join(dir, p.name+".plugin.yaml"), []byte(mf), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	m, err := pluginhost.NewManager(pluginhost.Config{Dir: dir, CacheDir: wasmbuild.CacheDir(), Deadline: deadline})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { m.Close(context.Background()) })
	m.Scan(context.Background())
	if n := len(m.Admitters()); n != len(list) {
		tb.Fatalf("%d admission plugins loaded, want %d: %+v", n, len(list), m.Plugins())
	}
	return m
}

// wasmChain loads the four policies from a plugin directory with a Manager
// and returns the admission chain the agent would build (built-ins left
// out: they are not plugins).
func wasmChain(tb testing.TB, deadline pluginhost.DeadlineMode, parallel bool) (*admission.Chain, *pluginhost.Manager) {
	var list []policy
	for _, p := range policies {
		list = append(list, policy{name: p.name, dir: p.name, order: p.order, config: p.config})
	}
	m := loadPolicies(tb, list, deadline)
	ext, err := extension.New(extension.Config{Manager: m, ParallelAdmission: parallel})
	if err != nil {
		tb.Fatal(err)
	}
	chain, err := admission.New(admission.Config{Admitters: []admission.Admitter{ext.Admitter()}})
	if err != nil {
		tb.Fatal(err)
	}
	return chain, m
}

// bundleChain loads plugins/policy-bundle, the four policies in one module,
// with their configs under prefixed keys, and returns its admission chain.
func bundleChain(tb testing.TB) *admission.Chain {
	config := map[string]string{}
	for _, p := range policies {
		for k, v := range p.config {
			config[p.name+"."+k] = v
		}
	}
	m := loadPolicies(tb, []policy{{name: "policy-bundle", dir: "policy-bundle", order: 10, config: config}}, pluginhost.DeadlineAuto)
	ext, err := extension.New(extension.Config{Manager: m})
	if err != nil {
		tb.Fatal(err)
	}
	chain, err := admission.New(admission.Config{Admitters: []admission.Admitter{ext.Admitter()}})
	if err != nil {
		tb.Fatal(err)
	}
	return chain
}

// TestChain checks the benchmark's premise: the 4 KB pod passes all four
// policies, wasm (four modules, and the bundle) and native, and a
// privileged variant is denied by each, the bundle naming no-privileged.
func TestChain(t *testing.T) {
	pod, raw := pod4k(t)
	chain, _ := wasmChain(t, pluginhost.DeadlineAuto, false)
	if r := chain.Admit(context.Background(), admission.Attributes{Pod: pod}); !r.Admit {
		t.Fatalf("wasm chain rejects the 4 KB pod: %+v", r)
	}
	bundle := bundleChain(t)
	if r := bundle.Admit(context.Background(), admission.Attributes{Pod: pod}); !r.Admit {
		t.Fatalf("the bundle rejects the 4 KB pod: %+v", r)
	}
	if err := nativeChain(raw); err != nil {
		t.Fatalf("native chain rejects the 4 KB pod: %v", err)
	}
	priv := pod.DeepCopy()
	yes := true
	priv.Spec.Containers[1].SecurityContext.Privileged = &yes
	if r := chain.Admit(context.Background(), admission.Attributes{Pod: priv}); r.Admit || r.Admitter != "no-privileged" {
		t.Fatalf("wasm chain on a privileged pod: %+v", r)
	}
	if r := bundle.Admit(context.Background(), admission.Attributes{Pod: priv}); r.Admit || r.Admitter != "policy-bundle" ||
		r.Reason != "Privileged" || !strings.Contains(r.Message, "no-privileged: container ") {
		t.Fatalf("the bundle on a privileged pod: %+v", r)
	}
	b, _ := json.Marshal(priv)
	if err := nativeChain(b); err == nil || !strings.Contains(err.Error(), "privileged") {
		t.Fatalf("native chain on a privileged pod: %v", err)
	}
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// nativeCPU is the native chain's cpu-ns per pod, for the ratio.
var nativeCPU float64

// run times f per iteration and reports p50/p99 (wall), cpu-ns/op and, once
// the native figure is known, the ratio to it.
func run(b *testing.B, f func()) {
	f() // warm up
	lat := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuNow()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		f()
		lat[i] = time.Since(t0)
	}
	cpu := float64(cpuNow()-c0) / float64(b.N)
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Nanoseconds()), "p99-ns")
	b.ReportMetric(cpu, "cpu-ns/op")
	if nativeCPU > 0 {
		b.ReportMetric(cpu/nativeCPU, "x-native-cpu")
	}
}

// BenchmarkChain: "native" decodes the pod's JSON with encoding/json into
// k8s.io/api's v1.Pod and runs the four checks in Go (the baseline, the
// work a guest does); "native-decoded" runs the checks on a decoded pod;
// "wasm" is the agent's path (the pod encoded once, the four plugins called
// in order) with the default deadline mechanism (metering);
// "wasm-parallel" calls them all at once and takes the verdicts in order;
// "wasm-no-deadline" runs without deadline enforcement; "wasm-bundle" is
// plugins/policy-bundle, the four policies in one module (one call, the pod
// decoded once). The -N-pods-on-node variants send N pods on the node too.
func BenchmarkChain(b *testing.B) {
	pod, raw := pod4k(b)
	b.Run("native", func(b *testing.B) {
		run(b, func() {
			if err := nativeChain(raw); err != nil {
				b.Fatal(err)
			}
		})
		nativeCPU = 0
	})
	// Measure the baseline's CPU once more outside the sub-benchmark's
	// calibration, for a stable ratio.
	c0, n := cpuNow(), 2000
	for i := 0; i < n; i++ {
		_ = nativeChain(raw)
	}
	nativeCPU = float64(cpuNow()-c0) / float64(n)
	b.Run("native-decoded", func(b *testing.B) {
		run(b, func() {
			if err := nativeChecks(pod); err != nil {
				b.Fatal(err)
			}
		})
	})
	bench := func(name string, chain *admission.Chain, attrs admission.Attributes) {
		b.Run(name, func(b *testing.B) {
			run(b, func() {
				if r := chain.Admit(context.Background(), attrs); !r.Admit {
					b.Fatal(r)
				}
			})
		})
	}
	for _, v := range []struct {
		name     string
		deadline pluginhost.DeadlineMode
		parallel bool
	}{
		{"wasm", pluginhost.DeadlineAuto, false},
		{"wasm-parallel", pluginhost.DeadlineAuto, true},
		{"wasm-no-deadline", pluginhost.DeadlineNone, false},
	} {
		chain, _ := wasmChain(b, v.deadline, v.parallel)
		bench(v.name, chain, admission.Attributes{Pod: pod})
	}
	// The agent sends the pods already on the node too (30, and 110: the
	// kubelet's default max-pods): a guest that does not declare what it
	// reads (wasmlet_reads, sdk.Reads) is sent them and steps over them.
	// The bundle of the four runs beside the four modules on each.
	// A tree from before the bundle (the baseline hack/plugin-costs.sh
	// runs this file in) times the four modules only.
	chain, _ := wasmChain(b, pluginhost.DeadlineAuto, false)
	var bundle *admission.Chain
	if _, err := os.Stat(filepath.Join(pluginsDir, "policy-bundle")); err == nil {
		bundle = bundleChain(b)
		bench("wasm-bundle", bundle, admission.Attributes{Pod: pod})
	} else {
		b.Logf("no plugins/policy-bundle in this tree: the wasm-bundle sub-benchmarks are left out")
	}
	for _, n := range []int{30, 110} {
		attrs := admission.Attributes{Pod: pod}
		for i := 0; i < n; i++ {
			attrs.Pods = append(attrs.Pods, pod)
		}
		bench(fmt.Sprintf("wasm-%d-pods-on-node", n), chain, attrs)
		if bundle != nil {
			bench(fmt.Sprintf("wasm-bundle-%d-pods-on-node", n), bundle, attrs)
		}
	}
}
