package harness

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestAgent_Metric(t *testing.T) {
	const body = `# HELP wasmlet_admissions_total Admissions.
# TYPE wasmlet_admissions_total counter
wasmlet_admissions_total{plugin="a",result="allow"} 3
wasmlet_admissions_total{plugin="b",result="reject"} 2
wasmlet_admissions_total{plugin="a",result="reject"} 1
wasmlet_admissions_total_other 100
wasmlet_up 1
`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, body)
	}))
	defer srv.Close()
	a := &Agent{Port: srv.Listener.Addr().(*net.TCPAddr).Port}
	tests := []struct {
		name    string
		metric  string
		match   []string
		want    float64
		wantErr error
	}{
		{"all label sets", "wasmlet_admissions_total", nil, 6, nil},
		{"one match", "wasmlet_admissions_total", []string{`result="reject"`}, 3, nil},
		{"every match must hold", "wasmlet_admissions_total", []string{`result="reject"`, `plugin="a"`}, 1, nil},
		{"no labels", "wasmlet_up", nil, 1, nil},
		{"absent", "wasmlet_down", nil, 0, ErrNoMetric},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := a.Metric(tt.metric, tt.match...)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("Metric(%s, %q) = %v, want %v", tt.metric, tt.match, got, tt.want)
			}
		})
	}
}

func TestRunning(t *testing.T) {
	running := v1.ContainerStatus{Name: "a", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
	waiting := v1.ContainerStatus{Name: "b", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	pod := func(phase v1.PodPhase, containers int, st ...v1.ContainerStatus) *v1.Pod {
		p := &v1.Pod{Status: v1.PodStatus{Phase: phase, ContainerStatuses: st}}
		for range containers {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{})
		}
		return p
	}
	tests := []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{"all running", pod(v1.PodRunning, 2, running, running), true},
		{"one waiting", pod(v1.PodRunning, 2, running, waiting), false},
		{"a status missing", pod(v1.PodRunning, 2, running), false},
		{"pending", pod(v1.PodPending, 1, running), false},
	}
	for _, tt := range tests {
		if got := Running(tt.pod); got != tt.want {
			t.Errorf("%s: Running = %v, want %v (%s)", tt.name, got, tt.want, PodSummary(tt.pod))
		}
	}
}
