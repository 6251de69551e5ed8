//go:build !wasip1

package main

import (
	"encoding/json"
	"testing"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/sdk"
	"github.com/wasmlet/wasmlet/sdk/sdktest"
	"github.com/wasmlet/wasmlet/sdk/sdktest/fixture"
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
// same JSON path the wasm export takes.
func TestPolicy_Fixtures(t *testing.T) {
	m, cases := readFixtures(t)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			prev := sdk.UseNativeHost(&sdk.NativeHost{Config: c.MergedConfig(m.Config)})
			t.Cleanup(func() { sdk.UseNativeHost(prev) })
			in, err := json.Marshal(c.Request())
			if err != nil {
				t.Fatal(err)
			}
			var resp abi.AdmitResponse
			if err := json.Unmarshal(sdk.Handle(abi.KindAdmission, in), &resp); err != nil {
				t.Fatal(err)
			}
			if err := c.Check(resp); err != nil {
				t.Errorf("%s: %v", c.File, err)
			}
		})
	}
}

// TestPolicy_Wasm builds the plugin for wasip1 and runs tests/*.yaml through
// wasmlet's real plugin host.
func TestPolicy_Wasm(t *testing.T) {
	m, cases := readFixtures(t)
	wasm := sdktest.Build(t, ".")
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			p := sdktest.Load(t, wasm, c.MergedConfig(m.Config))
			resp, err := p.AdmitRequest(c.Request())
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Check(resp); err != nil {
				t.Errorf("%s: %v", c.File, err)
			}
		})
	}
}

func readFixtures(t *testing.T) (abi.Manifest, []fixture.Case) {
	t.Helper()
	m, err := fixture.ReadManifest(".")
	if err != nil {
		t.Fatal(err)
	}
	cases, err := fixture.ReadCases(".")
	if err != nil {
		t.Fatal(err)
	}
	return m, cases
}
