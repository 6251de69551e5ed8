package stats

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// SummaryHandler serves GET /stats/summary: the summary as JSON;
// ?only_cpu_and_memory=true leaves out filesystems and networks. A bad
// value of the parameter is a 400 naming it; a summary that cannot be
// built is a 500 with the error.
func (p *Provider) SummaryHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		only := false
		if v := r.URL.Query().Get("only_cpu_and_memory"); v != "" {
			var err error
			if only, err = strconv.ParseBool(v); err != nil {
				http.Error(w, "invalid only_cpu_and_memory: "+strconv.Quote(v)+" is not a boolean", http.StatusBadRequest)
				return
			}
		}
		s, err := p.Summary(r.Context(), only)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(s)
	})
}

// ResourceMetricsHandler serves GET /metrics/resource: the node's, pods'
// and containers' CPU and memory in Prometheus text, each sample stamped
// with the time it was read (the kubelet's resource metrics).
func (p *Provider) ResourceMetricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(&resourceCollector{p: p})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
