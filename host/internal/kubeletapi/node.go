package kubeletapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
)

// NodeEndpoints are the kubelet API's read endpoints about the node; a nil
// field leaves its endpoint out.
type NodeEndpoints struct {
	// Pods are the pods the node runs, spec with status (GET /pods).
	Pods func() []v1.Pod
	// RunningPods are the pods the runtime has, with their running
	// containers' names (GET /runningpods/).
	RunningPods func(ctx context.Context) ([]v1.Pod, error)
	// Config is the agent's configuration as the kubelet's /configz
	// shows it, the kubelet's own type, served under "kubeletconfig"
	// (GET /configz).
	Config func() *kubeletconfig.KubeletConfiguration
	// Gatherer serves GET /metrics and, with the prober's metrics only,
	// GET /metrics/probes.
	Gatherer prometheus.Gatherer
	// Summary serves GET /stats/summary.
	Summary http.Handler
	// ResourceMetrics serves GET /metrics/resource.
	ResourceMetrics http.Handler
	// CadvisorMetrics serves GET /metrics/cadvisor.
	CadvisorMetrics http.Handler
}

// configz is /configz's body, as the kubelet's component-base configz
// writes it: {"kubeletconfig": {…}}.
type configz struct {
	KubeletConfig *kubeletconfig.KubeletConfiguration `json:"kubeletconfig"`
}

// probeMetricPrefix names the prober's metrics (prober_probe_total), those
// of /metrics/probes.
const probeMetricPrefix = "prober_"

// RegisterNodeEndpoints adds e's endpoints to s, behind its authentication
// and authorization (nodes/pods, nodes/configz, nodes/metrics,
// nodes/stats, each also nodes/proxy where the kubelet allows it). Call it
// once.
func RegisterNodeEndpoints(s *Server, e NodeEndpoints) {
	if e.Pods != nil {
		s.Handle("GET /pods", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, podList(e.Pods()))
		}))
	}
	if e.RunningPods != nil {
		s.Handle("GET /runningpods/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			pods, err := e.RunningPods(r.Context())
			if err != nil {
				writeText(w, http.StatusInternalServerError, err.Error())
				return
			}
			writeJSON(w, podList(pods))
		}))
	}
	if e.Config != nil {
		s.Handle("GET /configz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, configz{e.Config()})
		}))
	}
	if e.Gatherer != nil {
		s.Handle("GET /metrics", promhttp.HandlerFor(e.Gatherer, promhttp.HandlerOpts{}))
		probes := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
			all, err := e.Gatherer.Gather()
			var out []*dto.MetricFamily
			for _, f := range all {
				if strings.HasPrefix(f.GetName(), probeMetricPrefix) {
					out = append(out, f)
				}
			}
			return out, err
		})
		s.Handle("GET /metrics/probes", promhttp.HandlerFor(probes, promhttp.HandlerOpts{}))
	}
	if e.Summary != nil {
		s.Handle("GET /stats/summary", e.Summary)
	}
	if e.ResourceMetrics != nil {
		s.Handle("GET /metrics/resource", e.ResourceMetrics)
	}
	if e.CadvisorMetrics != nil {
		s.Handle("GET /metrics/cadvisor", e.CadvisorMetrics)
	}
}

func podList(pods []v1.Pod) *v1.PodList {
	if pods == nil {
		pods = []v1.Pod{}
	}
	return &v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: pods}
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeText(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}
