package prober

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// BenchmarkProbe is the agent's own cost of one probe by a worker (its
// status read, the handler, the result and the metric), the runtime's
// exec stubbed out: what each probe of each container costs per period.
func BenchmarkProbe(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	host, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	for _, tc := range []struct {
		name    string
		handler v1.ProbeHandler
	}{
		{"exec", v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check"}}}},
		{"http", v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(int32(port))}}},
		{"tcp", v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			rt := &fakeRuntime{}
			st := &fakeStatuses{st: running(host, time.Now().Add(-time.Hour))}
			m, err := New(Config{Runtime: rt, Statuses: st, Changed: func(types.UID) {}})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Stop()
			pod := probePod(v1.Container{ReadinessProbe: &v1.Probe{ProbeHandler: tc.handler, PeriodSeconds: 3600, FailureThreshold: 1, TimeoutSeconds: 1}})
			w := newWorker(m, pod, "c", Readiness)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if !w.probeOnce() {
					b.Fatal("worker ended")
				}
			}
			b.StopTimer()
			if !m.Ready(&pod.Spec.Containers[0], "containerd://abc") {
				b.Fatal("probe never succeeded")
			}
		})
	}
}
