package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

func TestServer_healthz(t *testing.T) {
	var plegErr error
	s, err := New(Config{Checks: []Check{
		{Name: "runtime", Check: func() error { return nil }},
		{Name: "pleg", Check: func() error { return plegErr }},
	}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path     string
		plegErr  error
		wantCode int
		wantBody string
	}{
		{"/healthz", nil, 200, "ok"},
		{"/healthz?verbose", nil, 200, "[+]ping ok\n[+]runtime ok\n[+]pleg ok\nhealthz check passed\n"},
		{"/healthz", errors.New("relist stalled for 4m0s"), 500, "[+]ping ok\n[+]runtime ok\n[-]pleg failed: relist stalled for 4m0s\nhealthz check failed\n"},
	}
	for _, tt := range tests {
		plegErr = tt.plegErr
		code, body := get(t, s.Handler(), tt.path)
		if code != tt.wantCode || body != tt.wantBody {
			t.Errorf("%s with pleg error %v: %d %q, want %d %q", tt.path, tt.plegErr, code, body, tt.wantCode, tt.wantBody)
		}
	}
}

func TestServer_pods(t *testing.T) {
	pods := []v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "web-n1", Namespace: "default", UID: "u1"}, Status: v1.PodStatus{Phase: v1.PodRunning}}}
	s, err := New(Config{Pods: func() []v1.Pod { return pods }})
	if err != nil {
		t.Fatal(err)
	}
	code, body := get(t, s.Handler(), "/pods")
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	var list v1.PodList
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "PodList" || list.APIVersion != "v1" || len(list.Items) != 1 || list.Items[0].Status.Phase != v1.PodRunning {
		t.Errorf("list %+v", list)
	}
	pods = nil
	if _, body := get(t, s.Handler(), "/pods"); !strings.Contains(body, `"items":[]`) {
		t.Errorf("empty list body %s", body)
	}
}

func TestServer_Run(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "wasmlet_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Inc()
	s, err := New(Config{Gatherer: reg, Handlers: map[string]http.Handler{
		"/plugins": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "[]") }),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.Addr().String(), "127.0.0.1:") {
		t.Errorf("default address %s", s.Addr())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	for path, want := range map[string]string{"/metrics": "wasmlet_test_total 1", "/plugins": "[]", "/healthz": "ok"} {
		resp, err := http.Get("http://" + s.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), want) {
			t.Errorf("%s: %q does not contain %q", path, b, want)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestNew_portInUse(t *testing.T) {
	a, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	n := a.Addr().(*net.TCPAddr).Port
	if _, err := New(Config{Port: n}); err == nil || !strings.Contains(err.Error(), "listen") {
		t.Errorf("second listen on %d: %v", n, err)
	}
}

func BenchmarkServer_pods1000(b *testing.B) {
	pods := make([]v1.Pod, 1000)
	for i := range pods {
		pods[i] = v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%04d-n1", i), Namespace: "default", UID: "0123456789abcdef0123456789abcdef"},
			Spec:       v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "busybox:1.36"}}},
			Status:     v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{Name: "c", Ready: true, ContainerID: "containerd://abc"}}},
		}
	}
	s, err := New(Config{Pods: func() []v1.Pod { return pods }})
	if err != nil {
		b.Fatal(err)
	}
	h := s.Handler()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/pods", nil))
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
}

// The healthz server answers /healthz with the same checks and nothing
// else.
func TestServer_healthzOnly(t *testing.T) {
	s, err := New(Config{HealthzOnly: true, Handlers: map[string]http.Handler{"/plugins": http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})},
		Checks: []Check{{Name: "runtime", Check: func() error { return errors.New("down") }}}})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{"/healthz": 500, "/pods": 404, "/metrics": 404, "/plugins": 404} {
		if code, body := get(t, s.Handler(), path); code != want {
			t.Errorf("%s: %d %q, want %d", path, code, body, want)
		}
	}
}
