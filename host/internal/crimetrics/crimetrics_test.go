package crimetrics

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

func TestWrap_timesEachCallByMethod(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	rs, is := m.Wrap(critest.NewFakeRuntimeService(), critest.NewFakeImageService())
	ctx := context.Background()
	cfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "u"}}
	id, err := rs.RunPodSandbox(ctx, cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	// The wrapped calls reach the runtime and return its answer.
	for range 2 {
		if _, err := rs.PodSandboxStatus(ctx, id, false); err != nil {
			t.Fatalf("PodSandboxStatus of the sandbox the wrapper ran: %v", err)
		}
	}
	is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "busybox"}, false)
	// An untimed method passes through to the embedded service.
	if _, err := rs.Version(ctx, "v1"); err != nil {
		t.Fatalf("Version through the wrapper: %v", err)
	}
	got := map[string]uint64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "wasmlet_cri_call_duration_seconds" {
			continue
		}
		for _, s := range mf.GetMetric() {
			got[s.GetLabel()[0].GetValue()] = s.GetHistogram().GetSampleCount()
		}
	}
	want := map[string]uint64{"RunPodSandbox": 1, "PodSandboxStatus": 2, "ImageStatus": 1}
	if len(got) != len(want) {
		t.Errorf("methods observed: %v, want %v", got, want)
	}
	for method, n := range want {
		if got[method] != n {
			t.Errorf("%s observed %d times, want %d", method, got[method], n)
		}
	}
}
