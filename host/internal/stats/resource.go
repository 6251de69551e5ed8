package stats

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The kubelet's resource metrics (pkg/kubelet/metrics/collectors), the
// names metrics-server reads.
var (
	nodeCPUDesc = prometheus.NewDesc("node_cpu_usage_seconds_total",
		"Cumulative cpu time consumed by the node in core-seconds", nil, nil)
	nodeMemoryDesc = prometheus.NewDesc("node_memory_working_set_bytes",
		"Current working set of the node in bytes", nil, nil)
	podCPUDesc = prometheus.NewDesc("pod_cpu_usage_seconds_total",
		"Cumulative cpu time consumed by the pod in core-seconds", []string{"pod", "namespace"}, nil)
	podMemoryDesc = prometheus.NewDesc("pod_memory_working_set_bytes",
		"Current working set of the pod in bytes", []string{"pod", "namespace"}, nil)
	containerCPUDesc = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"Cumulative cpu time consumed by the container in core-seconds", []string{"container", "pod", "namespace"}, nil)
	containerMemoryDesc = prometheus.NewDesc("container_memory_working_set_bytes",
		"Current working set of the container in bytes", []string{"container", "pod", "namespace"}, nil)
	containerStartDesc = prometheus.NewDesc("container_start_time_seconds",
		"Start time of the container since unix epoch in seconds", []string{"container", "pod", "namespace"}, nil)
	scrapeErrorDesc = prometheus.NewDesc("resource_scrape_error",
		"1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
)

// resourceScrapeTimeout bounds the runtime calls of one scrape.
const resourceScrapeTimeout = 30 * time.Second

// resourceCollector turns a CPU-and-memory summary into resource metrics
// at each scrape.
type resourceCollector struct {
	p *Provider
}

// Describe implements prometheus.Collector.
func (c *resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodeCPUDesc, nodeMemoryDesc, podCPUDesc, podMemoryDesc, containerCPUDesc, containerMemoryDesc, containerStartDesc, scrapeErrorDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *resourceCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), resourceScrapeTimeout)
	defer cancel()
	s, err := c.p.Summary(ctx, true)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, 0)
	emitCPU(ch, nodeCPUDesc, s.Node.CPU)
	emitMemory(ch, nodeMemoryDesc, s.Node.Memory)
	for _, p := range s.Pods {
		emitCPU(ch, podCPUDesc, p.CPU, p.PodRef.Name, p.PodRef.Namespace)
		emitMemory(ch, podMemoryDesc, p.Memory, p.PodRef.Name, p.PodRef.Namespace)
		for _, k := range p.Containers {
			labels := []string{k.Name, p.PodRef.Name, p.PodRef.Namespace}
			ch <- prometheus.MustNewConstMetric(containerStartDesc, prometheus.GaugeValue, float64(k.StartTime.UnixNano())/1e9, labels...)
			emitCPU(ch, containerCPUDesc, k.CPU, labels...)
			emitMemory(ch, containerMemoryDesc, k.Memory, labels...)
		}
	}
}

func emitCPU(ch chan<- prometheus.Metric, d *prometheus.Desc, s *statsapi.CPUStats, labels ...string) {
	if s == nil || s.UsageCoreNanoSeconds == nil {
		return
	}
	m := prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(*s.UsageCoreNanoSeconds)/1e9, labels...)
	ch <- prometheus.NewMetricWithTimestamp(s.Time.Time, m)
}

func emitMemory(ch chan<- prometheus.Metric, d *prometheus.Desc, s *statsapi.MemoryStats, labels ...string) {
	if s == nil || s.WorkingSetBytes == nil {
		return
	}
	m := prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(*s.WorkingSetBytes), labels...)
	ch <- prometheus.NewMetricWithTimestamp(s.Time.Time, m)
}
