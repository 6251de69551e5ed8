// Package metrictest reads Prometheus metrics back in tests.
package metrictest

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Counters gathers the counter vector name from g as a map from its label
// values joined by "/" (in label-name order, e.g. "admitter/result") to
// its value.
func Counters(tb testing.TB, g prometheus.Gatherer, name string) map[string]float64 {
	tb.Helper()
	mfs, err := g.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetValue())
			}
			out[strings.Join(labels, "/")] = m.GetCounter().GetValue()
		}
	}
	return out
}
