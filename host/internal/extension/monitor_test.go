package extension

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/admission"
	"github.com/wasmlet/wasmlet/host/internal/pluginhost"
	"github.com/wasmlet/wasmlet/internal/metrictest"
)

// event is one event a fakeRecorder recorded.
type event struct{ pod, eventType, reason, message string }

// fakeRecorder keeps the events recorded about pods.
type fakeRecorder struct {
	mu     sync.Mutex
	events []event
}

func (r *fakeRecorder) Event(pod *v1.Pod, eventType, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, event{pod.Name, eventType, reason, message})
}

func (r *fakeRecorder) recorded() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

// monitorSetup is an Extension over a plugin directory, its chain, the
// events it recorded, its log and its metrics.
type monitorSetup struct {
	e     *Extension
	chain *admission.Chain
	rec   *fakeRecorder
	logs  *bytes.Buffer
	reg   *prometheus.Registry
}

// setupMonitor is setup with a recorder and a logger kept for the test.
func setupMonitor(t *testing.T, dir string, parallel bool) monitorSetup {
	t.Helper()
	e, reg := setup(t, dir, nil)
	s := monitorSetup{e: e, rec: &fakeRecorder{}, logs: &bytes.Buffer{}, reg: reg}
	e.cfg.Recorder, e.cfg.ParallelAdmission = s.rec, parallel
	e.log = hclog.New(&hclog.LoggerOptions{Output: s.logs, Level: hclog.Info})
	var err error
	if s.chain, err = admission.New(admission.Config{Admitters: []admission.Admitter{e.Admitter()}, Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", s.logs.String())
		}
	})
	return s
}

// TestExtension_Admitter_monitor: a plugin in monitor mode is called like
// any other, but its denial admits the pod and is reported (warn line,
// Warning event naming plugin and reason, metric), and its failure under
// failurePolicy Fail admits too (logged and counted).
func TestExtension_Admitter_monitor(t *testing.T) {
	for _, parallel := range []bool{false, true} {
		t.Run(fmt.Sprintf("parallel=%v", parallel), func(t *testing.T) {
			dir := t.TempDir()
			install(t, dir, "watch", "ok.wasm", []abi.Kind{abi.KindAdmission}, "order: 1\nmode: monitor\nfailurePolicy: Fail\n")
			install(t, dir, "watch-trap", "trap.wasm", []abi.Kind{abi.KindAdmission}, "order: 2\nmode: monitor\nfailurePolicy: Fail\n")
			m := setupMonitor(t, dir, parallel)
			e, chain, rec, logs := m.e, m.chain, m.rec, m.logs
			ctx := context.Background()

			if r := chain.Admit(ctx, admission.Attributes{Pod: testPod("bang!")}); !r.Admit {
				t.Fatalf("a monitoring plugin's denial rejected the pod: %+v", r)
			}
			want := []event{{"bang!", v1.EventTypeWarning, MonitoredDenialReason, "admission plugin watch (mode monitor) would deny the pod: Bang: input has a bang"}}
			if got := rec.recorded(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("events %+v, want %+v", got, want)
			}
			if got := metrictest.Counters(t, m.reg, "wasmlet_admission_monitored_denials_total"); fmt.Sprint(got) != "map[watch/Bang:1]" {
				t.Errorf("wasmlet_admission_monitored_denials_total %v, want watch/Bang 1", got)
			}
			line := lineWith(logs.String(), "admission plugin in monitor mode denied a pod; admitted")
			for _, s := range []string{"[WARN]", "plugin=watch", `pod="default/bang!"`, "reason=Bang"} {
				if !strings.Contains(line, s) {
					t.Errorf("log line %q lacks %q", line, s)
				}
			}

			// The trapping monitor plugin failed under Fail: admitted,
			// logged and counted with policy "monitor".
			if r := chain.Admit(ctx, admission.Attributes{Pod: testPod("calm")}); !r.Admit {
				t.Fatalf("a monitoring plugin's failure rejected the pod: %+v", r)
			}
			if n := counter(e.failures.WithLabelValues("watch-trap", "admission", "monitor")); n != 2 {
				t.Errorf("monitored failures of watch-trap = %v, want 2 (one per admission)", n)
			}
			if !strings.Contains(logs.String(), "plugin call failed; ignored (mode monitor)") {
				t.Error("the monitored failure is not logged")
			}
			if n := len(rec.recorded()); n != 1 {
				t.Errorf("%d events, want the one denial's (a failure records none)", n)
			}
		})
	}
}

// TestExtension_Admitter_monitorThenEnforce: a monitoring plugin's denial
// does not stop the chain; an enforcing plugin after it still denies.
func TestExtension_Admitter_monitorThenEnforce(t *testing.T) {
	for _, parallel := range []bool{false, true} {
		t.Run(fmt.Sprintf("parallel=%v", parallel), func(t *testing.T) {
			dir := t.TempDir()
			install(t, dir, "watch", "ok.wasm", []abi.Kind{abi.KindAdmission}, "order: 1\nmode: monitor\n")
			install(t, dir, "bang", "ok.wasm", []abi.Kind{abi.KindAdmission}, "order: 2\n")
			m := setupMonitor(t, dir, parallel)
			chain, rec := m.chain, m.rec
			r := chain.Admit(context.Background(), admission.Attributes{Pod: testPod("bang!")})
			if r.Admit || r.Admitter != "bang" || r.Reason != "Bang" {
				t.Fatalf("result %+v, want bang's denial", r)
			}
			if got := rec.recorded(); len(got) != 1 || got[0].reason != MonitoredDenialReason || !strings.Contains(got[0].message, "watch") {
				t.Errorf("events %+v, want watch's monitored denial", got)
			}
			want := map[string]float64{"watch/admit": 1, "bang/reject": 1}
			if got := results(t, m.reg); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("wasmlet_admission_results_total %v, want %v", got, want)
			}
		})
	}
}

// TestExtension_Status_mode: /plugins shows each plugin's mode; a bad mode,
// or monitor on a kind other than admission, is a load error naming the
// manifest and the field.
func TestExtension_Status_mode(t *testing.T) {
	dir := t.TempDir()
	install(t, dir, "watch", "ok.wasm", []abi.Kind{abi.KindAdmission}, "mode: monitor\n")
	install(t, dir, "plain", "ok.wasm", []abi.Kind{abi.KindAdmission}, "")
	install(t, dir, "typo", "ok.wasm", []abi.Kind{abi.KindAdmission}, "mode: audit\n")
	install(t, dir, "hook-watch", "ok.wasm", []abi.Kind{abi.KindHook}, "mode: monitor\n")
	e, _ := setup(t, dir, nil)
	got := map[string]PluginStatus{}
	for _, s := range e.Status() {
		got[filepath.Base(s.File)] = s
	}
	if s := got["watch.plugin.yaml"]; s.State != pluginhost.StateLoaded || s.Mode != abi.ModeMonitor {
		t.Errorf("watch: %+v, want loaded in mode monitor", s)
	}
	if s := got["plain.plugin.yaml"]; s.State != pluginhost.StateLoaded || s.Mode != abi.ModeEnforce {
		t.Errorf("plain: %+v, want loaded in mode enforce", s)
	}
	for file, msg := range map[string]string{
		"typo.plugin.yaml":       `mode "audit": want enforce or monitor`,
		"hook-watch.plugin.yaml": `mode "monitor": only admission plugins can monitor; kinds include "hook"`,
	} {
		s := got[file]
		if s.State != pluginhost.StateFailed || !strings.Contains(s.Error, filepath.Join(dir, file)) || !strings.Contains(s.Error, msg) {
			t.Errorf("%s: %+v, want failed with an error naming the file and %q", file, s, msg)
		}
	}
	if enforced := e.mgr.Enforced(); !strings.Contains(enforced, "watch@1.0.0([admission], failurePolicy Fail, mode monitor)") {
		t.Errorf("Enforced() = %q, want watch's mode", enforced)
	}
}

// lineWith is the first line of s containing sub, or "".
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
