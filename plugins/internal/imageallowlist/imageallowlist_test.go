//go:build !wasip1

package imageallowlist

import (
	"strings"
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

// TestImageAllowlist_CheckConfig refuses a config without allowed, or with
// an entry that is a URL or holds a digest, naming the entry; it accepts a
// list of registries and prefixes, "*" and an empty list (nothing allowed).
// In the policy bundle the same check runs on its prefixed keys.
func TestImageAllowlist_CheckConfig(t *testing.T) {
	tests := []struct {
		name   string
		config map[string]string
		want   string // a part of the error; "" accepts
	}{
		{"registries and prefixes", map[string]string{"allowed": "registry.k8s.io, docker.io/library, ghcr.io/acme/, localhost:5000"}, ""},
		{"everything", map[string]string{"allowed": "*"}, ""},
		{"nothing", map[string]string{"allowed": ""}, ""},
		{"not set", map[string]string{"exemptNamespaces": "kube-system"}, "config allowed is not set"},
		{"a URL", map[string]string{"allowed": "registry.k8s.io, https://ghcr.io/acme"}, `entry "https://ghcr.io/acme" is a URL`},
		{"a digest", map[string]string{"allowed": "docker.io/library/nginx@sha256:0123"}, `entry "docker.io/library/nginx@sha256:0123" holds a digest`},
		{"a bundle's own key", map[string]string{"image-allowlist.allowed": "ghcr.io"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prev := sdk.UseNativeHost(&sdk.NativeHost{Config: tt.config})
			t.Cleanup(func() { sdk.UseNativeHost(prev) })
			checker, ok := Policy().Admitter.(sdk.ConfigChecker)
			if !ok {
				t.Fatal("the policy's Admitter is not an sdk.ConfigChecker")
			}
			var err error
			if strings.HasPrefix(tt.name, "a bundle") {
				b := sdk.NewBundle(Policy())
				err = b.CheckConfig()
			} else {
				err = checker.CheckConfig()
			}
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("CheckConfig() = %v, want the config accepted", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("CheckConfig() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
