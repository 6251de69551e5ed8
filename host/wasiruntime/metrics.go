package wasiruntime

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the runtime's Prometheus metrics, registered when
// Config.Registerer is set.
type metrics struct {
	starts  prometheus.Counter
	exits   *prometheus.CounterVec
	running prometheus.Gauge
	compile prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		starts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "wasmlet", Subsystem: "wasiruntime", Name: "container_starts_total",
			Help: "Containers started by the embedded WASI runtime.",
		}),
		exits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "wasmlet", Subsystem: "wasiruntime", Name: "container_exits_total",
			Help: "Containers ended, by CRI reason (Completed, Error, OOMKilled).",
		}, []string{"reason"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "wasmlet", Subsystem: "wasiruntime", Name: "containers_running",
			Help: "Containers running in the embedded WASI runtime.",
		}),
		compile: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "wasmlet", Subsystem: "wasiruntime", Name: "compile_duration_seconds",
			Help:    "Time to compile an image's module (from the compilation cache when it has it).",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 6),
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.starts, m.exits, m.running, m.compile} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
		}
	}
	return m, nil
}
