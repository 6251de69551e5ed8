package allocatable

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func list(kv ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func TestReservation_Allocatable(t *testing.T) {
	capacity := list("cpu", "4", "memory", "8Gi", "ephemeral-storage", "100Gi", "pods", "110")
	tests := []struct {
		name    string
		cfg     Config
		want    v1.ResourceList
		wantErr string
	}{
		{"nothing reserved", Config{}, capacity, ""},
		{"kube and system reserved add up", Config{
			KubeReserved:   map[string]string{"cpu": "100m", "memory": "500Mi", "pid": "1000"},
			SystemReserved: map[string]string{"cpu": "400m", "memory": "1Gi", "ephemeral-storage": "10Gi"},
		}, list("cpu", "3500m", "memory", "6668Mi", "ephemeral-storage", "90Gi", "pods", "110"), ""},
		{"eviction-hard quantities and percentages of capacity", Config{
			KubeReserved: map[string]string{"memory": "1Gi"},
			EvictionHard: map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "pid.available": "5%", "imagefs.available": "15%"},
		}, // 10% is the float32 0.1 of the kubelet: 10737418400 bytes of 100Gi.
			list("cpu", "4", "memory", "7068Mi", "ephemeral-storage", "96636764000", "pods", "110"), ""},
		{"a memory percentage", Config{EvictionHard: map[string]string{"memory.available": "25%"}},
			list("cpu", "4", "memory", "6Gi", "ephemeral-storage", "100Gi", "pods", "110"), ""},
		{"0% and 100% are no threshold", Config{EvictionHard: map[string]string{"memory.available": "0%", "nodefs.available": "100%"}}, capacity, ""},
		{"more reserved than there is", Config{SystemReserved: map[string]string{"cpu": "5"}}, nil,
			`resource "cpu" has a reservation of 5 but a capacity of 4`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.Allocatable(capacity)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for n, q := range tt.want {
				if g := got[n]; g.Cmp(q) != 0 {
					t.Errorf("%s: got %s, want %s", n, g.String(), q.String())
				}
			}
		})
	}
}

func TestNew_errors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"unknown resource", Config{KubeReserved: map[string]string{"gpu": "1"}}, `kubeReserved: cannot reserve "gpu"`},
		{"bad quantity", Config{SystemReserved: map[string]string{"memory": "lots"}}, `systemReserved: memory="lots"`},
		{"negative", Config{SystemReserved: map[string]string{"cpu": "-1"}}, "cannot be negative"},
		{"unknown signal", Config{EvictionHard: map[string]string{"memory.free": "1Gi"}}, `evictionHard: unsupported eviction signal "memory.free"`},
		{"percentage over 100", Config{EvictionHard: map[string]string{"nodefs.available": "120%"}}, "between 0% and 100%"},
		{"zero quantity", Config{EvictionHard: map[string]string{"memory.available": "0"}}, "must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestReservation_HardThresholds(t *testing.T) {
	r, err := New(Config{EvictionHard: map[string]string{"pid.available": "10%", "memory.available": "1Gi"}})
	if err != nil {
		t.Fatal(err)
	}
	th := r.HardThresholds()
	if len(th) != 2 || th[0].Signal != SignalMemoryAvailable || th[0].Quantity.String() != "1Gi" || th[1].Signal != SignalPIDAvailable || th[1].Percentage != 0.1 {
		t.Fatalf("got %+v", th)
	}
}
