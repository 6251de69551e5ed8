//go:build !wasip1

package imageallowlist

import (
	"testing"

	"github.com/wasmlet/wasmlet/sdk"
)

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"nginx":                          "docker.io/library/nginx",
		"nginx:1.27":                     "docker.io/library/nginx:1.27",
		"bitnami/redis":                  "docker.io/bitnami/redis",
		"index.docker.io/library/nginx":  "docker.io/library/nginx",
		"localhost/app":                  "localhost/app",
		"localhost:5000/app:1":           "localhost:5000/app:1",
		"registry.k8s.io/pause:3.10":     "registry.k8s.io/pause:3.10",
		"wasmlet.local/testbox:1.0":      "wasmlet.local/testbox:1.0",
		"docker.io/library/busybox@sha1": "docker.io/library/busybox@sha1",
	} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAllowed(t *testing.T) {
	tests := []struct {
		ref     string
		allowed []string
		want    bool
	}{
		{"docker.io/library/nginx:1", []string{"docker.io/library"}, true},
		{"docker.io/library2/x", []string{"docker.io/library"}, false},
		{"docker.io/library/nginx", []string{"nginx"}, true},
		{"docker.io/library/nginx-evil", []string{"nginx"}, false},
		{"registry.k8s.io/pause:3", []string{"registry.k8s.io"}, true},
		{"registry.k8s.io.evil.com/pause", []string{"registry.k8s.io"}, false},
		{"localhost:5000/a", []string{"localhost:5000"}, true},
		{"ghcr.io/acme/x", []string{"ghcr.io/acme/"}, true},
		{"quay.io/a/b", []string{"*"}, true},
		{"quay.io/a/b", nil, false},
	}
	for _, tt := range tests {
		if got := Allowed(tt.ref, tt.allowed); got != tt.want {
			t.Errorf("Allowed(%q, %q) = %v, want %v", tt.ref, tt.allowed, got, tt.want)
		}
	}
}

// TestImageAllowlist_Admit checks that a missing config is an error, not a
// verdict.
func TestImageAllowlist_Admit(t *testing.T) {
	prev := sdk.UseNativeHost(&sdk.NativeHost{})
	t.Cleanup(func() { sdk.UseNativeHost(prev) })
	_, err := Policy().Admitter.Admit(sdk.AdmitRequest{Pod: sdk.Pod{Spec: sdk.PodSpec{Containers: []sdk.Container{{Name: "c", Image: "nginx"}}}}})
	if err == nil {
		t.Fatal("no error without config allowed")
	}
}
