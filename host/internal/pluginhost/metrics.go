package pluginhost

import (
	"github.com/prometheus/client_golang/prometheus"
)

var (
	descCalls = prometheus.NewDesc("wasmlet_plugin_calls_total", "Plugin calls.", []string{"plugin", "version"}, nil)
	descErrs  = prometheus.NewDesc("wasmlet_plugin_errors_total", "Failed plugin calls (timeouts and error answers included).", []string{"plugin", "version"}, nil)
	descTO    = prometheus.NewDesc("wasmlet_plugin_timeouts_total", "Plugin calls stopped by their deadline.", []string{"plugin", "version"}, nil)
	descLat   = prometheus.NewDesc("wasmlet_plugin_call_duration_seconds", "Plugin call latency.", []string{"plugin", "version"}, nil)
	descDrop  = prometheus.NewDesc("wasmlet_plugin_log_lines_dropped_total", "Guest log lines dropped over the plugin's log budget.", []string{"plugin", "version"}, nil)
	descUp    = prometheus.NewDesc("wasmlet_plugin_loaded", "1 when the plugin file serves, 0 when it failed to load.", []string{"file", "plugin"}, nil)
)

// collector renders a Manager's snapshot as prometheus metrics at scrape
// time, so reloads never leave stale or duplicate collectors behind.
type collector struct{ m *Manager }

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCalls, descErrs, descTO, descDrop, descLat, descUp} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	for _, in := range c.m.Plugins() {
		up := 0.0
		if in.State == StateLoaded {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, up, in.Path, in.Name)
		if in.State != StateLoaded {
			continue
		}
		s := in.Stats
		ch <- prometheus.MustNewConstMetric(descCalls, prometheus.CounterValue, float64(s.Calls), in.Name, in.Version)
		ch <- prometheus.MustNewConstMetric(descErrs, prometheus.CounterValue, float64(s.Errors), in.Name, in.Version)
		ch <- prometheus.MustNewConstMetric(descTO, prometheus.CounterValue, float64(s.Timeouts), in.Name, in.Version)
		ch <- prometheus.MustNewConstMetric(descDrop, prometheus.CounterValue, float64(s.LogLinesDropped), in.Name, in.Version)
		buckets := map[float64]uint64{}
		var cum uint64
		for i, b := range LatencyBuckets {
			cum += s.Latency[i]
			buckets[b.Seconds()] = cum
		}
		ch <- prometheus.MustNewConstHistogram(descLat, s.Calls, s.LatencySum.Seconds(), buckets, in.Name, in.Version)
	}
}
