package extension

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/admission"
	"github.com/wasmlet/wasmlet/host/internal/config"
	"github.com/wasmlet/wasmlet/host/internal/container"
	"github.com/wasmlet/wasmlet/host/internal/pluginhost"
	"github.com/wasmlet/wasmlet/internal/metrictest"
)

// fixture is a module of this package's testdata or pluginhost's (WAT or
// C).
func fixture(name string) string {
	for _, p := range []string{filepath.Join("testdata", name), filepath.Join("..", "pluginhost", "testdata", "c", name)} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return filepath.Join("..", "pluginhost", "testdata", "wat", name)
}

// install copies a module into dir with a manifest (extra YAML appended).
func install(t testing.TB, dir, name, module string, kinds []abi.Kind, extra string) {
	t.Helper()
	b, err := os.ReadFile(fixture(module))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".wasm"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	ks, _ := json.Marshal(kinds)
	mf := fmt.Sprintf("name: %s\nversion: 1.0.0\nabi: v1\nkinds: %s\nsha256: %s\n%s", name, ks, hex.EncodeToString(sum[:]), extra)
	if err := os.WriteFile(filepath.Join(dir, name+abi.ManifestSuffix), []byte(mf), 0o644); err != nil {
		t.Fatal(err)
	}
}

// setup scans dir with a Manager and returns the Extension over it and its
// registry. The default deadline is one no loaded machine reaches, so calls
// that must finish do; a plugin whose deadline is the point sets its own in
// its manifest (permissions.timeout).
func setup(t testing.TB, dir string, merge func(context.Context, string, config.PodUpdate) error) (*Extension, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := pluginhost.NewManager(pluginhost.Config{Dir: dir, Registerer: reg, Timeout: time.Minute, PoolSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	m.Scan(context.Background())
	e, err := New(Config{Manager: m, NodeName: "node1", PollInterval: 20 * time.Millisecond, Merge: merge, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return e, reg
}

func testPod(name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: "u-" + "x"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "i"}}}}
}

func TestExtension_Admitter(t *testing.T) {
	for _, parallel := range []bool{false, true} {
		t.Run(fmt.Sprintf("parallel=%v", parallel), func(t *testing.T) { testAdmitters(t, parallel) })
	}
}

func testAdmitters(t *testing.T, parallel bool) {
	dir := t.TempDir()
	install(t, dir, "bang", "ok.wasm", []abi.Kind{abi.KindAdmission}, "order: 1\n")
	install(t, dir, "trap-ignored", "trap.wasm", []abi.Kind{abi.KindAdmission}, "order: 2\nfailurePolicy: Ignore\n")
	install(t, dir, "spin-fails", "loop.wasm", []abi.Kind{abi.KindAdmission}, "order: 3\nfailurePolicy: Fail\npermissions: {timeout: 50ms}\n")
	e, reg := setup(t, dir, nil)
	e.cfg.ParallelAdmission = parallel
	chain, err := admission.New(admission.Config{Admitters: append(admission.Builtins(10), e.Admitter()), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(e.mgr.Admitters()); got != 3 {
		t.Fatalf("%d admission plugins, want 3", got)
	}
	tests := []struct {
		pod          string
		wantAdmitter string
		wantReason   string
		wantMessage  string
	}{
		// ok.wasm denies input containing '!': the first plugin decides.
		{"bang!", "bang", "Bang", "admitter bang: input has a bang"},
		// trap-ignored is skipped (Ignore), spin-fails times out (Fail).
		{"calm", "spin-fails", "AdmissionError", "deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.pod, func(t *testing.T) {
			r := chain.Admit(context.Background(), admission.Attributes{Pod: testPod(tt.pod)})
			if r.Admit || r.Admitter != tt.wantAdmitter || r.Reason != tt.wantReason || !strings.Contains(r.Message, tt.wantMessage) {
				t.Fatalf("result %+v, want admitter %s reason %s message containing %q", r, tt.wantAdmitter, tt.wantReason, tt.wantMessage)
			}
		})
	}
	if n := counter(e.failures.WithLabelValues("trap-ignored", "admission", "ignore")); n != 1 {
		t.Errorf("ignored failures = %v, want 1", n)
	}
	if n := counter(e.failures.WithLabelValues("spin-fails", "admission", "fail")); n != 1 {
		t.Errorf("failed calls = %v, want 1", n)
	}
	// The chain counts each plugin as an admitter of its own, up to the
	// first that does not admit, as it counts the built-ins.
	want := map[string]float64{
		"PodOS/admit": 2, "MaxPods/admit": 2, "Sysctls/admit": 2, "ResourceFit/admit": 2, "HostPorts/admit": 2, "HostUsers/admit": 2, "AppArmor/admit": 2,
		"bang/reject": 1, "bang/admit": 1, "trap-ignored/admit": 1, "spin-fails/error": 1,
	}
	if got := results(t, reg); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("wasmlet_admission_results_total %v, want %v", got, want)
	}
	// Remove the failing plugin: the chain admits without a restart.
	if err := os.Remove(filepath.Join(dir, "spin-fails"+abi.ManifestSuffix)); err != nil {
		t.Fatal(err)
	}
	e.mgr.Scan(context.Background())
	if r := chain.Admit(context.Background(), admission.Attributes{Pod: testPod("calm")}); !r.Admit {
		t.Fatalf("after removing spin-fails: %+v", r)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}

// TestExtension_Admitter_alone asks the plugin set directly, outside a
// chain: its verdict and its decisions name the plugin.
func TestExtension_Admitter_alone(t *testing.T) {
	dir := t.TempDir()
	install(t, dir, "bang", "ok.wasm", []abi.Kind{abi.KindAdmission}, "order: 1\n")
	install(t, dir, "spin-fails", "loop.wasm", []abi.Kind{abi.KindAdmission}, "order: 2\nfailurePolicy: Fail\npermissions: {timeout: 50ms}\n")
	e, _ := setup(t, dir, nil)
	a := e.Admitter()
	ctx := context.Background()
	if r, err := a.Admit(ctx, admission.Attributes{Pod: testPod("bang!")}); err != nil || r.Admit || r.Admitter != "bang" || r.Reason != "Bang" || r.Message != "input has a bang" {
		t.Errorf("Admit(bang!) = %+v, %v", r, err)
	}
	if r, err := a.Admit(ctx, admission.Attributes{Pod: testPod("calm")}); err == nil || !strings.Contains(err.Error(), "spin-fails") || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Errorf("Admit(calm) = %+v, %v", r, err)
	}
	ds := a.AdmitEach(ctx, admission.Attributes{Pod: testPod("bang!")})
	if len(ds) != 1 || ds[0].Admitter != "bang" || ds[0].Result.Admit || ds[0].Err != nil {
		t.Errorf("AdmitEach(bang!) = %+v: the set stops at the first denial", ds)
	}
	if err := os.Remove(filepath.Join(dir, "spin-fails"+abi.ManifestSuffix)); err != nil {
		t.Fatal(err)
	}
	e.mgr.Scan(ctx)
	ds = a.AdmitEach(ctx, admission.Attributes{Pod: testPod("calm")})
	if len(ds) != 1 || ds[0].Admitter != "bang" || !ds[0].Result.Admit {
		t.Errorf("AdmitEach(calm) after removing spin-fails = %+v", ds)
	}
	if r, err := a.Admit(ctx, admission.Attributes{Pod: testPod("calm")}); err != nil || !r.Admit {
		t.Errorf("Admit(calm) after removing spin-fails = %+v, %v", r, err)
	}
}

// TestExtension_Admitter_concurrent admits different pods at once through
// one admitter: it keeps no state from one admission to another, so each
// pod gets its own verdict.
func TestExtension_Admitter_concurrent(t *testing.T) {
	for _, parallel := range []bool{false, true} {
		t.Run(fmt.Sprintf("parallel=%v", parallel), func(t *testing.T) {
			dir := t.TempDir()
			install(t, dir, "bang", "ok.wasm", []abi.Kind{abi.KindAdmission}, "order: 1\n")
			install(t, dir, "trap-ignored", "trap.wasm", []abi.Kind{abi.KindAdmission}, "order: 2\nfailurePolicy: Ignore\n")
			e, _ := setup(t, dir, nil)
			e.cfg.ParallelAdmission = parallel
			chain, err := admission.New(admission.Config{Admitters: []admission.Admitter{e.Admitter()}})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for i := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					name, pods := fmt.Sprintf("calm-%d", i), []*v1.Pod{testPod("a")}
					if i%2 == 0 {
						name, pods = fmt.Sprintf("bang-%d!", i), nil
					}
					r := chain.Admit(context.Background(), admission.Attributes{Pod: testPod(name), Pods: pods})
					if wantAdmit := i%2 == 1; r.Admit != wantAdmit || (!wantAdmit && r.Admitter != "bang") {
						t.Errorf("pod %s: %+v, want admit %v", name, r, wantAdmit)
					}
				}()
			}
			wg.Wait()
		})
	}
}

func TestExtension_Hook(t *testing.T) {
	dir := t.TempDir()
	install(t, dir, "env", "ok.wasm", []abi.Kind{abi.KindHook}, "order: 1\n")
	e, _ := setup(t, dir, nil)
	pod := testPod("p")
	adj, err := e.Hook(context.Background(), container.HookPreCreate, pod, &pod.Spec.Containers[0])
	if err != nil || adj == nil || len(adj.Env) != 1 || adj.Env[0] != (container.EnvVar{Name: "A", Value: "1"}) {
		t.Fatalf("PreCreate: %+v, %v", adj, err)
	}
	if adj, err := e.Hook(context.Background(), container.HookPostStart, pod, &pod.Spec.Containers[0]); err != nil || adj != nil {
		t.Fatalf("PostStart: adjustments are not honoured there: %+v, %v", adj, err)
	}
	if adj, err := e.Hook(context.Background(), container.HookPreSandbox, pod, nil); err != nil || (adj != nil && len(adj.Env) != 0) {
		t.Fatalf("PreSandbox: env is for containers only: %+v, %v", adj, err)
	}

	install(t, dir, "hook-error", "src.wasm", []abi.Kind{abi.KindHook}, "order: 2\n")
	e.mgr.Scan(context.Background())
	if _, err := e.Hook(context.Background(), container.HookPreCreate, pod, &pod.Spec.Containers[0]); err == nil || !strings.Contains(err.Error(), "hook-error") || !strings.Contains(err.Error(), "no decision") {
		t.Fatalf("failing hook under Fail: err = %v", err)
	}
	install(t, dir, "hook-error", "src.wasm", []abi.Kind{abi.KindHook}, "order: 2\nfailurePolicy: Ignore\n")
	e.mgr.Scan(context.Background())
	if adj, err := e.Hook(context.Background(), container.HookPreCreate, pod, &pod.Spec.Containers[0]); err != nil || adj == nil || len(adj.Env) != 1 {
		t.Fatalf("failing hook under Ignore: %+v, %v", adj, err)
	}
}

func TestExtension_Sources(t *testing.T) {
	dir := t.TempDir()
	install(t, dir, "pods", "src.wasm", []abi.Kind{abi.KindSource}, "")
	install(t, dir, "junk", "garbage.wasm", []abi.Kind{abi.KindSource}, "")
	e, _ := setup(t, dir, nil)
	srcs := e.Sources()
	if len(srcs) != 2 || srcs[0].Name() != "junk" || srcs[1].Name() != "pods" {
		t.Fatalf("sources %v", srcs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pods := make(chan config.PodUpdate, 10)
	junk := make(chan config.PodUpdate, 10)
	go srcs[1].Run(ctx, pods)
	go srcs[0].Run(ctx, junk)
	var got []config.PodUpdate
	for len(got) < 2 {
		select {
		case u := <-pods:
			got = append(got, u)
		case u := <-junk:
			t.Fatalf("a garbage answer was sent: %+v", u)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d updates after 10 s", len(got))
		}
	}
	u := got[0]
	if u.Op != config.OpSet || u.Source != "pods" || len(u.Pods) != 1 {
		t.Fatalf("update %+v", u)
	}
	p := u.Pods[0]
	if p.Name != "p-node1" || p.Namespace != "default" || p.Spec.NodeName != "node1" || p.UID == "" || p.Annotations[config.AnnotationHash] != string(p.UID) {
		t.Fatalf("not a static pod: %s/%s uid %q node %q annotations %v", p.Namespace, p.Name, p.UID, p.Spec.NodeName, p.Annotations)
	}
	if got[1].Pods[0].UID != p.UID {
		t.Errorf("UID changed between identical polls: %s, %s", p.UID, got[1].Pods[0].UID)
	}
	// The garbage source is polled beside the good one, not before it: on a
	// loaded machine its first answer may come after the good one's two.
	for end := time.Now().Add(10 * time.Second); counter(e.failures.WithLabelValues("junk", "source", "keep")) < 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("garbage polls counted %v after 10 s, want ≥ 1", counter(e.failures.WithLabelValues("junk", "source", "keep")))
		}
	}
}

// TestExtension_Run checks that a source plugin loaded while Run runs is
// polled. The late plugin is loaded only once Run has listed the source
// plugins (its first poller, early's, has sent an update), so only the
// Manager's change notice can bring it to Run: the test fails if Run does
// not hear of changes, or hears of them only after they happened.
func TestExtension_Run(t *testing.T) {
	if e, _ := setup(t, t.TempDir(), nil); len(e.Sources()) != 0 {
		t.Fatal("sources in an empty directory")
	}
	dir := t.TempDir()
	install(t, dir, "early", "src.wasm", []abi.Kind{abi.KindSource}, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan string)
	e, _ := setup(t, dir, func(ctx context.Context, source string, u config.PodUpdate) error {
		select {
		case got <- source + ":" + string(u.Op):
		case <-ctx.Done():
		}
		return nil
	})
	go e.Run(ctx)
	wait := func(want string) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case s := <-got:
				if s == want {
					return
				}
				if !strings.HasPrefix(s, "early:") {
					t.Fatalf("merged %q, want %q", s, want)
				}
			case <-timeout:
				t.Fatalf("no %s after 10 s", want)
			}
		}
	}
	wait("early:SET")
	install(t, dir, "late", "src.wasm", []abi.Kind{abi.KindSource}, "")
	e.mgr.Scan(context.Background())
	wait("late:SET")
}

func TestExtension_Handler(t *testing.T) {
	dir := t.TempDir()
	install(t, dir, "bang", "ok.wasm", []abi.Kind{abi.KindAdmission}, "")
	if err := os.WriteFile(filepath.Join(dir, "broken"+abi.ManifestSuffix), []byte("name: broken\nabi: v9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e, reg := setup(t, dir, nil)
	if r, err := e.Admitter().Admit(context.Background(), admission.Attributes{Pod: testPod("x")}); err != nil || !r.Admit {
		t.Fatal(r, err)
	}
	rec := httptest.NewRecorder()
	e.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/plugins", nil))
	var body struct {
		Enforced string
		Plugins  []PluginStatus
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	if !strings.HasPrefix(body.Enforced, "bang@1.0.0([admission], failurePolicy ") || strings.Contains(body.Enforced, "broken") {
		t.Errorf("enforced %q, want bang@1.0.0 alone", body.Enforced)
	}
	if len(body.Plugins) != 2 {
		t.Fatalf("plugins %+v", body.Plugins)
	}
	bang, broken := body.Plugins[0], body.Plugins[1]
	if bang.Name != "bang" || bang.State != pluginhost.StateLoaded || bang.Calls != 1 || bang.P50 == "" || bang.P99 == "" || len(bang.SHA256) != 64 || bang.Version != "1.0.0" {
		t.Errorf("bang: %+v", bang)
	}
	if bang.LastLoad != "ok" || broken.LastLoad != "failed" {
		t.Errorf("lastLoad: %q, %q", bang.LastLoad, broken.LastLoad)
	}
	if broken.State != pluginhost.StateFailed || !strings.Contains(broken.Error, "abi") {
		t.Errorf("broken: %+v", broken)
	}
	mfs, err := reg.Gather()
	n := 0
	for _, mf := range mfs {
		if mf.GetName() == "wasmlet_plugin_call_latency_seconds" || mf.GetName() == "wasmlet_plugin_info" {
			n += len(mf.GetMetric())
		}
	}
	if err != nil || n != 4 { // p50 + p99 of bang, info of both files
		t.Errorf("metrics: %d series, %v", n, err)
	}
}

// results gathers wasmlet_admission_results_total as "admitter/result" →
// value.
func results(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	return metrictest.Counters(t, g, "wasmlet_admission_results_total")
}

func counter(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

func TestEncoder_Admit(t *testing.T) {
	var c encoder
	a, b := testPod("a"), testPod("b")
	if _, err := c.admit(admission.Attributes{Pod: a}); err != nil {
		t.Fatal(err)
	}
	// a was admitted: its encoding is reused while the pointer stays (the
	// agent replaces pods, never edits them, so the edit below is a probe).
	a.Labels = map[string]string{"probe": "x"}
	req, err := c.admit(admission.Attributes{Pod: b, Pods: []*v1.Pod{a}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(req.PodsOnNode[0]), "probe") {
		t.Fatalf("pod a encoded again: %s", req.PodsOnNode[0])
	}
	a2 := a.DeepCopy()
	req, err = c.admit(admission.Attributes{Pod: testPod("c"), Pods: []*v1.Pod{a2, b}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(req.PodsOnNode[0]), "probe") || !strings.Contains(string(req.PodsOnNode[1]), `"name":"b"`) {
		t.Fatalf("a replaced pod must be encoded afresh: %s / %s", req.PodsOnNode[0], req.PodsOnNode[1])
	}
	if len(c.cache) != 3 {
		t.Errorf("cache holds %d pods, want the 3 of the last admission", len(c.cache))
	}
}

// TestExtension_decide_firstLine: a failed admission call under the Fail
// policy puts only the first line of the plugin's error into the decision
// (the pod's status); the whole error, trace included, goes to the log.
func TestExtension_decide_firstLine(t *testing.T) {
	dir := t.TempDir()
	install(t, dir, "bang", "ok.wasm", []abi.Kind{abi.KindAdmission}, "failurePolicy: Fail\n")
	e, _ := setup(t, dir, nil)
	var logs bytes.Buffer
	e.log = hclog.New(&hclog.LoggerOptions{Output: &logs})
	trace := "\ngoroutine 1 [running]:\nruntime.throw(...)\n\t/usr/local/go/src/runtime/panic.go:1101"
	cause := fmt.Errorf("plugin \"bang\": %w: out of memory%s", pluginhost.ErrMemoryLimit, trace)
	d := e.decide(admission.Attributes{Pod: testPod("x")}, answer{p: e.mgr.Get("bang"), err: cause})
	if d.Err == nil || strings.Contains(d.Err.Error(), "\n") || !strings.Contains(d.Err.Error(), "out of memory") {
		t.Fatalf("decision error %q, want the first line alone", d.Err)
	}
	if !errors.Is(d.Err, pluginhost.ErrMemoryLimit) {
		t.Errorf("decision error %v no longer is ErrMemoryLimit", d.Err)
	}
	if !strings.Contains(logs.String(), "runtime.throw") {
		t.Errorf("the trace is not in the log:\n%s", logs.String())
	}
}
