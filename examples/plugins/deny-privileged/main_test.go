//go:build !wasip1

package main

import (
	"testing"

	"github.com/wasmlet/wasmlet/sdk"
	"github.com/wasmlet/wasmlet/sdk/sdktest"
)

func privileged(v bool) *sdk.SecurityContext { return &sdk.SecurityContext{Privileged: &v} }

// TestPolicy_Admit tests the policy's logic natively on SDK pod values.
func TestPolicy_Admit(t *testing.T) {
	tests := []struct {
		name        string
		config      map[string]string
		pod         sdk.Pod
		wantAllowed bool
	}{
		{"no security context", nil, sdk.Pod{Spec: sdk.PodSpec{Containers: []sdk.Container{{Name: "a"}}}}, true},
		{"privileged false", nil, sdk.Pod{Spec: sdk.PodSpec{Containers: []sdk.Container{{Name: "a", SecurityContext: privileged(false)}}}}, true},
		{"security context without privileged", nil, sdk.Pod{Spec: sdk.PodSpec{Containers: []sdk.Container{{Name: "a", SecurityContext: &sdk.SecurityContext{}}}}}, true},
		{"privileged app container", nil, sdk.Pod{Spec: sdk.PodSpec{Containers: []sdk.Container{{Name: "a"}, {Name: "b", SecurityContext: privileged(true)}}}}, false},
		{"privileged init container", nil, sdk.Pod{Spec: sdk.PodSpec{InitContainers: []sdk.Container{{Name: "i", SecurityContext: privileged(true)}}, Containers: []sdk.Container{{Name: "a"}}}}, false},
		{"privileged ephemeral container", nil, sdk.Pod{Spec: sdk.PodSpec{EphemeralContainers: []sdk.Container{{Name: "e", SecurityContext: privileged(true)}}}}, false},
		{"exempt namespace", map[string]string{"allowNamespaces": "a, kube-system"}, sdk.Pod{ObjectMeta: sdk.ObjectMeta{Namespace: "kube-system"}, Spec: sdk.PodSpec{Containers: []sdk.Container{{Name: "b", SecurityContext: privileged(true)}}}}, true},
		{"other namespace not exempt", map[string]string{"allowNamespaces": "kube-system"}, sdk.Pod{ObjectMeta: sdk.ObjectMeta{Namespace: "default"}, Spec: sdk.PodSpec{Containers: []sdk.Container{{Name: "b", SecurityContext: privileged(true)}}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prev := sdk.UseNativeHost(&sdk.NativeHost{Config: tt.config})
			t.Cleanup(func() { sdk.UseNativeHost(prev) })
			v, err := policy{}.Admit(sdk.AdmitRequest{Pod: tt.pod})
			if err != nil {
				t.Fatal(err)
			}
			if v.Allowed != tt.wantAllowed {
				t.Fatalf("allowed = %v, want %v (%s: %s)", v.Allowed, tt.wantAllowed, v.Reason, v.Message)
			}
			if !v.Allowed && v.Reason != "Privileged" {
				t.Errorf("reason = %q, want Privileged", v.Reason)
			}
		})
	}
}

// TestPolicy_Fixtures runs tests/*.yaml natively through sdk.Handle, the
// same JSON path the wasm export takes. wasmlet's root module runs the same
// cases against the compiled .wasm through the real plugin host
// (plugintest.RunFixtures, in plugintest/shipped).
func TestPolicy_Fixtures(t *testing.T) { sdktest.RunFixtures(t, ".") }
