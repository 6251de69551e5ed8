package main

import (
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/wasmlet/wasmlet/hack/kubeletconfig"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{9, 1, 4}, 4},
		{[]float64{4, 1, 9, 2}, 3},
	} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestSettings_wasmletFlags: each setting is wasmlet's flag of the same
// meaning; unset ones are left out.
func TestSettings_wasmletFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    settings
		want []string
	}{
		{"eviction only", settings{EvictionHard: "memory.available<1Mi"}, []string{"--eviction-hard", "memory.available<1Mi"}},
		{"all", settings{EvictionHard: "memory.available<5", TransitionPeriod: "10s", ImageGC: &imageGC{High: 1, Low: 0, MinAge: "1m"}},
			[]string{"--eviction-hard", "memory.available<5", "--eviction-pressure-transition-period", "10s",
				"--image-gc-high-threshold", "1", "--image-gc-low-threshold", "0", "--minimum-image-gc-age", "1m"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.wasmletFlags(); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSettings_kubeletConfig: the lines appended to the kubelet's
// rendered configuration make a document without duplicate keys that
// carries each setting but evictionHard (a flag, which overrides the
// template's).
func TestSettings_kubeletConfig(t *testing.T) {
	base, err := kubeletconfig.Render(map[string]string{"containerRuntimeEndpoint": "unix:///x.sock"})
	if err != nil {
		t.Fatal(err)
	}
	s := settings{EvictionHard: "memory.available<5", TransitionPeriod: "10s", ImageGC: &imageGC{High: 1, Low: 0, MinAge: "1m"}}
	var doc map[string]any
	if err := yaml.UnmarshalStrict([]byte(base+s.kubeletConfig()), &doc); err != nil {
		t.Fatalf("the configuration does not parse strictly: %v", err)
	}
	for k, want := range map[string]any{
		"evictionPressureTransitionPeriod": "10s", "imageGCHighThresholdPercent": float64(1),
		"imageGCLowThresholdPercent": float64(0), "imageMinimumGCAge": "1m",
	} {
		if doc[k] != want {
			t.Errorf("%s = %#v, want %#v", k, doc[k], want)
		}
	}
	if got := (settings{EvictionHard: "memory.available<5"}).kubeletConfig(); got != "" {
		t.Errorf("no settings but eviction: %q, want nothing appended", got)
	}
}
