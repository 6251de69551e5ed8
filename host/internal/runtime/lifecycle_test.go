package runtime

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/wasmlet/wasmlet/host/internal/container"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestManager_PostStartHTTPHook(t *testing.T) {
	var code, hits atomic.Int32
	code.Store(http.StatusOK)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path != "/started" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(int(code.Load()))
	}))
	defer srv.Close()
	host, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(portStr)
	hook := &v1.Lifecycle{PostStart: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Host: host, Port: intstr.FromInt32(int32(p)), Path: "started"}}}

	m, _ := newTestManager(t)
	pod := testPod("hook-ok", v1.RestartPolicyNever, "main")
	pod.Spec.Containers[0].Lifecycle = hook
	if _, r := syncOnce(t, m, pod, NewBackOff()); r.Error() != nil {
		t.Fatalf("postStart answered 200: %v", r.Error())
	}
	if hits.Load() != 1 {
		t.Errorf("hook called %d times, want once", hits.Load())
	}

	code.Store(http.StatusInternalServerError)
	bad := testPod("hook-bad", v1.RestartPolicyNever, "main")
	bad.Spec.Containers[0].Lifecycle = hook
	st, r := syncOnce(t, m, bad, NewBackOff())
	if r.Error() == nil {
		t.Fatal("postStart answered 500 and the start did not fail")
	}
	if reason, _, ok := m.WaitingReason(bad.UID, "main"); !ok || reason != container.ErrPostStartHook.Error() {
		t.Errorf("waiting reason %q (%v), want %s", reason, ok, container.ErrPostStartHook)
	}
	if c := st.FindContainer("main"); c == nil || c.State == container.StateRunning {
		t.Errorf("container after a failed postStart: %+v, want stopped", c)
	}
}
