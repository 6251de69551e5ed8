package agent

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the sync loop's own; the workers, PLEG and admission chain
// register theirs on the same registerer.
type metrics struct {
	iterations *prometheus.CounterVec
	podStart   prometheus.Histogram
	rejected   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		iterations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmlet_sync_loop_iterations_total",
			Help: "Sync loop iterations by what woke the loop (config, pleg, sync, housekeeping).",
		}, []string{"source"}),
		podStart: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "wasmlet_pod_start_duration_seconds",
			Help:    "Time from the agent first seeing a pod to all its containers running.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wasmlet_pods_rejected_total",
			Help: "Pods admission rejected.",
		}),
	}
	for _, c := range []prometheus.Collector{m.iterations, m.podStart, m.rejected} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
