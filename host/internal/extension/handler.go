package extension

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/pluginhost"
)

// PluginStatus is one plugin file as /plugins shows it.
type PluginStatus struct {
	// File is the manifest (or a stray .wasm).
	File string `json:"file"`
	// Name is the plugin's name (empty when it never loaded).
	Name string `json:"name,omitempty"`
	// State is "loaded" or "failed".
	State pluginhost.State `json:"state"`
	// Error says why the file failed, or why a replacement was refused
	// while the previous version keeps serving.
	Error string `json:"error,omitempty"`
	// LastLoad is "failed" when the file's last load failed — for a loaded
	// plugin, a refused replacement while the previous version serves —
	// else "ok".
	LastLoad string `json:"lastLoad"`
	// Version, Kinds, SHA256, FailurePolicy, Order and Mode are the
	// serving version's.
	Version       string            `json:"version,omitempty"`
	Kinds         []abi.Kind        `json:"kinds,omitempty"`
	SHA256        string            `json:"sha256,omitempty"`
	FailurePolicy abi.FailurePolicy `json:"failurePolicy,omitempty"`
	Order         int               `json:"order"`
	// Mode is the serving version's mode: enforce, or monitor (an
	// admission plugin whose denials admit and are reported).
	Mode abi.Mode `json:"mode,omitempty"`
	// LoadedAt is when the serving version was loaded.
	LoadedAt *time.Time `json:"loadedAt,omitempty"`
	// Image is a reference manifest's image (a plugin in a registry);
	// Digest and Verified the serving version's artifact digest and
	// whether it passed verification; ResolvedDigest what the image last
	// resolved to; LastResolveError the last resolution's failure, which
	// leaves the serving version enforced.
	Image            string `json:"image,omitempty"`
	Digest           string `json:"digest,omitempty"`
	Verified         bool   `json:"verified,omitempty"`
	ResolvedDigest   string `json:"resolvedDigest,omitempty"`
	LastResolveError string `json:"lastResolveError,omitempty"`
	// Calls, Errors and Timeouts count the serving version's calls.
	Calls    uint64 `json:"calls"`
	Errors   uint64 `json:"errors"`
	Timeouts uint64 `json:"timeouts"`
	// P50 and P99 are call latency quantiles (upper bounds of power-of-two
	// buckets), as Go durations ("256µs").
	P50 string `json:"p50,omitempty"`
	P99 string `json:"p99,omitempty"`
}

// Status returns every plugin file of the directory, sorted by file.
func (e *Extension) Status() []PluginStatus {
	infos := e.mgr.Plugins()
	out := make([]PluginStatus, 0, len(infos))
	for _, in := range infos {
		s := PluginStatus{File: in.Path, Name: in.Name, State: in.State, Error: in.Error, LastLoad: "ok",
			Image: in.Image, Digest: in.Digest, Verified: in.Verified, ResolvedDigest: in.ResolvedDigest, LastResolveError: in.ResolveError}
		if in.Error != "" {
			s.LastLoad = "failed"
		}
		if in.State == pluginhost.StateLoaded {
			t := in.LoadedAt
			s.Version, s.Kinds, s.SHA256, s.FailurePolicy, s.Order, s.LoadedAt = in.Version, in.Kinds, in.SHA256, in.FailurePolicy, in.Order, &t
			s.Mode = in.Mode
			if s.Mode == "" { // a bare module's derived manifest
				s.Mode = abi.ModeEnforce
			}
			s.Calls, s.Errors, s.Timeouts = in.Stats.Calls, in.Stats.Errors, in.Stats.Timeouts
			if in.Stats.Calls > 0 {
				s.P50, s.P99 = in.Stats.Quantile(0.5).String(), in.Stats.Quantile(0.99).String()
			}
		}
		out = append(out, s)
	}
	return out
}

// Handler serves /plugins: {"enforced": "…", "plugins": [PluginStatus…]}
// as JSON, enforced being the serving plugins in one line (the Manager's
// Enforced: name@version, kinds, failure policy, file).
func (e *Extension) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Enforced string         `json:"enforced"`
			Plugins  []PluginStatus `json:"plugins"`
		}{e.mgr.Enforced(), e.Status()}); err != nil {
			e.log.Error("write /plugins", "error", err)
		}
	})
}

var (
	descQuantile = prometheus.NewDesc("wasmlet_plugin_call_latency_seconds", "Plugin call latency quantiles (upper bounds of power-of-two buckets), as /plugins shows them.", []string{"plugin", "version", "quantile"}, nil)
	descInfo     = prometheus.NewDesc("wasmlet_plugin_info", "One per plugin file: its state (loaded or failed), version, kinds, sha256 and mode (enforce or monitor).", []string{"file", "plugin", "state", "version", "kinds", "sha256", "mode"}, nil)
)

// quantiles exports /plugins' p50/p99 and state as metrics (the Manager's
// own collector exports the counters and the histogram).
type quantiles struct{ m *pluginhost.Manager }

// Describe implements prometheus.Collector.
func (q *quantiles) Describe(ch chan<- *prometheus.Desc) {
	ch <- descQuantile
	ch <- descInfo
}

// Collect implements prometheus.Collector.
func (q *quantiles) Collect(ch chan<- prometheus.Metric) {
	for _, in := range q.m.Plugins() {
		kinds := ""
		for i, k := range in.Kinds {
			if i > 0 {
				kinds += ","
			}
			kinds += string(k)
		}
		ch <- prometheus.MustNewConstMetric(descInfo, prometheus.GaugeValue, 1, in.Path, in.Name, string(in.State), in.Version, kinds, in.SHA256, string(in.Mode))
		if in.State != pluginhost.StateLoaded || in.Stats.Calls == 0 {
			continue
		}
		for _, x := range []struct {
			q     float64
			label string
		}{{0.5, "0.5"}, {0.99, "0.99"}} {
			ch <- prometheus.MustNewConstMetric(descQuantile, prometheus.GaugeValue, in.Stats.Quantile(x.q).Seconds(), in.Name, in.Version, x.label)
		}
	}
}
