package stats

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The part of cAdvisor's container metrics (the kubelet's
// /metrics/cadvisor) that the runtime's stats give: CPU, memory, the
// writable layer, start time and the pod's network, with cAdvisor's labels
// (container, pod, namespace; the pod's network on container "POD"). The
// per-cgroup counters cAdvisor reads itself (threads, file descriptors,
// block I/O, memory cache, limits …) are not served.
var (
	cadvisorLabels  = []string{"container", "pod", "namespace"}
	cadvisorMetrics = map[string]*prometheus.Desc{}
)

func cadvisorDesc(name, help string) *prometheus.Desc {
	d := prometheus.NewDesc(name, help, cadvisorLabels, nil)
	cadvisorMetrics[name] = d
	return d
}

var (
	cadvisorCPU        = cadvisorDesc("container_cpu_usage_seconds_total", "Cumulative cpu time consumed in seconds.")
	cadvisorWorkingSet = cadvisorDesc("container_memory_working_set_bytes", "Current working set in bytes.")
	cadvisorUsage      = cadvisorDesc("container_memory_usage_bytes", "Current memory usage in bytes, including all memory regardless of when it was accessed.")
	cadvisorRSS        = cadvisorDesc("container_memory_rss", "Size of RSS in bytes.")
	cadvisorFsUsage    = cadvisorDesc("container_fs_usage_bytes", "Number of bytes that are consumed by the container on this filesystem.")
	cadvisorStart      = cadvisorDesc("container_start_time_seconds", "Start time of the container since unix epoch in seconds.")
	cadvisorLastSeen   = cadvisorDesc("container_last_seen", "Last time a container was seen by the exporter")
	cadvisorRxBytes    = cadvisorDesc("container_network_receive_bytes_total", "Cumulative count of bytes received")
	cadvisorRxErrors   = cadvisorDesc("container_network_receive_errors_total", "Cumulative count of errors encountered while receiving")
	cadvisorTxBytes    = cadvisorDesc("container_network_transmit_bytes_total", "Cumulative count of bytes transmitted")
	cadvisorTxErrors   = cadvisorDesc("container_network_transmit_errors_total", "Cumulative count of errors encountered while transmitting")
)

// cadvisorCollector turns the full summary into cAdvisor-style container
// metrics at each scrape.
type cadvisorCollector struct {
	p   *Provider
	now func() time.Time
}

// Describe implements prometheus.Collector.
func (c *cadvisorCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range cadvisorMetrics {
		ch <- d
	}
}

// Collect implements prometheus.Collector; a summary that cannot be built
// yields no samples (the scrape's error is the runtime's, logged by it).
func (c *cadvisorCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), resourceScrapeTimeout)
	defer cancel()
	s, err := c.p.Summary(ctx, false)
	if err != nil {
		return
	}
	now := float64(c.now().Unix())
	u64 := func(d *prometheus.Desc, t prometheus.ValueType, v *uint64, labels []string) {
		if v != nil {
			ch <- prometheus.MustNewConstMetric(d, t, float64(*v), labels...)
		}
	}
	for _, p := range s.Pods {
		if n := p.Network; n != nil {
			labels := []string{"POD", p.PodRef.Name, p.PodRef.Namespace}
			for _, i := range n.Interfaces {
				if i.Name != n.Name {
					continue
				}
				u64(cadvisorRxBytes, prometheus.CounterValue, i.RxBytes, labels)
				u64(cadvisorRxErrors, prometheus.CounterValue, i.RxErrors, labels)
				u64(cadvisorTxBytes, prometheus.CounterValue, i.TxBytes, labels)
				u64(cadvisorTxErrors, prometheus.CounterValue, i.TxErrors, labels)
			}
		}
		for _, k := range p.Containers {
			labels := []string{k.Name, p.PodRef.Name, p.PodRef.Namespace}
			ch <- prometheus.MustNewConstMetric(cadvisorStart, prometheus.GaugeValue, float64(k.StartTime.Unix()), labels...)
			ch <- prometheus.MustNewConstMetric(cadvisorLastSeen, prometheus.GaugeValue, now, labels...)
			if k.CPU != nil && k.CPU.UsageCoreNanoSeconds != nil {
				ch <- prometheus.MustNewConstMetric(cadvisorCPU, prometheus.CounterValue, float64(*k.CPU.UsageCoreNanoSeconds)/1e9, labels...)
			}
			if m := k.Memory; m != nil {
				u64(cadvisorWorkingSet, prometheus.GaugeValue, m.WorkingSetBytes, labels)
				u64(cadvisorUsage, prometheus.GaugeValue, m.UsageBytes, labels)
				u64(cadvisorRSS, prometheus.GaugeValue, m.RSSBytes, labels)
			}
			if fs := k.Rootfs; fs != nil {
				u64(cadvisorFsUsage, prometheus.GaugeValue, fs.UsedBytes, labels)
			}
		}
	}
}

// CadvisorMetricsHandler serves GET /metrics/cadvisor: the containers'
// metrics under cAdvisor's names, as far as the runtime's stats give them
// (see cadvisorMetrics).
func (p *Provider) CadvisorMetricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(&cadvisorCollector{p: p, now: time.Now})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
